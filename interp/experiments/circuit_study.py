"""Circuit discovery on one model and task: for each copy length (a cell, journaled, on the executor), every
requested selection method's `Circuit` (`interp.interventions.circuits.find`), the methods compared at one size,
and the tables a reader prints.

Tables (names from `interp.core.naming.result_stem`, variant ``<task>[_<format>][_<counterfactual>]``):

* ``circuit_summary_<model>_<variant>``: one row per (length, method): size, recovered share of the gap,
  accuracy, CPR / CMD / random CPR over the grid, unneeded edges, timings, and each method's top-``k`` at the
  first method's size (``*_at_common``), so methods compare at equal size;
* ``circuit_curve_<model>_<variant>``: the grid of every (length, method);
* ``circuit_<model>_<variant>_L<length>_<method>``: the circuit, one row per edge (its ``.json`` holds the whole
  `Circuit`: ``Circuit.load`` reads it);
* ``circuit_ranking_<model>_<variant>_L<length>_<method>``: the method's top edges (`find.RANKED_ROWS`), for views.

Each cell keeps its stages (scores, then each method's selection, curve, minimality) in
``<summary stem>_L<length>.stages.pt`` until its circuits are written, so a stopped run resumes mid-cell.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from interp.core.executor import Executor, ModelSource, SerialExecutor
from interp.core.stages import StageStore
from interp.interventions.circuits.circuit import Circuit
from interp.interventions.circuits.find import SELECTIONS, CircuitConfig, build_task, find_circuit
from interp.interventions.circuits.runner import circuit_runner, top_k
from interp.models.bridge import TransformerBridge



@dataclass(frozen=True)
class CircuitStudyConfig:
    """``lengths`` x ``methods`` of one ``task``; ``circuit`` holds everything else (its ``method`` and ``length``
    are set per cell)."""

    task: str = "UB"
    lengths: tuple[int, ...] = (4,)
    methods: tuple[str, ...] = ("masks",)
    circuit: CircuitConfig = field(default_factory=CircuitConfig)

    def __post_init__(self) -> None:
        if not self.lengths or len(set(self.lengths)) != len(self.lengths):
            raise ValueError(f"lengths={list(self.lengths)}: at least one, each once")
        if not self.methods or len(set(self.methods)) != len(self.methods) or not set(self.methods) <= set(SELECTIONS):
            raise ValueError(f"methods={list(self.methods)}: each once, from {', '.join(SELECTIONS)}")

    def cell_config(self, length: int, method: str) -> CircuitConfig:
        return replace(self.circuit, length=length, method=method)

    def variant(self) -> list[str]:
        c = self.circuit
        return [self.task.upper()] + ([c.prompt_format] if c.prompt_format != "single-shot" else []) \
            + ([c.counterfactual] if c.counterfactual != "corrupt" else [])


@dataclass(frozen=True)
class CircuitCell:
    """One length's work, as the executor ships it."""

    length: int
    model_label: str
    stages: str  # the stage file's path


def _common_size(model: TransformerBridge, study: CircuitStudyConfig, length: int, circuits: list[Circuit],
                 rankings: list[torch.Tensor]) -> list[dict]:
    """Each method's top-``k`` at the first method's circuit size ``k``, measured exactly."""
    size = len(circuits[0])
    runner = circuit_runner(model, build_task(model, study.task, study.cell_config(length, study.methods[0])),
                            grain=study.circuit.grain, counterfactual=study.circuit.counterfactual,
                            batch_size=study.circuit.batch_size)
    measured = runner.measure([top_k(r, size) for r in rankings])
    return [{"common_size": size, "recovered_at_common": float(runner.recovered(measured.metric[i])),
             "accuracy_at_common": float(measured.accuracy[i])} for i in range(len(circuits))]


def run_cell(model: TransformerBridge, study: CircuitStudyConfig, cell: CircuitCell, progress: bool = False) -> dict:
    """Every method's circuit of one length, and the rows of the summary and curve tables."""
    first = study.cell_config(cell.length, study.methods[0])
    shared = {k: v for k, v in asdict(first).items() if k != "method"}  # the scores serve every method
    stages = StageStore(cell.stages, shared | {"task": study.task, "methods": list(study.methods)})
    circuits, rankings, ranked = [], [], []
    for method in study.methods:
        circuit = find_circuit(model, study.task, study.cell_config(cell.length, method), model_label=cell.model_label,
                               stages=stages, progress=progress, stage_prefix=method)
        circuits.append(circuit)
        rankings.append(stages.get(f"{method}/selection")["ranking"])
        ranked.append(stages.get(f"{method}/ranked"))
    common = _common_size(model, study, cell.length, circuits, rankings)
    summary = [c.summary() | {"length": cell.length} | extra for c, extra in zip(circuits, common)]
    curve = [{"model": c.model, "task": c.task, "method": c.method, "length": cell.length} | p
             for c in circuits for p in c.curve.as_rows()]
    return {"length": cell.length, "summary": summary, "curve": curve,
            "circuits": [c.to_json() for c in circuits], "ranked": ranked}


def _cell(model, shared, item: CircuitCell) -> dict:
    """The executor's cell function (module level, so it pickles)."""
    study, progress = shared
    return run_cell(model, study, item, progress)


def circuit_cells(study: CircuitStudyConfig, model_label: str, stage_stem: Path) -> list[CircuitCell]:
    return [CircuitCell(length, model_label, str(stage_stem.with_name(f"{stage_stem.name}_L{length}.stages.pt")))
            for length in study.lengths]


def circuit_study(model: TransformerBridge | None, study: CircuitStudyConfig, cells: Sequence[CircuitCell], *,
                  done: dict[int, dict] | None = None, executor: Executor | None = None,
                  source: ModelSource | None = None, progress: bool = False) -> Iterator[dict]:
    """Yield each length's results (finished ones from ``done`` first), running the rest on ``executor``.

    >>> from interp.models import load_model
    >>> import tempfile
    >>> study = CircuitStudyConfig("UB", (3,), ("top-k",), CircuitConfig(n=4, max_edges=20, fractions=(0.0, 0.01, 1.0),
    ...                                                                   minimality=False))
    >>> cells = circuit_cells(study, "planted-ub", Path(tempfile.mkdtemp()) / "circuit_summary_planted-ub_UB")
    >>> [row["summary"][0]["recovered"] >= 0.8 for row in circuit_study(load_model("planted-ub", device="cpu"), study, cells)]
    [True]
    """
    done = done or {}
    for cell in cells:
        if cell.length in done:
            yield done[cell.length]
    todo = [cell for cell in cells if cell.length not in done]
    executor = executor or SerialExecutor()
    started = time.perf_counter()
    for _, result in executor.map(_cell, todo, model=source or ModelSource("local", lambda: model),
                                  shared=(study, progress and executor.name == "serial"), local_model=model):
        result["seconds"] = time.perf_counter() - started
        yield result
