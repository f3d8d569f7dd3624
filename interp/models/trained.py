"""Models trained by this toolkit to solve UF or UB, loadable by name like any other model.

* ``smollm2-135m-ft-uf`` / ``smollm2-135m-ft-ub``: the embedded SmolLM2-135M with every weight
  fine-tuned (not LoRA) on single-shot copying, the paper's mechanistic setting (one string, its
  copy, loss on the copy only; each letter one token). A checkpoint is ~540 MB, too big for git:
  ``make trained-models`` trains it (seeded, resumable) into ``$INTERP_CACHE/trained/<name>``.
* ``scratch-uf`` / ``scratch-ub``: small transformers trained from random initialisation by
  [`interp.experiments.from_scratch`][interp.experiments.from_scratch]; their weights (well under 1 MB) are kept in the repo's ``checkpoints/``.
* ``scratch-<task>-<positional>-s<seed>-<steps>`` (e.g. ``scratch-ub-absolute-s1-800``): the from-scratch
  family of [`interp.experiments.scratch_family`][interp.experiments.scratch_family], one model per task, position encoding
  (``rope``, ``absolute``, ``nope``), seed and training length in steps; regenerable, so kept in
  ``$INTERP_CACHE/scratch-family/<name>`` and built by ``python analyses/scratch_family.py``.

Building them is [`interp.experiments.trained_models`][interp.experiments.trained_models] (``make trained-models``).
All of them read the zero-shot line of [`interp.prompts`][interp.prompts] (``<bos> a b c : c b a <eos>``, the
format [`interp.experiments.from_scratch`][interp.experiments.from_scratch] trains on): pass ``--shots 0`` to analyses, ``--format single-shot``
to edge patching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from interp.core.naming import ModelNotFoundError
from interp.models.store import cache_dir

CHECKPOINTS_DIR = Path(__file__).resolve().parent.parent.parent / "checkpoints"
MAKE_TARGET = "trained-models"
Origin = Literal["finetuned", "scratch", "family"]
FAMILY_DIR = "scratch-family"  # under the cache
FAMILY_SCRIPT = "python analyses/scratch_family.py"
FAMILY_POSITIONALS = ("rope", "absolute", "nope")
_FAMILY_NAME = re.compile(r"scratch-(uf|ub)-(rope|absolute|nope)-s(\d+)-([1-9]\d*)")


@dataclass(frozen=True)
class TrainedModel:
    """A model of this toolkit's own training: its task, how it was made, where it lives."""

    name: str
    task: str
    origin: Origin

    def folder(self, checkpoints: Path | None = None) -> Path:
        """Where the Hugging Face folder (config, weights, tokenizer) is, built or not."""
        if self.origin == "finetuned":
            return cache_dir() / "trained" / self.name / "model"
        if self.origin == "family":
            return cache_dir() / FAMILY_DIR / self.name
        return (checkpoints or CHECKPOINTS_DIR) / self.name

    def run_dir(self) -> Path:
        """Training checkpoints (resumable) of a fine-tuned model."""
        return cache_dir() / "trained" / self.name


TRAINED_MODELS: dict[str, TrainedModel] = {
    m.name: m for m in (
        TrainedModel("smollm2-135m-ft-uf", "UF", "finetuned"),
        TrainedModel("smollm2-135m-ft-ub", "UB", "finetuned"),
        TrainedModel("scratch-uf", "UF", "scratch"),
        TrainedModel("scratch-ub", "UB", "scratch"),
    )
}
# The bridge is booted under the repository of the model's architecture.
TRAINED_REPOS = {name: "HuggingFaceTB/SmolLM2-135M-Instruct" for name, m in TRAINED_MODELS.items()
                 if m.origin == "finetuned"}


@dataclass(frozen=True)
class FamilyName:
    """One model of the from-scratch family: what its name ``scratch-<task>-<positional>-s<seed>-<steps>`` says.

    >>> FamilyName("UB", "absolute", 1, 600).name
    'scratch-ub-absolute-s1-600'
    >>> FamilyName.parse("scratch-uf-nope-s3-1200")
    FamilyName(task='UF', positional='nope', seed=3, steps=1200)
    >>> FamilyName.parse("scratch-ub") is None
    True
    """

    task: str
    positional: str
    seed: int
    steps: int

    def __post_init__(self) -> None:
        if self.task not in ("UF", "UB") or self.positional not in FAMILY_POSITIONALS or self.seed < 0 or self.steps < 1:
            raise ValueError(f"{self}: expected task UF or UB, positional one of {FAMILY_POSITIONALS}, seed >= 0, "
                             "steps >= 1")

    @property
    def name(self) -> str:
        return f"scratch-{self.task.lower()}-{self.positional}-s{self.seed}-{self.steps}"

    @classmethod
    def parse(cls, name: str) -> "FamilyName | None":
        match = _FAMILY_NAME.fullmatch(str(name))
        if match is None:
            return None
        task, positional, seed, steps = match.groups()
        return cls(task.upper(), positional, int(seed), int(steps))


def trained_model(name: str) -> TrainedModel | None:
    """The trained model ``name`` stands for (a named one or one of the from-scratch family), or None.

    >>> trained_model("scratch-ub-rope-s2-1200").folder().parent.name, trained_model("tiny-gpt2")
    ('scratch-family', None)
    """
    if name in TRAINED_MODELS:
        return TRAINED_MODELS[name]
    family = FamilyName.parse(name)
    return None if family is None else TrainedModel(name, family.task, "family")


def is_built(folder: Path) -> bool:
    """Whether ``folder`` holds a loadable model: its ``config.json`` and safetensors weights.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> is_built(folder)
    False
    >>> _ = (folder / "config.json").write_text("{}")
    >>> _ = (folder / "model.safetensors").write_bytes(b"")
    >>> is_built(folder)
    True
    """
    return (folder / "config.json").exists() and any(folder.glob("*.safetensors"))


def trained_folder(name: str, checkpoints: Path | None = None) -> Path:
    """The folder of a trained model, or one error naming the make target that builds it.

    >>> trained_folder("smollm2-135m-ft-ub").name  # doctest: +SKIP
    'model'
    """
    model = trained_model(name)
    if model is None:
        raise ModelNotFoundError(f"{name!r} is not a trained model; expected one of {', '.join(TRAINED_MODELS)} "
                                 "or scratch-<uf|ub>-<rope|absolute|nope>-s<seed>-<steps>")
    folder = model.folder(checkpoints)
    if not is_built(folder) and model.origin == "family":
        family = FamilyName.parse(name)
        raise ModelNotFoundError(
            f"model {name!r} is not built: no weights in {folder}; train it with `{FAMILY_SCRIPT} --tasks {family.task} "
            f"--positionals {family.positional} --seeds {family.seed}` (its steps, {family.steps}, must be one of the "
            f"family's training lengths, --steps)")
    if not is_built(folder):
        where = "the cache" if model.origin == "finetuned" else "checkpoints/"
        raise ModelNotFoundError(f"model {name!r} is not built: its weights are not in {where} ({folder}); "
                                 f"run `make {MAKE_TARGET}` to train it")
    return folder
