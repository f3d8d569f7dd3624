"""Building the models of [`interp.models.trained`][interp.models.trained]: the fine-tuning recipe of
``smollm2-135m-ft-uf`` / ``-ub``, training what is missing (a killed run resumes), and exporting a
run's latest checkpoint as a loadable folder."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from interp.core.executor import Executor, SerialExecutor
from interp.core.naming import EMBEDDED_MODEL, ModelNotFoundError
from interp.experiments.finetune import finetune
from interp.experiments.scratch_models import train_scratch_model
from interp.models.embedded import load_embedded_hf
from interp.models.store import publish_folder
from interp.models.trained import MAKE_TARGET, TRAINED_MODELS, is_built, trained_folder
from interp.training import TrainConfig
from interp.training.checkpoint import CHECKPOINT_NAME, read_checkpoint

logger = logging.getLogger(__name__)


def finetune_config(task: str):
    """The fine-tuning run of ``smollm2-135m-ft-<task>``: lengths 3-10 cover the edge-patching
    lengths (3, 5, 7, 9) in distribution; 200 steps of 8 at lr 1e-4, stopping once both
    in-distribution lengths reach 0.98 (50 examples each).

    >>> config = finetune_config("UB")
    >>> config.task, config.train_lengths, config.steps, config.lr
    ('UB', (3, 4, 5, 6, 7, 8, 9, 10), 200, 0.0001)
    """
    return TrainConfig(task=task, train_lengths=tuple(range(3, 11)), id_lengths=(5, 10), ood_lengths=(15, 20),
                       steps=200, batch_size=8, lr=1e-4, warmup_frac=0.1, n_shots=0, template=None,
                       eval_every=50, eval_examples=50, checkpoint_every=50, stop_at_accuracy=0.98)


def build(name: str, results_dir: Path = Path("results"), checkpoints: Path | None = None,
          progress: bool = False) -> Path:
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
        command = f"make {MAKE_TARGET} (interp.experiments.trained_models.build({name!r}))"
        finetune(EMBEDDED_MODEL, finetune_config(model.task), run_dir=model.run_dir(), results_dir=results_dir,
                 device="cpu", save_model=True, progress=progress, tag="single", command=command)
        return trained_folder(name, checkpoints)
    train_scratch_model(model.task, folder, results_dir=results_dir, progress=progress)
    return trained_folder(name, checkpoints)


def build_all(names: Sequence[str], results_dir: Path = Path("results"), progress: bool = False,
              executor: Executor | None = None) -> Iterator[tuple[str, Path]]:
    """`build` every model of ``names`` on ``executor`` (default: one after the other here);
    yields ``(name, folder)`` as each is built. Each model trains with its own seed, wherever it runs.

    >>> dict(build_all(["scratch-ub"]))  # doctest: +SKIP
    {'scratch-ub': PosixPath('.../checkpoints/scratch-ub')}
    """
    executor = executor or SerialExecutor()
    shared = (results_dir, progress and executor.name == "serial")
    for index, folder in executor.map(_build_cell, list(names), shared=shared):
        yield names[index], folder


def _build_cell(_model: None, shared: tuple[Path, bool], name: str) -> Path:
    """One model, on whichever worker builds it (module-level, so that it pickles)."""
    results_dir, progress = shared
    return build(name, results_dir, progress=progress)


def export_step(name: str, folder: Path) -> Path:
    """The weights of a fine-tuned model's latest training checkpoint as a loadable folder (any
    analysis takes it as ``--model FOLDER``), for looking at a run before it has finished.

    >>> export_step("smollm2-135m-ft-ub", Path("/tmp/ft-ub-step100"))  # doctest: +SKIP
    PosixPath('/tmp/ft-ub-step100')
    """
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
