"""Training the from-scratch family: one run per (task, position encoding, seed), kept at each of its
training lengths as a loadable model ``scratch-<task>-<positional>-s<seed>-<steps>``
([`interp.models.trained.FamilyName`][interp.models.trained.FamilyName]) in ``$INTERP_CACHE/scratch-family/``.

A run trains the longest length; the weights at every shorter length are kept as it passes them. The
learning rate is constant after a warmup of a fixed number of steps (``warmup_frac`` of the longest),
so the model kept at step ``k`` is the model a ``k``-step run with that warmup would end with: two
training lengths cost one run. A killed run resumes from its checkpoint; a run whose models are all
built is not trained again (a folder built with another configuration is refused, never reused).
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from interp.core.stats import wilson_interval
from interp.core.tables import atomic_path
from interp.data.tasks import get_task
from interp.experiments.from_scratch import ScratchConfig, fit, usable_lengths
from interp.experiments.scratch_models import with_bos
from interp.models.store import cache_dir, publish_folder
from interp.models.trained import FAMILY_DIR, FAMILY_POSITIONALS, FAMILY_SCRIPT, FamilyName, is_built
from interp.training import evaluate_lengths

logger = logging.getLogger(__name__)

INFO_NAME = "training_info.json"

# 2 layers, 4 heads, d_model 64 (the toolkit's scratch-ub shape), lengths 1-9 (the edge-patching lengths 3-9 in
# distribution) over the 26 letters the edge-patching prompts use, batches of 64 at lr 1e-3 after 80 warmup
# steps; no random position offset (every position the analyses read is trained). About a minute a run here.
FAMILY_SCRATCH = ScratchConfig(train_range=(1, 9), test_bins=((10, 12),), steps=1600, batch_size=64, lr=1e-3,
                               warmup_frac=0.05, schedule="constant", eval_every=400, eval_examples=16,
                               stop_at_accuracy=None, position_offset=False, n_items=26, threads=1)


@dataclass(frozen=True)
class FamilyConfig:
    """The family: tasks x position encodings x seeds, each run kept at every length of ``durations``
    (steps); ``scratch`` is the rest of the recipe (its ``steps`` and ``seed`` are set per run)."""

    tasks: tuple[str, ...] = ("UF", "UB")
    positionals: tuple[str, ...] = FAMILY_POSITIONALS
    seeds: tuple[int, ...] = (1, 2, 3)
    durations: tuple[int, ...] = (800, 1600)
    scratch: ScratchConfig = field(default=FAMILY_SCRATCH)
    id_examples: int = 40  # per in-distribution length, for the models table's exact match

    def __post_init__(self) -> None:
        for task in self.tasks:
            if task not in ("UF", "UB"):
                raise ValueError(f"tasks: expected UF or UB, got {task!r}")
        for positional in self.positionals:
            if positional not in FAMILY_POSITIONALS:
                raise ValueError(f"positionals: expected some of {', '.join(FAMILY_POSITIONALS)}, got {positional!r}")
        if not (self.tasks and self.positionals and self.seeds and self.durations):
            raise ValueError("tasks, positionals, seeds and durations must not be empty")
        if min(self.durations) < 1 or len(set(self.durations)) != len(self.durations):
            raise ValueError(f"durations={self.durations}: expected distinct step counts >= 1")
        if min(self.seeds) < 0:
            raise ValueError(f"seeds={self.seeds}: expected seeds >= 0")
        if self.id_examples < 1:
            raise ValueError(f"id_examples={self.id_examples} must be >= 1")
        object.__setattr__(self, "durations", tuple(sorted(self.durations)))

    def recipe(self, seed: int) -> ScratchConfig:
        """The run's ScratchConfig: the longest duration, this seed."""
        return replace(self.scratch, steps=self.durations[-1], seed=seed)

    def as_config(self) -> dict:
        """What the family's models and rows depend on (not how many threads trained them), JSON-ready.

        >>> "threads" in FamilyConfig().as_config()["scratch"]
        False
        """
        config = json.loads(json.dumps(asdict(self), default=str))
        del config["scratch"]["threads"]
        return config

    def runs(self) -> list["FamilyRun"]:
        return [FamilyRun(task, positional, seed) for task in self.tasks for positional in self.positionals
                for seed in self.seeds]


@dataclass(frozen=True)
class FamilyRun:
    """One training run: the models of every duration come out of it."""

    task: str
    positional: str
    seed: int

    @property
    def label(self) -> str:
        return f"scratch-{self.task.lower()}-{self.positional}-s{self.seed}"

    def names(self, durations: tuple[int, ...]) -> list[FamilyName]:
        return [FamilyName(self.task, self.positional, self.seed, steps) for steps in durations]


@dataclass(frozen=True)
class FamilyModelRow:
    """A model of the family and its in-distribution teacher-forced exact match (Wilson 95% interval)."""

    model: str
    task: str
    positional: str
    seed: int
    steps: int
    id_accuracy: float
    id_lo: float
    id_hi: float
    id_n: int
    id_lengths: str
    run_seconds: float  # wall time of the whole run (its longest duration), resumed parts included
    run_cpu_seconds: float


def family_root() -> Path:
    """Where the family's models (and the checkpoints of unfinished runs, ``runs/``) are kept.

    >>> family_root().name
    'scratch-family'
    """
    return cache_dir() / FAMILY_DIR


def _info_config(config: FamilyConfig, seed: int) -> dict:
    recipe = json.loads(json.dumps(asdict(config.recipe(seed)), default=str))
    del recipe["threads"]  # logistics: the same model whatever the thread count
    return recipe


def _built_rows(run: FamilyRun, config: FamilyConfig) -> list[FamilyModelRow] | None:
    """The rows of a run whose models are all built with this configuration; None when one is missing."""
    rows = []
    for name in run.names(config.durations):
        folder = family_root() / name.name
        if not is_built(folder) or not (folder / INFO_NAME).exists():
            return None
        info = json.loads((folder / INFO_NAME).read_text())
        wanted = _info_config(config, run.seed)
        stored = {k: v for k, v in (info.get("config") or {}).items() if k != "threads"}
        if stored != wanted or info.get("id_examples") != config.id_examples:
            differs = sorted(k for k in set(wanted) | set(stored) if stored.get(k) != wanted.get(k))
            raise ValueError(f"{folder} was trained with another configuration (differs in "
                             f"{', '.join(differs) or 'id_examples'}); delete it to train it again, or point "
                             f"$INTERP_CACHE elsewhere")
        rows.append(FamilyModelRow(**info["row"]))
    return rows


def _snapshot_path(run_dir: Path, step: int) -> Path:
    return run_dir / f"step-{step}.safetensors"


def _keep_snapshots(run_dir: Path, steps: tuple[int, ...]):
    """An ``on_step`` callback that writes the weights at each of ``steps`` (atomically)."""
    def keep(step: int, model: torch.nn.Module) -> None:
        if step in steps:
            # clone: safetensors refuses tensors that share memory (GPT-2 ties its embeddings)
            state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
            with atomic_path(_snapshot_path(run_dir, step)) as tmp:
                save_file(state, str(tmp))
    return keep


def _id_accuracy(model, fitted, config: FamilyConfig) -> tuple[int, int, tuple[int, ...]]:
    """(correct, n, lengths): teacher-forced exact match on fresh examples at every training length."""
    spec = get_task(fitted.train_config.task)
    lo, hi = config.scratch.train_range
    lengths = usable_lengths(spec, range(lo, hi + 1), fitted.items)
    scores = evaluate_lengths(model, fitted.tokenizer, replace(fitted.train_config, eval_seed=fitted.train_config.eval_seed + 1),
                              "id", lengths, fitted.items, prepend_bos=True, n_examples=config.id_examples)
    return sum(round(s.accuracy * s.n_examples) for s in scores), sum(s.n_examples for s in scores), lengths


def train_run(run: FamilyRun, config: FamilyConfig, progress: bool = False) -> list[FamilyModelRow]:
    """Train ``run`` (or resume it, or skip it when its models are built) and save one model per duration.

    >>> rows = train_run(FamilyRun("UB", "absolute", 1), FamilyConfig())  # doctest: +SKIP
    >>> [row.model for row in rows]  # doctest: +SKIP
    ['scratch-ub-absolute-s1-800', 'scratch-ub-absolute-s1-1600']
    """
    built = _built_rows(run, config)
    if built is not None:
        logger.info("%s: built, not trained again", run.label)
        return built
    run_dir = family_root() / "runs" / run.label
    recipe = config.recipe(run.seed)
    shorter = config.durations[:-1]
    fitted = fit(run.task, run.positional, recipe, run_dir, progress=progress, on_step=_keep_snapshots(run_dir, shorter))
    if any(not _snapshot_path(run_dir, step).exists() for step in shorter):
        # killed between a checkpoint and the snapshot of that same step: the weights of that step are gone
        logger.warning("%s: a snapshot is missing; training the run again from the start", run.label)
        fitted = fit(run.task, run.positional, recipe, run_dir, progress=progress, resume=False,
                     on_step=_keep_snapshots(run_dir, shorter))
    models = {}
    for steps in config.durations:
        model = fitted.model if steps == recipe.steps else copy.deepcopy(fitted.model)
        if steps != recipe.steps:
            model.load_state_dict(load_file(str(_snapshot_path(run_dir, steps))))
        models[steps] = model.eval()
    rows = []
    for name in run.names(config.durations):
        correct, n, lengths = _id_accuracy(models[name.steps], fitted, config)
        lo, hi = wilson_interval(correct, n)
        rows.append(FamilyModelRow(name.name, run.task, run.positional, run.seed, name.steps, correct / n, lo, hi, n,
                                   f"{lengths[0]}-{lengths[-1]}", round(fitted.timing["seconds"], 1),
                                   round(fitted.timing["cpu_seconds"], 1)))
    tokenizer = with_bos(fitted.tokenizer)  # the saved tokenizer starts every text with BOS, as trained
    for row in rows:
        info = {"name": row.model, "run": run.label, "command": FAMILY_SCRIPT, "config": _info_config(config, run.seed),
                "id_examples": config.id_examples, "row": asdict(row),
                "scoring": "teacher-forced exact match of zero-shot '<bos> x : y <eos>' lines, fresh examples"}
        publish_folder(family_root() / row.model, _writer(models[row.steps], tokenizer, info))
    shutil.rmtree(run_dir, ignore_errors=True)  # every model is built: the checkpoints are no longer needed
    return rows


def _writer(model: torch.nn.Module, tokenizer, info: dict):
    def write(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / INFO_NAME).write_text(json.dumps(info, indent=1) + "\n")
        row = info["row"]
        (folder / "README.md").write_text(
            f"# {info['name']}\n\nA model of the from-scratch family (`interp.experiments.scratch_family`): {row['task']}, "
            f"position encoding {row['positional']}, seed {row['seed']}, {row['steps']} training steps. Made by "
            f"`{info['command']}`; in-distribution exact match {row['id_accuracy']:.3f} "
            f"[{row['id_lo']:.3f}, {row['id_hi']:.3f}] (n = {row['id_n']}, lengths {row['id_lengths']}).\n")
    return write
