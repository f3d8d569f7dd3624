"""Circuit discovery on planted models (known circuits) and the command's argument checks."""

import sys
from pathlib import Path

import pytest
import torch

from interp.experiments.circuit_study import CircuitStudyConfig, circuit_study
from interp.interventions.circuits import Component, GraphEdges, circuit_graph, copying_task, edge_scores, exact_scores
from interp.interventions.circuits.faithfulness import circuit_metrics
from interp.interventions.circuits.selection import greedy, roc_auc
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


@pytest.fixture(scope="module")
def planted_ub():
    model = load_model("planted-ub", device="cpu")
    return model, copying_task(model.tokenizer, "UB", 4, 4), circuit_graph(model)


@pytest.mark.parametrize("name,task,length", [("planted-uf", "UF", 3), ("planted-ub", "UB", 3), ("planted-both", "UB", 3),
                                              ("planted-ur", "UR", 6), ("planted-ul", "UL", 6)])
def test_planted_circuit_recovered_by_exact_scores_and_its_circuit_is_faithful(name, task, length):
    model = load_model(name, device="cpu")
    out = circuit_study(model, CircuitStudyConfig(task=task, lengths=(length,), n=2, steps=2, n_random=1,
                                                                      edges_per_pass=64), model_label=name,
                        progress=False)
    summary = out["summary"][0]
    assert summary["auc_exact_component"] == 1.0
    assert summary["circuit_recovered"] >= 0.9 and summary["circuit_accuracy"] == 1.0
    assert summary["cpr"] > summary["random_cpr"] + 0.2
    if task in ("UF", "UB"):
        assert summary["circuit_edges"] < summary["edges"] / 20  # a circuit, not the whole graph
    else:  # retrieval is decided by queries and keys, which the input-path gradients do not see (see below)
        assert summary["auc_eap_ig"] < 1.0


def test_eap_ig_finds_the_value_route_but_not_saturated_query_key_edges(planted_ub):
    model, task, graph = planted_ub
    components = GraphEdges.components(graph.valid)
    labels = [(graph.readers[r].label, graph.writers[w].label) for r, w in zip(components.reader.tolist(), components.writer.tolist())]
    ig = edge_scores(model, task, "eap-ig", steps=4, graph=graph).sum(0)[components.reader, components.writer]
    exact = exact_scores(model, task, components, graph=graph)
    route = torch.tensor([label in {("logits", "a1.1"), ("a1.1.v", "a0.0"), ("a0.0.v", "embed")} for label in labels])
    assert roc_auc(ig, route) == 1.0 and roc_auc(exact, route) == 1.0
    query_key = torch.tensor([label in {("a1.1.q", "embed"), ("a1.1.k", "embed")} for label in labels])
    assert exact[query_key].abs().min() > 5 and ig[query_key].abs().max() < 0.1  # where the input-path IG stops


def test_exact_single_edges_agree_with_dense_circuit_removal(planted_ub):
    """The sparse (one edge per row group) and dense (circuit) removals are one rule: removing one edge
    densely gives the same metric as patching it sparsely."""
    model, task, graph = planted_ub
    n_pos = task.clean.shape[1]
    every = GraphEdges.from_mask(graph.valid.expand(n_pos, -1, -1))
    value_route = ((every.reader == graph.readers.index(Component("v", 1, 1)))
                   & (every.writer == graph.writers.index(Component("head", 0, 0)))).nonzero()[:, 0]
    in_string = (every.pos[value_route] > task.prompts.string_start) & (every.pos[value_route] < task.prompts.copy_start)
    edges = every[torch.cat([value_route[in_string][:2], torch.tensor([5, 400])])]
    sparse = exact_scores(model, task, edges, graph=graph, edges_per_pass=2)
    full = graph.valid.expand(n_pos, -1, -1).clone()
    kept = full[None].repeat(len(edges) + 1, 1, 1, 1)
    for i in range(len(edges)):
        kept[i + 1, edges.pos[i], edges.reader[i], edges.writer[i]] = False
    dense = circuit_metrics(model, task, kept, graph=graph).metric
    torch.testing.assert_close(dense[1:] - dense[0], sparse, atol=1e-3, rtol=1e-4)
    assert sparse.abs().max() > 1  # at least one of them matters


def test_greedy_circuit_reaches_the_logits(planted_ub):
    model, task, graph = planted_ub
    scores = edge_scores(model, task, "eap-ig", steps=4, graph=graph).sum(0)
    kept = greedy(scores, graph, 3)
    labels = {(graph.readers[r].label, graph.writers[w].label) for r, w in kept.nonzero().tolist()}
    assert labels == {("logits", "a1.1"), ("a1.1.v", "a0.0"), ("a0.0.v", "embed")}


def test_zero_counterfactual_and_gqa_readers():
    model = load_model("tiny-llama", device="cpu")  # n_kv_heads = n_heads; the graph still counts key/value heads apart
    graph = circuit_graph(model)
    assert sum(r.kind == "k" for r in graph.readers) == graph.n_layers * graph.n_kv_heads
    task = copying_task(model.tokenizer, "UF", 3, 2)
    scores = edge_scores(model, task, "eap", counterfactual="zero", graph=graph)
    assert scores.abs().sum() > 0 and not scores[:, ~graph.valid].any()


@pytest.mark.parametrize("argv,message", [(["--task", "NF"], "--task"), (["--method", "eap-ig", "--counterfactual", "zero"], "--method"),
                                          (["--method", "exact"], "--exact"), (["--lengths", "40"], "--lengths")])
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
    graph = circuit_graph(model)
    task = copying_task(model.tokenizer, "UB", 5, 4, prepend_bos=True)
    components = GraphEdges.components(graph.valid)
    exact = exact_scores(model, task, components, graph=graph, edges_per_pass=64)
    order = exact.argsort()  # most negative (most needed) first
    labels = [(graph.readers[components.reader[i]].label, graph.writers[components.writer[i]].label) for i in order.tolist()]
    assert set(labels[:3]) == {("logits", "m1"), ("a0.0.v", "embed"), ("a0.2.v", "embed")}
    assert {("m1.in", "a1.1"), ("m1.in", "a1.2"), ("m1.in", "a1.3")} <= set(labels[:8])
    _, cache = model.run_with_cache(task.clean, names_filter=lambda name: name.endswith("hook_pattern"))
    p = task.prompts
    string = torch.arange(p.string_start + 2, p.string_start + 5)
    two_back = cache["blocks.0.attn.hook_pattern"][:, :, string, string - 2].mean((0, 2))
    assert two_back[0] > 0.5 and two_back[2] > 0.5  # heads 0.0 and 0.2
    copy = p.copy_positions()[:-1]  # predicting the next copied token: current token at o, answer at o - 1
    after_occurrence = p.occurrences()[:-1] + 1
    reading = cache["blocks.1.attn.hook_pattern"][:, :, copy, after_occurrence].mean((0, 2))
    assert (reading[1:] > 0.5).all()  # heads 1.1-1.3 attend to o(t) + 1


def test_exact_effects_of_every_position_edge_are_correlated_with_every_gradient_score():
    model = load_model("planted-ub", device="cpu")
    config = CircuitStudyConfig(lengths=(3,), n=2, steps=2, n_random=0, exact="positions", verify=4, edges_per_pass=64,
                                budgets=(16,), attention=False)
    summary = circuit_study(model, config, model_label="planted-ub")["summary"][0]
    assert "verified_edges" not in summary and "pearson_top_eap" not in summary  # every edge measured: no top-only
    assert summary["pearson_eap_ig"] > 0.5 and summary["pearson_eap"] > 0.5
    assert -1 <= summary["spearman_eap_ig"] <= 1 and summary["pearson_components_eap_ig"] > 0.5


def test_the_faithfulness_curve_shows_its_passes_as_it_goes(planted_ub, capsys):
    from interp.interventions.circuits.faithfulness import faithfulness_curve

    model, task, graph = planted_ub
    scores = edge_scores(model, task, "eap", graph=graph)
    # full, empty, 3 budgets and 2 x 3 random circuits: 2 groups of 8 circuits, each over 2 chunks of 2 prompts
    faithfulness_curve(model, task, scores, budgets=[4, 8, 16], n_random=2, batch_size=2, graph=graph, progress=True)
    bar = capsys.readouterr().err
    assert "faithfulness curve" in bar and "4/4" in bar
