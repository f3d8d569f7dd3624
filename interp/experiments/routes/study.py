"""The route study: its cells (a copy length and a set of heads), where they run, and the heads a
published circuit names (`route_circuits` picks the circuit of each length; `circuit_head_set` reads its heads).

A cell builds its prompts from the model's tokenizer and measures every removal of `route_removals`
under every counterfactual asked for (`measure.route_rows`). Cells run on an
`interp.core.executor.Executor` (serial by default); they depend only on their item and the study's
config, so every executor gives the same rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.naming import model_label
from interp.experiments.routes.measure import RouteRow, route_rows
from interp.experiments.routes.reads import READ_KINDS, route_removals
from interp.experiments.routes.removal import ROUTE_COUNTERFACTUALS, Heads, check_counterfactuals
from interp.interventions.circuits.circuit import Circuit
from interp.interventions.circuits.task import copying_task
from interp.interventions.edges.data import check_format, check_length, check_task
from interp.models.bridge import TransformerBridge


@dataclass(frozen=True)
class HeadSet:
    """The heads a cell's removals act in, per read kind (``None``: every layer and head); a kind that
    is missing is not measured on this set."""

    name: str
    heads: Mapping[str, Heads | None] = field(default_factory=lambda: {kind: None for kind in READ_KINDS})


ALL_HEADS = HeadSet("all")


@dataclass(frozen=True)
class RouteStudyConfig:
    """What every cell measures: the task's prompts (``bos`` None: as the model's tokenizer does), the
    counterfactuals and the read kinds."""

    task: str = "UB"
    n: int = 16
    seed: int = 0
    fmt: str = "single-shot"
    shots: int = 1
    bos: bool | None = None
    counterfactuals: tuple[str, ...] = ROUTE_COUNTERFACTUALS
    kinds: tuple[str, ...] = READ_KINDS
    batch_size: int = 8
    model_label: str = ""

    def __post_init__(self) -> None:
        check_task(self.task)
        check_format(self.fmt)
        check_counterfactuals(self.counterfactuals)
        if not self.kinds or any(kind not in READ_KINDS for kind in self.kinds):
            raise ValueError(f"kinds {', '.join(self.kinds) or '(none)'}; expected some of {', '.join(READ_KINDS)}")
        if self.n < 1 or self.batch_size < 1 or self.shots < 1:
            raise ValueError(f"n={self.n}, batch_size={self.batch_size}, shots={self.shots}: each must be >= 1")


@dataclass(frozen=True)
class RouteCell:
    """One cell of the study: prompts of one copy length, removals in one set of heads."""

    length: int
    head_set: HeadSet = ALL_HEADS

    def __post_init__(self) -> None:
        check_length(self.length)


def route_cell_rows(model: TransformerBridge, config: RouteStudyConfig, cell: RouteCell,
                    progress: bool = False) -> list[RouteRow]:
    """Every row of one cell (module-level, so that it runs on any executor's worker).

    >>> from interp.models import load_model
    >>> model = load_model("planted-uf", device="cpu")
    >>> config = RouteStudyConfig("UF", n=2, counterfactuals=("zero",), kinds=("key",))
    >>> rows = route_cell_rows(model, config, RouteCell(4))
    >>> len(rows), sorted({r.kind for r in rows}), rows[0].model
    (14, ['key'], 'planted-uf')
    """
    bos = bool(getattr(model.cfg, "default_prepend_bos", False)) if config.bos is None else config.bos
    task = copying_task(model.tokenizer, config.task, cell.length, config.n, seed=config.seed, fmt=config.fmt,
                        n_shots=config.shots, prepend_bos=bos)
    # kinds patched in the same heads share one measurement (its clean and counterfactual runs)
    together: list[tuple[Heads | None, list[str]]] = []
    for kind in (k for k in config.kinds if k in cell.head_set.heads):
        heads = cell.head_set.heads[kind]
        match = next((kinds for other, kinds in together if other == heads), None)
        if match is None:
            together.append((heads, [kind]))
        else:
            match.append(kind)
    rows: list[RouteRow] = []
    for heads, kinds in together:
        rows += route_rows(model, task, heads=heads, head_set=cell.head_set.name, removals=route_removals(kinds),
                           counterfactuals=config.counterfactuals, batch_size=config.batch_size, fmt=config.fmt,
                           model_label=config.model_label or None, progress=progress)
    return rows


def _cell(model: TransformerBridge, config: RouteStudyConfig, cell: RouteCell) -> list[RouteRow]:
    return route_cell_rows(model, config, cell)


def route_study(model: TransformerBridge | None, config: RouteStudyConfig, cells: Sequence[RouteCell], *,
                executor: Executor | None = None, model_source: ModelSource = NO_MODEL,
                progress: bool = False) -> list[RouteRow]:
    """Every cell's rows, in the order of ``cells`` whatever order they finish in.

    >>> from interp.models import load_model
    >>> model = load_model("planted-ub", device="cpu")
    >>> config = RouteStudyConfig("UB", n=2, counterfactuals=("corrupt",), kinds=("value",))
    >>> rows = route_study(model, config, [RouteCell(3), RouteCell(4)])
    >>> sorted({r.length for r in rows}), len(rows)
    ([3, 4], 28)
    """
    by_cell: dict[int, list[RouteRow]] = {}
    with tqdm(total=len(cells), desc="route cells", unit="cell", disable=not progress) as bar:
        for index, rows in (executor or SerialExecutor()).map(_cell, list(cells), model_source, config, model):
            by_cell[index] = rows
            bar.update(1)
    return [row for index in range(len(cells)) for row in by_cell[index]]


def circuit_heads(circuit: Circuit, kind: str, heads_per_kv: int = 1) -> Heads:
    """Layer -> query heads the circuit reads through by ``kind`` (key or value): the heads of its ``kind``
    attention reads, and every query head of a key/value group whose ``kind`` input has a circuit edge (``a18.2.v``
    with 3 query heads per key/value head: heads 18.6, 18.7, 18.8).

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> edges = (CircuitEdge("value", "a1.1", "a1.0.v", "c", "o"), CircuitEdge("residual", "a2.1.k", "a0.0", "s"),
    ...          CircuitEdge("residual", "a1.2.q", "embed", "c"), CircuitEdge("residual", "logits", "a1.1", "c"))
    >>> c = Circuit("m", "UB", "masks", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 4, 100)
    >>> circuit_heads(c, "value", heads_per_kv=2), circuit_heads(c, "key", heads_per_kv=2)
    ({1: [1]}, {2: [2, 3]})
    """
    channel = {"value": "v", "key": "k"}[kind]
    heads: dict[int, set[int]] = {}
    for edge in circuit.edges:
        if edge.kind == kind and (found := re.fullmatch(r"a(\d+)\.(\d+)", edge.reader)):
            heads.setdefault(int(found[1]), set()).add(int(found[2]))
        elif edge.kind == "residual" and (found := re.fullmatch(rf"a(\d+)\.(\d+)\.{channel}", edge.reader)):
            group = int(found[2])
            heads.setdefault(int(found[1]), set()).update(group * heads_per_kv + h for h in range(heads_per_kv))
    return {layer: sorted(hs) for layer, hs in sorted(heads.items())}


def circuit_head_set(circuit: Circuit, kinds: Sequence[str] = READ_KINDS, heads_per_kv: int = 1) -> HeadSet | None:
    """The head set ``circuit`` of a circuit: per kind, the heads of `circuit_heads`; None when the circuit reads
    through none of ``kinds``.

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> c = Circuit("m", "UB", "masks", "roles", (CircuitEdge("value", "a1.0", "a1.0.v", "c", "o"),), 1.0, 1.0, 1.0, 2.0,
    ...             0.0, 4, 100)
    >>> circuit_head_set(c).heads, circuit_head_set(c, ("key",))
    ({'value': {1: [0]}}, None)
    """
    heads = {kind: found for kind in kinds if (found := circuit_heads(circuit, kind, heads_per_kv))}
    return HeadSet("circuit", heads) if heads else None


ROUTE_METHODS = ("masks", "greedy", "top-k")  # whose circuit a length's head set takes, when several are published


def route_circuits(circuits: Iterable[Circuit], model: str, task: str, fmt: str, lengths: Sequence[int], n_layers: int,
                   n_heads: int, heads_per_kv: int = 1) -> dict[int, Circuit]:
    """For each of ``lengths``, the circuit of ``model`` on ``task`` in prompt format ``fmt`` (corrupt
    counterfactual) among ``circuits``, the first method of `ROUTE_METHODS` where several are; a circuit naming a
    head the model (``n_layers`` x ``n_heads``, ``heads_per_kv`` query heads per key/value head) does not have is
    refused.

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> def found(method, length):
    ...     return Circuit("m", "UB", method, "roles", (CircuitEdge("value", "a1.0", "a1.0.v", "c", "o"),), 1.0, 1.0, 1.0,
    ...                    2.0, 0.0, 4, 100, config={"length": length, "prompt_format": "single-shot"})
    >>> {n: c.method for n, c in route_circuits([found("top-k", 4), found("masks", 4), found("masks", 5)], "m", "UB",
    ...                                          "single-shot", [4], 2, 4).items()}
    {4: 'masks'}
    """
    chosen: dict[int, Circuit] = {}
    rank = {method: i for i, method in enumerate(ROUTE_METHODS)}
    for circuit in circuits:
        config = circuit.config
        if (model_label(str(circuit.model)) != model_label(model) or circuit.task != task
                or config.get("prompt_format", "single-shot") != fmt or config.get("counterfactual", "corrupt") != "corrupt"
                or config.get("length") not in lengths):
            continue
        length = config["length"]
        if length not in chosen or rank.get(circuit.method, len(rank)) < rank.get(chosen[length].method, len(rank)):
            chosen[length] = circuit
    for length, circuit in chosen.items():
        for kind in READ_KINDS:
            for layer, heads in circuit_heads(circuit, kind, heads_per_kv).items():
                if layer >= n_layers or max(heads) >= n_heads:
                    raise ValueError(f"the {circuit.method} circuit of {circuit.model} {task} at length {length} reads through "
                                     f"head {layer}.{max(heads)}; the model has layers 0-{n_layers - 1}, heads 0-{n_heads - 1}")
    return dict(sorted(chosen.items()))


def layer_head_set(layers: Sequence[int], n_heads: int) -> HeadSet:
    """Every head of ``layers``, for both kinds, named ``layers_1_2``.

    >>> s = layer_head_set([1], 4)
    >>> s.name, s.heads["key"]
    ('layers_1', {1: [0, 1, 2, 3]})
    """
    heads = {layer: list(range(n_heads)) for layer in sorted(layers)}
    return HeadSet("layers_" + "_".join(str(layer) for layer in sorted(layers)), {kind: heads for kind in READ_KINDS})


def route_cells(lengths: Sequence[int], circuits: Mapping[int, Circuit] | None = None, kinds: Sequence[str] = READ_KINDS,
                heads_per_kv: int = 1, layers: Sequence[int] | None = None, n_heads: int = 0) -> list[RouteCell]:
    """The cells of a study, per length: every head; every head of ``layers`` (given ``n_heads``); the heads of
    that length's circuit (``circuits``: length -> `Circuit`, as `route_circuits` picks them), where it has any.

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> c = Circuit("m", "UB", "masks", "roles", (CircuitEdge("value", "a1.0", "a1.0.v", "c", "o"),), 1.0, 1.0, 1.0, 2.0,
    ...             0.0, 4, 100)
    >>> [(c.length, c.head_set.name) for c in route_cells([3, 4], {4: c}, layers=[0], n_heads=2)]
    [(3, 'all'), (3, 'layers_0'), (4, 'all'), (4, 'layers_0'), (4, 'circuit')]
    """
    cells = []
    for length in lengths:
        cells.append(RouteCell(length, ALL_HEADS))
        if layers is not None:
            cells.append(RouteCell(length, layer_head_set(layers, n_heads)))
        circuit = (circuits or {}).get(length)
        if circuit is not None and (found := circuit_head_set(circuit, kinds, heads_per_kv)):
            cells.append(RouteCell(length, found))
    return cells
