"""The published circuits a figure is drawn from: ``results/circuit_<model>_<task>[_<variant>...]_<method>.json``
(`interp.core.tables.write_table`'s ``{"metadata": <Circuit.to_json()>, "rows": [...]}``, or a bare
`Circuit.save` file) and, beside it, ``circuit_ranking_<same>.csv``: the top edges of the method's ranking
(at most `RANKING_LIMIT`), from which the view draws the circuit at each grid point of the curve.

A ``circuit_*.json`` that is not a saved circuit (the per-length tables of earlier runs) is not drawn and not
an error; one that says it is a circuit but does not read back is.

>>> import tempfile
>>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
>>> c = Circuit("m", "UF", "top-k", "roles", (CircuitEdge("residual", "logits", "a1.0", "c", score=2.0),), 0.9, 1.0,
...             1.0, 2.0, 0.0, 4, 10)
>>> folder = Path(tempfile.mkdtemp())
>>> _ = c.save(folder / "circuit_m_UF_top-k.json")
>>> found, errors = published_circuits(folder, log=lambda line: None)
>>> [(p.stem, p.circuit == c, p.ranking) for p in found], errors
([('circuit_m_UF_top-k', True, ())], [])
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from interp.core.naming import model_label, result_files, result_stem, split_result_stem
from interp.core.tables import read_csv, stem_file
from interp.figures.rows import BAD_TABLE_ERRORS, table_error
from interp.interventions.circuits.circuit import FORMAT, Circuit, CircuitEdge

RANKING_LIMIT = 2000  # edges of the ranking the view can draw; grid points beyond show their numbers only
RANKING_COLUMNS = ("rank", "kind", "reader", "writer", "role", "key_role", "sources", "score", "rank_value")
EDGE_KINDS = ("residual", "key", "value")


@dataclass(frozen=True)
class PublishedCircuit:
    """One circuit as published: its file stem, the `Circuit`, the top of its method's ranking in rank order
    (empty without a ranking file) and the files it was read from."""

    stem: str
    circuit: Circuit
    ranking: tuple[CircuitEdge, ...]
    source: str


def read_circuit(path: str | Path) -> Circuit | None:
    """The circuit saved in ``path`` (a table's JSON or a bare saved circuit), or None when the file is JSON of
    something else; a file that names the circuit format but does not read back is refused by name."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"results file {path}: not readable as JSON ({err})") from None
    if isinstance(data, dict) and isinstance(data.get("metadata"), dict) and data["metadata"].get("format") == FORMAT:
        data = data["metadata"]
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return Circuit.from_json(data, f"results file {path}")


def _text(value) -> str:
    return "" if value is None else str(value)


def read_ranking(path: str | Path, limit: int = RANKING_LIMIT) -> tuple[CircuitEdge, ...]:
    """The first ``limit`` edges of a ``circuit_ranking_*.csv``, in rank order (ranks 1, 2, ... each once).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "circuit_ranking_m_UF_top-k.csv"
    >>> _ = path.write_text("rank,kind,reader,writer,role,key_role,sources,score,rank_value\\n"
    ...                     "2,value,a1.1,a1.1.v,c,o,s,-3.0,3.0\\n1,residual,logits,a1.1,c,,,4.0,4.0\\n")
    >>> [e.label for e in read_ranking(path)]
    ['logits <- a1.1 @ c', 'a1.1 @ c reads o by value']
    """
    path = Path(path)
    rows = sorted(read_csv(path, required=RANKING_COLUMNS), key=lambda r: float(r["rank"]) if r["rank"] is not None else -1)
    if [r["rank"] for r in rows] != list(range(1, len(rows) + 1)):
        raise ValueError(f"results file {path}: ranks are not 1, 2, ..., {len(rows)} (each once)")
    edges = []
    for r in rows[:limit]:
        if r["kind"] not in EDGE_KINDS:
            raise ValueError(f"results file {path}, rank {r['rank']}: kind {r['kind']!r}; expected one of {EDGE_KINDS}")
        if any(r[k] is not None and not isinstance(r[k], (int, float)) for k in ("score", "rank_value")):
            raise ValueError(f"results file {path}, rank {r['rank']}: score and rank_value must be numbers")
        edges.append(CircuitEdge(r["kind"], _text(r["reader"]), _text(r["writer"]), _text(r["role"]), _text(r["key_role"]),
                                 score=r["score"], rank_value=r["rank_value"], sources=_text(r["sources"])))
    return tuple(edges)


def published_circuits(results_dir: str | Path, model: str | None = None,
                       log=print) -> tuple[list[PublishedCircuit], list[str]]:
    """Every saved circuit in ``results_dir`` (``model``'s only, when given) with its ranking, and the errors (bad
    files, one line each)."""
    results_dir = Path(results_dir)
    found, errors, skipped = [], [], 0
    for path in result_files(results_dir, "circuit", ".json"):
        try:
            circuit = read_circuit(path)
            if circuit is None:
                skipped += 1
                continue
            if model is not None and model not in (circuit.model, model_label(circuit.model)):
                continue
            rest = split_result_stem(path.stem)[1]
            ranking_path = stem_file(result_stem(results_dir, "circuit_ranking", variant=rest), "csv")
            ranking = read_ranking(ranking_path) if ranking_path.is_file() else ()
            source = f"{results_dir.name}/{path.name}" + (f" and {ranking_path.name}" if ranking else "")
            found.append(PublishedCircuit(path.stem, circuit, ranking, source))
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    if skipped:
        log(f"note: {skipped} circuit_*.json file(s) in {results_dir} are not saved circuits (tables of an earlier "
            f"format): not drawn")
    if not found and not errors:
        log(f"note: skipping circuit figures: no saved circuit in {results_dir}/circuit_*.json "
            "(written by analyses/find_circuit.py)")
    return found, errors
