"""Models trained by this toolkit to solve UF or UB, loadable by name like any other model.

* ``smollm2-135m-ft-uf`` / ``smollm2-135m-ft-ub``: the embedded SmolLM2-135M with every weight
  fine-tuned (not LoRA) on single-shot copying, the paper's mechanistic setting (one string, its
  copy, loss on the copy only; each letter one token). A checkpoint is ~540 MB, too big for git:
  ``make trained-models`` trains it (seeded, resumable) into ``$INTERP_CACHE/trained/<name>``.
* ``scratch-uf`` / ``scratch-ub``: small transformers trained from random initialisation by
  :mod:`interp.scratch`; their weights (well under 1 MB) are kept in the repo's ``checkpoints/``.

All four read the zero-shot line of :mod:`interp.prompts` (``<bos> a b c : c b a <eos>``, the
format :mod:`interp.scratch` trains on): pass ``--shots 0`` to analyses, ``--format single-shot``
to edge patching.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..naming import EMBEDDED_MODEL, ModelNotFoundError
from .store import cache_dir

logger = logging.getLogger(__name__)

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
    return (folder / "config.json").exists() and any(folder.glob("*.safetensors"))


def trained_folder(name: str, checkpoints: Path | None = None) -> Path:
    """The folder of a trained model, or one error naming the make target that builds it.

    >>> trained_folder("scratch-uf").name
    'scratch-uf'
    """
    model = TRAINED_MODELS[name]
    folder = model.folder(checkpoints)
    if not is_built(folder):
        where = "the cache" if model.origin == "finetuned" else "checkpoints/"
        raise ModelNotFoundError(f"model {name!r} is not built: its weights are not in {where} ({folder}); "
                                 f"run `make {MAKE_TARGET}` to train it")
    return folder


def finetune_config(task: str):
    """The fine-tuning run of ``smollm2-135m-ft-<task>``: lengths 3-10 cover the edge-patching
    lengths (3, 5, 7, 9) in distribution; 200 steps of 8 at lr 1e-4, stopping once both
    in-distribution lengths reach 0.98 (50 examples each)."""
    from ..training import TrainConfig

    return TrainConfig(task=task, train_lengths=tuple(range(3, 11)), id_lengths=(5, 10), ood_lengths=(15, 20),
                       steps=200, batch_size=8, lr=1e-4, warmup_frac=0.1, n_shots=0, template=None,
                       eval_every=50, eval_examples=50, checkpoint_every=50, stop_at_accuracy=0.98)


def build(name: str, results_dir: Path = Path("results"), checkpoints: Path | None = None,
          progress: bool = True) -> Path:
    """Train ``name`` when it is not built yet (a killed run resumes); returns its folder.

    >>> build("scratch-ub")  # doctest: +SKIP
    PosixPath('.../checkpoints/scratch-ub')
    """
    if name not in TRAINED_MODELS:
        raise ModelNotFoundError(f"unknown trained model {name!r}; expected one of {', '.join(TRAINED_MODELS)}")
    model = TRAINED_MODELS[name]
    folder = model.folder(checkpoints)
    if is_built(folder):
        logger.info("%s is built: %s", name, folder)
        return folder
    if model.origin == "finetuned":
        from ..training import finetune

        command = f"make {MAKE_TARGET} (interp.models.trained.build({name!r}))"
        finetune(EMBEDDED_MODEL, finetune_config(model.task), run_dir=model.run_dir(), results_dir=results_dir,
                 device="cpu", save_model=True, progress=progress, tag="single", command=command)
        return trained_folder(name, checkpoints)
    from ..scratch_models import train_scratch_model

    train_scratch_model(model.task, folder, results_dir=results_dir, progress=progress)
    return trained_folder(name, checkpoints)


def export_step(name: str, folder: Path) -> Path:
    """The weights of a fine-tuned model's latest training checkpoint as a loadable folder (any
    analysis takes it as ``--model FOLDER``), for looking at a run before it has finished.

    >>> export_step("smollm2-135m-ft-ub", Path("/tmp/ft-ub-step100"))  # doctest: +SKIP
    """
    import torch

    from ..training.checkpoint import CHECKPOINT_NAME, read_checkpoint
    from .embedded import load_embedded_hf
    from .store import publish_folder

    model = TRAINED_MODELS[name]
    if model.origin != "finetuned":
        raise ValueError(f"{name!r} is not a fine-tuned model; only those have training checkpoints to export")
    payload = read_checkpoint(model.run_dir() / CHECKPOINT_NAME)
    hf_model, tokenizer = load_embedded_hf(torch.float32)
    missing, unexpected = hf_model.load_state_dict(payload["model"], strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # the unembedding is tied to the embedding
        raise ValueError(f"checkpoint of {name} does not match the model: missing {missing[:3]}, unexpected {unexpected[:3]}")

    def write(target: Path) -> None:
        hf_model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        (target / "step.txt").write_text(f"{name} at training step {payload['step']}\n")

    return publish_folder(Path(folder), write)
