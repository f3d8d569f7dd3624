"""The Circuit type: saved and loaded whole, exported to pandas, networkx and graphviz DOT (rendered by graphviz
where it is installed), a refusal in one line for a file that is not a circuit."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from circuit_samples import sample_circuit

from interp import Circuit, find_circuit
from interp.models import load_model


@pytest.fixture(scope="module")
def planted() -> Circuit:
    model = load_model("planted-ub", device="cpu")
    return find_circuit(model, "UB", length=3, n=4, method="greedy", target=0.9, model_label="planted-ub",
                        fractions=(0.0, 0.01, 1.0), n_random=1)


def test_a_saved_circuit_loads_equal_with_its_curve_and_notes(tmp_path, planted):
    sampled, _ = sample_circuit(40)
    for circuit in (sampled, planted):
        loaded = Circuit.load(circuit.save(tmp_path / f"{circuit.model}.json"))
        assert loaded == circuit
        assert loaded.curve.cpr == circuit.curve.cpr and loaded.notes == circuit.notes


def test_the_planted_circuit_as_pandas_networkx_and_dot(planted):
    table = planted.to_pandas()
    assert len(table) == len(planted) and {"reader", "writer", "role", "score", "loss", "edge"} <= set(table.columns)
    graph = planted.to_networkx()
    assert {"a1.1@c", "logits@c", "a0.0@s", "embed@s"} <= set(graph.nodes)  # the planted path, node by node
    assert graph.has_edge("a1.1@c", "logits@c") and graph.has_edge("embed@s", "a0.0.v@s")
    dot = planted.to_dot()
    assert dot.startswith('digraph "planted-ub UB" {') and dot.rstrip().endswith("}")
    for a, b in graph.edges:
        assert f'"{a}" -> "{b}"' in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz (dot) is not installed")
def test_graphviz_renders_the_dot_text(planted, tmp_path):
    done = subprocess.run(["dot", "-Tsvg"], input=planted.to_dot(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "a1.1@c" in done.stdout and "logits@c" in done.stdout


@pytest.mark.parametrize("content", ['{"format": "other"}', "[1, 2]", "not json", '{"format": "interp-circuit-1"}'])
def test_a_file_that_is_not_a_circuit_is_refused_in_one_line(tmp_path, content):
    from interp.interventions.circuits.circuit import FORMAT

    path = tmp_path / "c.json"
    path.write_text(content.replace("interp-circuit-1", FORMAT))
    with pytest.raises(ValueError) as refused:
        Circuit.load(path)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


def test_the_repr_is_one_line_and_the_html_view_escapes_labels():
    circuit, _ = sample_circuit(5, model="<b>m</b>")
    assert "\n" not in repr(circuit) and repr(circuit).startswith("Circuit(<b>m</b> UF, top-k: 5 of 60,000 role edges")
    html = circuit._repr_html_()
    assert "<b>m</b>" not in html and "&lt;b&gt;m&lt;/b&gt;" in html
    assert json.loads(json.dumps(circuit.to_json()))["edges"][0]["reader"] == circuit.edges[0].reader
