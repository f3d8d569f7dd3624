"""Known circuits under noise: down to which strength of the plant does circuit discovery still name
the planted edges?

Every planted model (``planted-uf``, ``-ub``, ``-ur``, ``-ul``, and ``planted-both`` on UB) at
each strength and noise seed of [`planted_sensitivity`][interp.experiments.planted_sensitivity] (the
planted weights mixed with seeded random ones), every component-level edge scored by EAP, EAP-IG
and its exact effect, and the scores compared with the planted set
([`interp.interventions.circuits.known`][interp.interventions.circuits.known]):

* ``auc``: edge ROC AUC of ``|score|`` against the planted edges (1.0: every planted edge strictly
  above every other one, which is also what ``planted_on_top`` says);
* ``weakest_planted`` / ``best_other``: the smallest ``|score|`` of a planted edge and the largest
  of any other edge, and which edge that is (``best_other_edge``);
* ``auc_outside_qk``: the AUC over the edges into values, MLPs and the logits only (every edge into a
  query or key input left out). The gradient scores interpolate every token embedding from the
  counterfactual to the clean prompt at once, which keeps a matching query and key matched along
  the whole path, so they cannot see what patching one of them alone does; this column says
  whether the query / key edges are all they get wrong.

A recovery *stops* at the first strength (falling from 1.0) where some seed's AUC is below 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.executor import Executor, SerialExecutor
from interp.core.journal import RowJournal
from interp.core.tables import as_mapping, row_from_mapping
from interp.experiments.planted_sensitivity import SensitivityConfig, noisy_planted_model
from interp.interventions.circuits.known import planted_edges
from interp.interventions.circuits.role_scores import exact_effects, residual_scores
from interp.interventions.circuits.runner import CircuitRunner, circuit_runner
from interp.interventions.circuits.scores import METHODS, edge_scores
from interp.interventions.circuits.selection import roc_auc
from interp.interventions.circuits.task import RETRIEVAL_TASKS, CircuitTask, copying_task, retrieval_task
from interp.models.bridge import TransformerBridge
from interp.models.planted import PLANTED_MODELS, PlantedConfig

QUERY_KEY_READERS = (".q", ".k")
# The circuit task's single-shot line has no rule word; without one, planted-both's marker head
# switches UB on (UF accuracy 0.00 there), so planted-both is scored on UB.
UNMARKED_TASK = "UB"

# The scores of the published study (results/circuit_sensitivity_planted): EAP-IG over the
# activations, also in METHODS, is asked for by name.
SENSITIVITY_METHODS: tuple[str, ...] = ("eap", "eap-ig", "exact")


def planted_tasks(model: str) -> tuple[str, ...]:
    """The tasks a planted model is scored on: its circuits, for a model with a task marker the one its
    unmarked prompt runs.

    >>> planted_tasks("planted-both"), planted_tasks("planted-ul")
    (('UB',), ('UL',))
    """
    config = PlantedConfig.from_name(model)
    return (UNMARKED_TASK,) if config.marker else tuple(c.upper() for c in config.circuits)


@dataclass(frozen=True)
class CircuitSensitivityConfig:
    """Which planted models, strengths, noise seeds and scores; the prompts each cell scores."""

    models: tuple[str, ...] = PLANTED_MODELS
    strengths: tuple[float, ...] = SensitivityConfig.strengths
    seeds: tuple[int, ...] = SensitivityConfig.seeds
    methods: tuple[str, ...] = SENSITIVITY_METHODS
    copy_length: int = 4
    retrieval_length: int = 6
    n: int = 4
    steps: int = 8  # EAP-IG integration steps
    batch_size: int = 8
    prompt_seed: int = 0

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in PLANTED_MODELS]
        if unknown or not self.models:
            raise ValueError(f"models={self.models}: expected some of {PLANTED_MODELS} (without @STRENGTH: the "
                             f"strengths are their own setting)")
        SensitivityConfig(strengths=self.strengths, seeds=self.seeds)  # the same checks as the head study
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ValueError(f"methods={self.methods}: expected some of {METHODS}")
        for name in ("copy_length", "retrieval_length", "n", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.copy_length < 2 or self.retrieval_length < 3:
            raise ValueError(f"copy_length={self.copy_length} (>= 2) and retrieval_length={self.retrieval_length} "
                             "(>= 3) are too short for a repeated token and a query")


@dataclass(frozen=True)
class CircuitSensitivityRow:
    """One score's ranking of the planted edges of one task in one noisy planted model."""

    model: str
    task: str
    strength: float
    seed: int
    method: str
    auc: float
    auc_outside_qk: float
    planted_on_top: bool
    weakest_planted: float
    weakest_planted_edge: str
    best_other: float
    best_other_edge: str
    n_edges: int
    n_planted: int
    clean_accuracy: float
    clean_metric: float


@dataclass(frozen=True)
class RecoveryShareRow:
    """Per model, task, score and strength: the AUC over noise seeds and the share of seeds that recovered
    the planted set exactly (``recovered``) and its edges outside queries and keys (``recovered_outside_qk``)."""

    model: str
    task: str
    method: str
    strength: float
    n_seeds: int
    mean_auc: float
    min_auc: float
    recovered: float
    mean_auc_outside_qk: float
    recovered_outside_qk: float
    mean_clean_accuracy: float


@dataclass(frozen=True)
class RecoveryStopRow:
    """Per model, task and score: the lowest strength down to which every seed recovered the planted set at
    every strength (None: not even at full strength) and the first strength where one did not (None: never);
    the same for the edges outside queries and keys (``outside_qk_*``) and for the model's own accuracy on
    the task (``task_*``: every prompt correct)."""

    model: str
    task: str
    method: str
    recovered_down_to: float | None
    stops_at: float | None
    outside_qk_down_to: float | None
    outside_qk_stops_at: float | None
    task_down_to: float | None
    task_stops_at: float | None


@dataclass(frozen=True)
class PlantedRanking:
    """How one score ranks a known edge set (component-level edges, ``|score|``)."""

    auc: float
    auc_outside_qk: float
    weakest_planted: float
    weakest_planted_edge: str
    best_other: float
    best_other_edge: str

    @property
    def planted_on_top(self) -> bool:
        return self.weakest_planted > self.best_other


def planted_ranking(scores: Float[Tensor, " edge"], labels: Sequence[tuple[str, str]],
                    planted: frozenset[tuple[str, str]]) -> PlantedRanking:
    """Where the planted edges rank among ``labels`` (``(reader, writer)``) by ``|scores|``.

    >>> labels = [("logits", "a1.1"), ("a1.1.k", "embed"), ("a1.0.v", "embed"), ("logits", "a1.0")]
    >>> r = planted_ranking(torch.tensor([-5.0, -0.1, 0.3, 0.0]), labels, frozenset(labels[:2]))
    >>> r.auc, r.auc_outside_qk, r.planted_on_top, r.weakest_planted_edge, r.best_other_edge
    (0.75, 1.0, False, 'a1.1.k<-embed', 'a1.0.v<-embed')
    >>> planted_ranking(torch.tensor([-5.0, -0.1, 0.3, 9.0]), labels, frozenset(labels[:3])).auc_outside_qk
    0.0
    """
    truth: Bool[Tensor, " edge"] = torch.tensor([label in planted for label in labels])
    query_key = torch.tensor([label[0].endswith(QUERY_KEY_READERS) for label in labels])
    size = scores.abs()
    best = int(torch.where(truth, torch.tensor(-1.0), size).argmax())
    weakest = int(torch.where(truth, size, torch.tensor(float("inf"))).argmin())
    return PlantedRanking(roc_auc(scores, truth), roc_auc(scores[~query_key], truth[~query_key]),
                          float(size[weakest]), "<-".join(labels[weakest]), float(size[best]), "<-".join(labels[best]))


def planted_task(model: TransformerBridge, task: str, config: CircuitSensitivityConfig) -> CircuitTask:
    """The prompts a planted model reads for ``task``: the single-shot copy line, or a retrieval line."""
    if task in RETRIEVAL_TASKS:
        return retrieval_task(model.tokenizer, task, config.retrieval_length, config.n, seed=config.prompt_seed)
    return copying_task(model.tokenizer, task, config.copy_length, config.n, seed=config.prompt_seed)


def component_scores(runner: CircuitRunner, method: str, config: CircuitSensitivityConfig) -> Float[Tensor, " edge"]:
    """Each edge of ``runner``'s component-level graph (``grain="components"``): EAP / EAP-IG summed over
    positions, or the exact effect of removing the edge at every position at once.

    >>> from interp.models import load_model
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, planted_task(model, "UB", CircuitSensitivityConfig(n=2)), grain="components")
    >>> exact = component_scores(runner, "exact", CircuitSensitivityConfig())
    >>> runner.graph.edge(int(exact.argmin())).label      # the first edge of the planted route: the token's value
    'a0.0.v <- embed @ all'
    """
    if runner.graph.grain != "components":
        raise ValueError(f"component_scores needs a runner of grain='components', not {runner.graph.grain!r}")
    if method == "exact":
        return exact_effects(runner, torch.arange(runner.graph.n_residual))
    # positions after the graph's last scored one are cut from it: their first-order scores are zero
    per_position = edge_scores(runner.model, runner.task, method, steps=config.steps, counterfactual=runner.counterfactual,
                               batch_size=config.batch_size, graph=runner.graph.components)
    return residual_scores(per_position, runner.graph)


def _cell_rows(model: TransformerBridge, name: str, strength: float, seed: int,
               config: CircuitSensitivityConfig) -> list[CircuitSensitivityRow]:
    rows = []
    for task_name in planted_tasks(name):
        task = planted_task(model, task_name, config)
        runner = circuit_runner(model, task, grain="components", batch_size=config.batch_size)
        labels = [(edge.reader, edge.writer) for edge in runner.graph.edges()]
        planted = planted_edges(name, task_name)
        accuracy, metric = runner.clean_accuracy, runner.clean_metric
        for method in config.methods:
            ranking = planted_ranking(component_scores(runner, method, config), labels, planted)
            rows.append(CircuitSensitivityRow(name, task_name, strength, seed, method, ranking.auc,
                                              ranking.auc_outside_qk, ranking.planted_on_top, ranking.weakest_planted,
                                              ranking.weakest_planted_edge, ranking.best_other, ranking.best_other_edge,
                                              len(labels), len(planted),
                                              accuracy, metric))
    return rows


def _sensitivity_cell(_model: None, config: CircuitSensitivityConfig,
                      cell: tuple[str, float, int]) -> list[CircuitSensitivityRow]:
    """One planted model x strength x noise seed, on whichever worker runs it (module-level, so that it pickles)."""
    name, strength, seed = cell
    return _cell_rows(noisy_planted_model(name, strength, seed), name, strength, seed, config)


def circuit_sensitivity(config: CircuitSensitivityConfig = CircuitSensitivityConfig(), *, progress: bool = False,
                        executor: Executor | None = None,
                        journal: RowJournal | None = None) -> list[CircuitSensitivityRow]:
    """Rows for every planted model, strength, noise seed, task and score (see the module docstring).
    Cells run on ``executor`` (default: one after the other here); each finished cell goes to ``journal``,
    and cells it already holds are not run again.

    >>> config = CircuitSensitivityConfig(models=("planted-ub",), strengths=(1.0,), seeds=(0,), methods=("exact",), n=2)
    >>> [(r.task, r.method, r.auc, r.planted_on_top) for r in circuit_sensitivity(config)]
    [('UB', 'exact', 1.0, True)]
    """
    cells = [(m, float(s), seed) for m in config.models for s in config.strengths for seed in config.seeds]
    done: dict[tuple[str, float, int], list[CircuitSensitivityRow]] = {}
    for entry in journal.done() if journal else []:
        key = (entry["model"], float(entry["strength"]), int(entry["seed"]))
        done[key] = [row_from_mapping(CircuitSensitivityRow, r) for r in entry["rows"]]
    todo = [c for c in cells if c not in done]
    bar = tqdm(total=len(cells), initial=len(cells) - len(todo), desc="circuit sensitivity", disable=not progress)
    for index, rows in (executor or SerialExecutor()).map(_sensitivity_cell, todo, shared=config):
        key = todo[index]
        done[key] = rows
        if journal is not None:
            journal.add({"model": key[0], "strength": key[1], "seed": key[2], "rows": [as_mapping(r) for r in rows]})
        bar.update()
    bar.close()
    return [row for cell in cells for row in done[cell]]


def recovery_summary(rows: Sequence[CircuitSensitivityRow]) -> list[RecoveryShareRow]:
    """Per model, task, score and strength (strongest plant first): AUC over seeds, share recovered.

    >>> def row(strength, seed, auc):
    ...     return CircuitSensitivityRow("planted-ub", "UB", strength, seed, "exact", auc, 1.0, auc == 1.0, 2.0,
    ...                                  "logits<-a1.1", 1.0, "logits<-a1.0", 137, 5, 1.0, 30.0)
    >>> rows = recovery_summary([row(1.0, 0, 1.0), row(0.5, 0, 1.0), row(0.5, 1, 0.9)])
    >>> [(r.strength, r.min_auc, r.recovered, r.recovered_outside_qk) for r in rows]
    [(1.0, 1.0, 1.0, 1.0), (0.5, 0.9, 0.5, 1.0)]
    """
    groups: dict[tuple, list[CircuitSensitivityRow]] = {}
    for r in rows:
        groups.setdefault((r.model, r.task, r.method, float(r.strength)), []).append(r)

    def mean(values) -> float:
        values = list(values)
        return sum(values) / len(values)

    return [RecoveryShareRow(model, task, method, strength, len(g), mean(float(r.auc) for r in g),
                             min(float(r.auc) for r in g), mean(bool(r.planted_on_top) for r in g),
                             mean(float(r.auc_outside_qk) for r in g), mean(float(r.auc_outside_qk) == 1.0 for r in g),
                             mean(float(r.clean_accuracy) for r in g))
            for (model, task, method, strength), g in sorted(groups.items(), key=lambda kv: (*kv[0][:3], -kv[0][3]))]


def _down_to_and_stop(shares: Sequence[float], strengths: Sequence[float]) -> tuple[float | None, float | None]:
    """The last strength before the first share below 1, and that strength (None where there is none)."""
    stop = next((i for i, share in enumerate(shares) if share < 1.0), None)
    if stop is None:
        return strengths[-1], None
    return (strengths[stop - 1] if stop else None), strengths[stop]


def recovery_stops(summary: Sequence[RecoveryShareRow]) -> list[RecoveryStopRow]:
    """Per model, task and score: down to which strength every seed recovered the planted set, and where
    that stopped (strengths as `recovery_summary` orders them, strongest first).

    >>> def share(strength, recovered, outside_qk=1.0):
    ...     return RecoveryShareRow("planted-uf", "UF", "exact", strength, 3, 1.0, 1.0, recovered, 1.0, outside_qk, 1.0)
    >>> recovery_stops([share(1.0, 1.0), share(0.9, 1.0), share(0.8, 2 / 3, 0.0), share(0.7, 1.0)])
    [RecoveryStopRow(model='planted-uf', task='UF', method='exact', recovered_down_to=0.9, stops_at=0.8, outside_qk_down_to=0.9, outside_qk_stops_at=0.8, task_down_to=0.7, task_stops_at=None)]
    """
    groups: dict[tuple[str, str, str], list[RecoveryShareRow]] = {}
    for row in summary:
        groups.setdefault((row.model, row.task, row.method), []).append(row)
    out = []
    for key, g in groups.items():
        strengths = [row.strength for row in g]
        out.append(RecoveryStopRow(*key, *_down_to_and_stop([row.recovered for row in g], strengths),
                                   *_down_to_and_stop([row.recovered_outside_qk for row in g], strengths),
                                   *_down_to_and_stop([row.mean_clean_accuracy for row in g], strengths)))
    return out


__all__ = ["CircuitSensitivityConfig", "CircuitSensitivityRow", "PlantedRanking", "RecoveryShareRow", "RecoveryStopRow",
           "circuit_sensitivity", "component_scores", "planted_ranking", "planted_task", "planted_tasks",
           "recovery_stops", "recovery_summary"]
