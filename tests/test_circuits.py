"""Circuit discovery on planted models (known circuits) and the command's argument checks."""

import sys
from pathlib import Path

import pytest
import torch

from interp.experiments.circuit_study import CircuitStudyConfig, circuit_cells, circuit_study
from interp.interventions.circuits import Circuit, circuit_graph, circuit_runner, copying_task, edge_scores, exact_effects
from interp.interventions.circuits.curve import faithfulness_curve, grid_sizes
from interp.interventions.circuits.find import CircuitConfig
from interp.interventions.circuits.known import planted_edges, planted_role_edges
from interp.interventions.circuits.role_scores import residual_scores, role_edge_scores
from interp.interventions.circuits.runner import ROWS_PER_PASS
from interp.interventions.circuits.selection import roc_auc
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


@pytest.fixture(scope="module")
def planted_ub():
    model = load_model("planted-ub", device="cpu")
    return model, copying_task(model.tokenizer, "UB", 4, 4)


def _labels(runner) -> list[tuple[str, str]]:
    return [(edge.reader, edge.writer) for edge in runner.graph.edges()]


# Retrieval is decided by queries and keys, which the input-path gradients do not see
# (tests/test_circuit_sensitivity.py): its circuits are ranked by exact effects, over component-level edges.
@pytest.mark.parametrize("name,task,length,grain,score", [
    ("planted-uf", "UF", 3, "roles", "eap-ig"), ("planted-ub", "UB", 3, "roles", "eap-ig"),
    ("planted-both", "UB", 3, "roles", "eap-ig"), ("planted-ur", "UR", 6, "components", "exact"),
    ("planted-ul", "UL", 6, "components", "exact")])
def test_the_study_finds_a_small_faithful_circuit_in_every_planted_model(name, task, length, grain, score, tmp_path):
    model = load_model(name, device="cpu")
    config = CircuitConfig(n=2, steps=2, grain=grain, score=score, target=0.9, max_edges=50,
                           fractions=(0.0, 0.01, 0.1, 1.0), minimality=False)
    study = CircuitStudyConfig(task, (length,), ("top-k",), config)
    [cell] = circuit_study(model, study, circuit_cells(study, name, tmp_path / "circuit_summary"))
    summary, circuit = cell["summary"][0], Circuit.from_json(cell["circuits"][0])
    assert circuit.recovered >= 0.9 and circuit.accuracy == 1.0 and summary["recovered"] == circuit.recovered
    assert summary["cpr"] > summary["random_cpr"] + 0.2
    assert summary["edges"] == len(circuit) < summary["total_edges"] / 20  # a circuit, not the whole graph
    if grain == "components":  # exactly the planted component-level edges
        assert {(e.reader, e.writer) for e in circuit.edges} == planted_edges(name, task)
    else:  # the planted value path among the top-k (whole-circuit selection: tests/test_circuit_roles.py)
        assert {e.label for e in circuit.edges} >= {e.label for e in planted_role_edges(name, task)}


def test_eap_ig_finds_the_value_route_but_not_saturated_query_key_edges(planted_ub):
    model, task = planted_ub
    runner = circuit_runner(model, task, grain="components")
    labels = _labels(runner)
    ig = residual_scores(edge_scores(model, task, "eap-ig", steps=4, graph=runner.graph.components), runner.graph)
    exact = exact_effects(runner, torch.arange(runner.graph.n_residual))
    route = torch.tensor([label in {("logits", "a1.1"), ("a1.1.v", "a0.0"), ("a0.0.v", "embed")} for label in labels])
    assert roc_auc(ig, route) == 1.0 and roc_auc(exact, route) == 1.0
    query_key = torch.tensor([label in {("a1.1.q", "embed"), ("a1.1.k", "embed")} for label in labels])
    assert exact[query_key].abs().min() > 5 and ig[query_key].abs().max() < 0.1  # where the input-path IG stops


def test_zero_counterfactual_and_gqa_readers():
    model = load_model("tiny-llama", device="cpu")  # n_kv_heads = n_heads; the graph still counts key/value heads apart
    graph = circuit_graph(model)
    assert sum(r.kind == "k" for r in graph.readers) == graph.n_layers * graph.n_kv_heads
    task = copying_task(model.tokenizer, "UF", 3, 2)
    scores = edge_scores(model, task, "eap", counterfactual="zero", graph=graph)
    assert scores.abs().sum() > 0 and not scores[:, ~graph.valid].any()


@pytest.mark.parametrize("argv,message", [(["--task", "NF"], "--task"), (["--score", "eap-ig", "--counterfactual", "zero"], "--score"),
                                          (["--method", "exact"], "--method"), (["--lengths", "40"], "--lengths"),
                                          (["--verify", "300"], "--verify")])
def test_find_circuit_refuses_bad_arguments_in_one_line(argv, message, tmp_path, capsys, monkeypatch):
    import find_circuit
    from interp.cli import run

    monkeypatch.setattr(find_circuit, "load_model_from_args", lambda args: pytest.fail("the model loaded"))
    with pytest.raises(SystemExit) as exit_info:
        run(find_circuit.main, ["--model", "planted-ub", "--out", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "error" in last and message in last and "Traceback" not in err


def test_scratch_ub_route_runs_through_two_back_values_and_mlp1():
    """scratch-ub's UB (docs/findings.md): layer-0 heads 0.0 / 0.2 read the token two back, heads 1.1-1.3
    read them, MLP 1 writes the answer; the exact effects of component-level edges name that route."""
    model = load_model("scratch-ub", device="cpu")
    task = copying_task(model.tokenizer, "UB", 5, 4, prepend_bos=True)
    runner = circuit_runner(model, task, grain="components")
    exact = exact_effects(runner, torch.arange(runner.graph.n_residual))
    labels = _labels(runner)
    ordered = [labels[i] for i in exact.argsort().tolist()]  # most negative (most needed) first
    assert set(ordered[:3]) == {("logits", "m1"), ("a0.0.v", "embed"), ("a0.2.v", "embed")}
    assert {("m1.in", "a1.1"), ("m1.in", "a1.2"), ("m1.in", "a1.3")} <= set(ordered[:8])
    _, cache = model.run_with_cache(task.clean, names_filter=lambda name: name.endswith("hook_pattern"))
    p = task.prompts
    string = torch.arange(p.string_start + 2, p.string_start + 5)
    two_back = cache["blocks.0.attn.hook_pattern"][:, :, string, string - 2].mean((0, 2))
    assert two_back[0] > 0.5 and two_back[2] > 0.5  # heads 0.0 and 0.2
    copy = p.copy_positions()[:-1]  # predicting the next copied token: current token at o, answer at o - 1
    after_occurrence = p.occurrences()[:-1] + 1
    reading = cache["blocks.1.attn.hook_pattern"][:, :, copy, after_occurrence].mean((0, 2))
    assert (reading[1:] > 0.5).all()  # heads 1.1-1.3 attend to o(t) + 1


def _pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1])


@pytest.mark.parametrize("grain", ["positions", "components"])
def test_exact_effects_of_every_edge_are_correlated_with_every_gradient_score(grain):
    model = load_model("planted-ub", device="cpu")
    runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 2), grain=grain)
    exact = role_edge_scores(runner, "exact")
    assert len(exact) == runner.graph.n_residual and exact.abs().max() > 5  # every edge measured, some matter
    assert _pearson(role_edge_scores(runner, "eap"), exact) > 0.5
    assert _pearson(role_edge_scores(runner, "eap-ig", steps=2), exact) > 0.5


def test_the_faithfulness_curve_shows_its_passes_as_it_goes(planted_ub, capsys):
    model, task = planted_ub
    runner = circuit_runner(model, task, batch_size=2)
    fractions = (0.0, 0.005, 0.01, 0.02, 1.0)
    sizes = sorted(set(grid_sizes(len(runner.graph), fractions)))
    # every grid size and 2 random circuits of each inner size: 11 circuits, ROWS_PER_PASS / 2 per pass of a chunk
    # of 2 prompts
    circuits = len(sizes) + 2 * (len(sizes) - 2)
    expected = len(runner.chunks) * -(-circuits // (ROWS_PER_PASS // 2))
    assert circuits == 11 and len(runner.chunks) == -(-task.n // 2) and runner.passes(circuits) == expected
    faithfulness_curve(runner, role_edge_scores(runner, "eap").abs(), fractions=fractions, n_random=2, progress=True)
    bar = capsys.readouterr().err
    assert "faithfulness curve" in bar and f"{expected}/{expected}" in bar
