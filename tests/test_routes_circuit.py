"""The route study's ``circuit`` head set, read from a published `Circuit`: the heads with an attention read of a
kind, and every query head of a key/value group whose input of that kind has a circuit edge; the circuit of the
run's model, task, format and length; and analyses/circuit_routes.py finding it in --results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from interp.cli import run
from interp.core.tables import read_csv, write_table
from interp.experiments.routes import circuit_head_set, circuit_heads, route_cells
from interp.experiments.routes.study import route_circuits
from interp.interventions.circuits.circuit import Circuit, CircuitEdge as E

ROOT = Path(__file__).resolve().parents[1]


def circuit(edges, model="m", task="UB", method="masks", length=4, fmt="single-shot", counterfactual="corrupt") -> Circuit:
    return Circuit(model, task, method, "roles", tuple(edges), 1.0, 1.0, 1.0, 2.0, 0.0, 4, 100,
                   config={"length": length, "prompt_format": fmt, "n_shots": 1, "counterfactual": counterfactual})


def test_circuit_heads_of_each_kind():
    found = circuit([E("value", "a1.1", "a1.0.v", "c", "o"),           # a read: its own query head
                     E("residual", "a2.1.k", "a0.0", "s"),              # a key input: every head of group 1
                     E("residual", "a18.2.v", "a17.3", "s"),            # SmolLM2's a18.2.v: heads 18.6 - 18.8
                     E("residual", "a1.2.q", "embed", "c"),             # a query: no read of the string
                     E("residual", "logits", "a1.1", "c")])
    assert circuit_heads(found, "value", 3) == {1: [1], 18: [6, 7, 8]}
    assert circuit_heads(found, "key", 3) == {2: [3, 4, 5]}
    assert circuit_head_set(found, ("value", "key"), 3).heads == {"value": {1: [1], 18: [6, 7, 8]}, "key": {2: [3, 4, 5]}}
    assert circuit_head_set(circuit([E("residual", "logits", "a1.1", "c")])) is None  # reads nothing: no head set


def test_the_circuit_of_the_runs_model_task_format_and_length_is_taken():
    read = [E("value", "a1.1", "a1.1.v", "c", "o")]
    others = [circuit(read, model="other"), circuit(read, task="UF"), circuit(read, fmt="few-shot"),
              circuit(read, counterfactual="zero"), circuit(read, length=5)]
    top_k, masks = circuit([E("key", "a1.2", "a1.2.k", "c", "o")], method="top-k"), circuit(read)
    chosen = route_circuits([*others, top_k, masks], "m", "UB", "single-shot", [4], n_layers=2, n_heads=4)
    assert list(chosen) == [4] and chosen[4] is masks  # masks' circuit before top-k's
    assert route_circuits(others + [top_k], "m", "UB", "single-shot", [4], 2, 4)[4] is top_k
    assert route_circuits(others, "m", "UB", "single-shot", [4], 2, 4) == {}
    cells = route_cells([3, 4], chosen, heads_per_kv=1)
    assert [(c.length, c.head_set.name) for c in cells] == [(3, "all"), (4, "all"), (4, "circuit")]
    assert cells[-1].head_set.heads == {"value": {1: [1]}}
    with pytest.raises(ValueError, match="reads through head 5.1; the model has layers 0-1, heads 0-3"):
        route_circuits([circuit([E("value", "a5.1", "a5.1.v", "c", "o")])], "m", "UB", "single-shot", [4], 2, 4)


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("circuit_routes_script", ROOT / "analyses" / "circuit_routes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def publish(folder: Path, found: Circuit) -> str:
    """``found`` as analyses/find_circuit.py publishes it (the circuit in its table's JSON metadata)."""
    stem = f"circuit_{found.model}_{found.task}_L{found.config['length']}_{found.method}"
    write_table(found.rows(), folder / stem, metadata=found.to_json())
    return stem + ".json"


def test_the_script_runs_the_published_circuits_heads(tmp_path, script, capsys):
    """planted-ub's circuit copies through head 1.1's value read of o, which head 0.0's value (the previous
    token) feeds: the circuit head set is head 1.1 for values and nothing for keys."""
    results = tmp_path / "results"
    results.mkdir()
    name = publish(results, circuit([E("residual", "logits", "a1.1", "c", score=-3.0),
                                     E("value", "a1.1", "a1.1.v", "c", "o", score=-3.0, sources="s"),
                                     E("residual", "a1.1.v", "a0.0", "s", score=-2.0)], model="planted-ub"))
    publish(results, circuit([E("value", "a1.2", "a1.2.v", "c", "o")], model="planted-ub", length=5))  # another length
    publish(results, circuit([E("value", "a1.3", "a1.3.v", "c", "o")], model="planted-uf"))           # another model
    argv = ["--model", "planted-ub", "--task", "UB", "--lengths", "4", "--n", "2", "--counterfactuals", "zero",
            "--results", str(results), "--out", str(tmp_path), "--boot", "100", "--quiet"]
    assert run(script.main, argv) == 0, capsys.readouterr().err
    rows = read_csv(tmp_path / "circuit_routes_planted-ub_UB.csv")
    sets = {(r["head_set"], r["kind"]) for r in rows}
    assert sets == {("all", "value"), ("all", "key"), ("circuit", "value")}
    assert {str(r["heads"]) for r in rows if r["head_set"] == "circuit"} == {"1.1"}
    assert json.loads((tmp_path / "circuit_routes_planted-ub_UB.json").read_text())["metadata"]["circuit"] == [name]


def test_a_published_circuit_of_heads_the_model_lacks_is_refused_in_one_line(tmp_path, script, capsys):
    publish(tmp_path, circuit([E("value", "a7.0", "a7.0.v", "c", "o")], model="planted-ub"))
    out = tmp_path / "out"
    out.mkdir()
    code = run(script.main, ["--model", "planted-ub", "--task", "UB", "--lengths", "4", "--n", "2", "--results", str(tmp_path),
                             "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "reads through head 7.0; the model has layers 0-1" in err[0]
    assert not list(out.iterdir())
