"""Models trained by this toolkit to solve UF or UB, loadable by name like any other model.

* ``smollm2-135m-ft-uf`` / ``smollm2-135m-ft-ub``: the embedded SmolLM2-135M with every weight
  fine-tuned (not LoRA) on single-shot copying, the paper's mechanistic setting (one string, its
  copy, loss on the copy only; each letter one token). A checkpoint is ~540 MB, too big for git:
  ``make trained-models`` trains it (seeded, resumable) into ``$INTERP_CACHE/trained/<name>``.
* ``scratch-uf`` / ``scratch-ub``: small transformers trained from random initialisation by
  [`interp.experiments.from_scratch`][interp.experiments.from_scratch]; their weights (well under 1 MB) are kept in the repo's ``checkpoints/``.

Building them is [`interp.experiments.trained_models`][interp.experiments.trained_models] (``make trained-models``).
All four read the zero-shot line of [`interp.prompts`][interp.prompts] (``<bos> a b c : c b a <eos>``, the
format [`interp.experiments.from_scratch`][interp.experiments.from_scratch] trains on): pass ``--shots 0`` to analyses, ``--format single-shot``
to edge patching.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from interp.core.naming import ModelNotFoundError
from interp.models.store import cache_dir

CHECKPOINTS_DIR = Path(__file__).resolve().parent.parent.parent / "checkpoints"
MAKE_TARGET = "trained-models"
Origin = Literal["finetuned", "scratch"]


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
    model = TRAINED_MODELS[name]
    folder = model.folder(checkpoints)
    if not is_built(folder):
        where = "the cache" if model.origin == "finetuned" else "checkpoints/"
        raise ModelNotFoundError(f"model {name!r} is not built: its weights are not in {where} ({folder}); "
                                 f"run `make {MAKE_TARGET}` to train it")
    return folder
