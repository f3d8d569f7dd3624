"""How a test example becomes a prompt: the protocol, the wording, the demonstrations.

Two protocols:

* ``"interp"`` (the default): ``n_shots`` demonstrations drawn fresh for each test example, a
  BOS exactly when the model's own tokenizer adds one, and an answer that must end where greedy
  generation would stop (the line's end marker, a newline or EOS). Templates ``bare`` / ``obey``.
* ``"paper"``: the paper's base-model prompts. Retrieval: ``n_shots`` examples are drawn and the
  first goes into the template's explanation block, so a 5-shot prompt shows 4 demonstration
  lines; templates ``simple_rule``, ``math_rule``, ``simple_rule_explained``,
  ``math_rule_explained``; the answer is its first symbol (no end marker needed). Copying:
  templates ``bare``, ``obey``, ``hint``; the answer must be followed by ``<eos>`` or a blank
  line (a copy followed by a single newline and more text is wrong). Never a BOS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Protocol = Literal["interp", "paper"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)
Template = Literal["bare", "obey", "hint", "simple_rule", "math_rule", "simple_rule_explained", "math_rule_explained"]
TEMPLATES: tuple[str, ...] = ("bare", "obey")  # this toolkit's own wordings
PAPER_TEMPLATES: dict[str, tuple[str, ...]] = {
    "retrieval": ("simple_rule", "math_rule", "simple_rule_explained", "math_rule_explained"),
    "copying": ("bare", "obey", "hint"),
}
ALL_TEMPLATES: tuple[str, ...] = get_args(Template)
DEFAULT_DEMO_LENGTH = {("retrieval", True): 6, ("retrieval", False): 7, ("copying", True): 5, ("copying", False): 5}


@dataclass(frozen=True)
class PromptConfig:
    """How a test example is wrapped: protocol, shots, wording and demonstration length.

    ``template=None`` picks the protocol's first template for the task's family (``bare`` for
    ``interp``; ``simple_rule`` / ``bare`` for ``paper``)."""

    n_shots: int = 5
    template: str | None = None
    demo_length: int | None = None  # None: the paper's (6 unique / 7 non-unique retrieval, 5 copying)
    prepend_bos: bool | None = None  # None: the model's default ("paper": never)
    protocol: str = "interp"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol={self.protocol!r} is not one of {PROTOCOLS}")
        if self.n_shots < 0:
            raise ValueError(f"n_shots={self.n_shots} must be >= 0")
        if self.protocol == "paper" and self.n_shots < 1:
            raise ValueError("n_shots=0: the paper's protocol draws at least one example (its first explains the rule)")
        allowed = self.templates_for()
        if self.template is not None and self.template not in allowed:
            raise ValueError(f"template={self.template!r} is not a template of the {self.protocol!r} protocol; "
                             f"expected one of {allowed}")
        if self.demo_length is not None and self.demo_length < 1:
            raise ValueError(f"demo_length={self.demo_length} must be >= 1")
        if self.protocol == "paper" and self.prepend_bos:
            raise ValueError("prepend_bos=True: the paper's prompts never start with a BOS")

    @classmethod
    def paper(cls, template: str | None = None, n_shots: int = 5) -> "PromptConfig":
        return cls(n_shots=n_shots, template=template, protocol="paper", prepend_bos=False)

    def templates_for(self, family: str | None = None) -> tuple[str, ...]:
        """The templates of this protocol (for one task family, or for any)."""
        if self.protocol == "interp":
            return TEMPLATES
        if family is not None:
            return PAPER_TEMPLATES[family]
        return tuple(dict.fromkeys(t for ts in PAPER_TEMPLATES.values() for t in ts))

    def template_for(self, family: str) -> str:
        """The template a task of ``family`` is written with; an error when it has no such template."""
        allowed = self.templates_for(family)
        if self.template is None:
            return allowed[0]
        if self.template not in allowed:
            raise ValueError(f"template={self.template!r} does not apply to {family} tasks under the "
                             f"{self.protocol!r} protocol; expected one of {allowed}")
        return self.template

    @property
    def label(self) -> str:
        """The wording as results tables name it."""
        return self.template or ("bare" if self.protocol == "interp" else "default")
