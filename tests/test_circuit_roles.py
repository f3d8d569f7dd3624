"""The role-level graph and its masked runs: removal is exact (the empty circuit is the counterfactual run, the
whole graph the model, sparse and dense sums agree, a single read removed equals the attention-level exact
score), gradients of the edge weights are the first-order scores, and every selection method recovers the
planted circuits."""

import pytest
import torch

from interp.interventions.circuits import circuit_graph, copying_task, edge_scores
from interp.interventions.circuits.attention import AttentionEdgeSet, attention_exact_scores
from interp.interventions.circuits.find import find_circuit
from interp.interventions.circuits.known import planted_role_edges
from interp.interventions.circuits.masking import masked_logits
from interp.interventions.circuits.removal_state import removal_state
from interp.interventions.circuits.role_graph import role_graph
from interp.interventions.circuits.role_scores import exact_effects, role_edge_scores
from interp.interventions.circuits.runner import as_mask, circuit_runner, top_k
from interp.interventions.circuits.selection import roc_auc
from interp.interventions.edges.layout import attention_layout
from interp.models import load_model


@pytest.fixture(scope="module", params=["planted-ub", "tiny-llama"])
def setup(request):
    torch.manual_seed(0)
    model = load_model(request.param, device="cpu")
    task = copying_task(model.tokenizer, "UB", 4, 3, prepend_bos=True)
    graph, layout = role_graph(model, task), attention_layout(model)
    return model, task, graph, layout, removal_state(model, graph, layout, task.clean, task.corrupt)


def _run(setup, edges, coef, **kw):
    model, task, graph, layout, state = setup
    return masked_logits(model, graph, layout, state, task.clean, edges, coef, **kw)


def test_the_empty_circuit_is_the_counterfactual_run_and_the_whole_graph_the_model(setup):
    model, task, graph, *_ = setup
    empty = _run(setup, torch.zeros(0, dtype=torch.long), torch.zeros(1, 0))
    full = _run(setup, torch.arange(len(graph)), torch.ones(1, len(graph)))
    with torch.no_grad():
        torch.testing.assert_close(empty, model(task.corrupt)[:, task.positions], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(full, model(task.clean)[:, task.positions], atol=1e-4, rtol=1e-4)


def test_sparse_and_dense_sums_agree_and_a_complement_is_the_same_circuit(setup):
    graph = setup[2]
    keep = torch.randperm(len(graph), generator=torch.Generator().manual_seed(1))[: len(graph) // 3].sort().values
    sparse = _run(setup, keep, torch.ones(1, len(keep)), dense=False)
    dense = _run(setup, keep, torch.ones(1, len(keep)), dense=True)
    torch.testing.assert_close(sparse, dense, atol=1e-4, rtol=1e-4)
    removed = torch.tensor([i for i in range(len(graph)) if i not in set(keep.tolist())])
    complement = _run(setup, removed, -torch.ones(1, len(removed)), kept_by_default=True)
    torch.testing.assert_close(sparse, complement, atol=1e-3, rtol=1e-3)


def test_one_attention_read_removed_equals_the_attention_level_exact_score(setup):
    model, task, graph, layout, _ = setup
    wanted = {(1, 1, "value", "o"), (0, 0, "value", "t-1"), (1, 0, "value", "o+1"), (1, 1, "key", "o"), (1, 2, "key", "t")}
    chosen = [i for i, r in enumerate(graph.reads) if (r.layer, r.head, r.kind, r.key_role) in wanted]
    sets = [AttentionEdgeSet(graph.reads[i].kind, graph.reads[i].query, graph.reads[i].source, (graph.reads[i].layer,),
                             (graph.reads[i].head,)) for i in chosen]
    expected = attention_exact_scores(model, task, sets, layout=layout)
    runner = circuit_runner(model, task, graph=graph)
    measured = exact_effects(runner, torch.tensor(chosen) + graph.n_residual)
    torch.testing.assert_close(measured, expected, atol=1e-3, rtol=1e-3)
    assert expected.abs().max() > 0


def test_gradients_of_the_edge_weights_are_minus_the_eap_scores(setup):
    model, task, _, layout, _ = setup
    graph = role_graph(model, task, grain="positions")
    state = removal_state(model, graph, layout, task.clean, task.corrupt)
    coef = torch.zeros(1, graph.n_residual, requires_grad=True)
    scored = masked_logits(model, graph, layout, state, task.clean, torch.arange(graph.n_residual), coef, kept_by_default=True)
    task.scored_metric(scored).mean().backward()
    r, w, position = graph.residual.unbind(-1)
    eap = edge_scores(model, task, "eap")[position, r, w]
    assert eap.abs().max() > 0.01
    torch.testing.assert_close(coef.grad[0], -eap, atol=1e-3, rtol=1e-3)


def test_a_component_edge_removed_alone_matches_patching_it_by_hand():
    """Hooks written here, apart from `masking`: the reader's input gains the writer's corrupt output minus its
    clean one, at every position (also after the last scored one, which cannot move the metric)."""
    from interp.interventions.circuits.graph import graph_hooks_enabled
    from interp.interventions.circuits.patching import writer_activations

    model = load_model("planted-ub", device="cpu")
    task = copying_task(model.tokenizer, "UB", 3, 4)
    components = circuit_graph(model)
    runner = circuit_runner(model, task, grain="components")
    edges = torch.arange(0, runner.graph.n_residual, 7)
    by_hand = []
    with graph_hooks_enabled(model), torch.no_grad():
        clean, logits = writer_activations(model, components, task.clean)
        corrupt, _ = writer_activations(model, components, task.corrupt)
        for reader, writer, _ in runner.graph.residual[edges].tolist():
            slots = next(h for h in components.reader_hooks if h.start <= reader < h.stop)
            delta = corrupt[:, :, writer] - clean[:, :, writer]

            def patch(x, hook, slots=slots, reader=reader, delta=delta):
                x = x.clone()
                if slots.per_head:
                    x[:, :, reader - slots.start] += delta.to(x.dtype)
                else:
                    x += delta.to(x.dtype)
                return x

            patched = model.run_with_hooks(task.clean, fwd_hooks=[(slots.name, patch)])
            by_hand.append(float((task.metric(patched) - task.metric(logits)).mean()))
    by_hand = torch.tensor(by_hand)
    torch.testing.assert_close(exact_effects(runner, edges), by_hand, atol=1e-3, rtol=1e-3)
    assert by_hand.abs().max() > 1  # some of the sampled edges matter


@pytest.mark.parametrize("name, task_name", [("planted-ub", "UB"), ("planted-uf", "UF")])
def test_every_method_recovers_exactly_the_planted_route(name, task_name):
    model = load_model(name, device="cpu")
    task = copying_task(model.tokenizer, task_name, 4, 6, prepend_bos=True)
    runner = circuit_runner(model, task)
    # the smallest planted circuit keeping 0.9 of the gap: the copy's value path, with the separator's where needed
    copy = {runner.graph.find(e) for e in planted_role_edges(name, task_name, "copy")}
    part = "copy" if runner.meets(torch.tensor(sorted(copy)), 0.9)[0] else "circuit"
    truth = {e.label for e in planted_role_edges(name, task_name, part)}
    mechanism = {runner.graph.find(edge) for edge in planted_role_edges(name, task_name, "mechanism")}
    # exact single-edge scores rank the whole mechanism first, the query/key path included, which whole-circuit
    # selection rightly drops: with every other edge removed a corrupt query still meets its corrupt key
    assert roc_auc(role_edge_scores(runner, "exact"), as_mask(torch.tensor(sorted(mechanism)), len(runner.graph))) == 1.0
    for method in ("masks", "greedy", "top-k"):
        circuit = find_circuit(model, task, method=method, target=0.9, max_edges=50, candidates=200, mask_steps=80,
                               steps=2, fractions=(0.0, 0.01, 0.1, 1.0), model_label=name)
        assert {e.label for e in circuit.edges} >= truth, method
        if method != "top-k":  # EAP-IG's top-k holds the circuit; whole-circuit selection finds exactly it
            assert {e.label for e in circuit.edges} == truth, method
        assert circuit.recovered >= 0.9
    curve = circuit.curve
    assert [p.edges for p in curve.points] == [0, round(0.01 * len(runner.graph)), round(0.1 * len(runner.graph)), len(runner.graph)]
    assert curve.points[0].recovered == pytest.approx(0.0, abs=1e-4) and curve.points[-1].recovered == pytest.approx(1.0, abs=1e-4)
    assert curve.cpr > curve.random_cpr


def test_a_model_that_cannot_do_the_task_is_refused():
    from interp.interventions.circuits.runner import WeakTaskError

    model = load_model("tiny-llama", device="cpu")
    with pytest.raises(WeakTaskError, match="gap"):
        find_circuit(model, "UF", length=4, n=4, method="top-k", model_label="tiny-llama")
    marked = find_circuit(model, "UF", length=4, n=4, method="top-k", model_label="tiny-llama", allow_weak=True,
                          minimality=False, fractions=(0.0, 1.0), max_edges=5)
    assert any("weak task" in note for note in marked.notes) and "weak task" in marked.describe()


def test_a_model_that_normalises_block_outputs_writes_one_attention_output_per_layer():
    """Gemma 2 / 3 add norm(sum of heads) to the residual: heads cannot be writers of their own there."""
    from interp.interventions.circuits.graph import CircuitGraph

    graph = CircuitGraph(2, 4, 1, False, post_norm=True)
    assert [w.label for w in graph.writers] == ["embed", "attn0", "m0", "attn1", "m1"]
    assert [h.name for h in graph.writer_hooks][1:3] == ["blocks.0.hook_attn_out", "blocks.0.hook_mlp_out"]
    assert graph.valid[graph.readers.index(graph.readers[0]), 1:].sum() == 0  # layer 0's queries read the embedding only


def test_a_reader_input_that_is_not_the_sum_of_the_writers_is_refused(monkeypatch):
    import interp.interventions.circuits.removal_state as masking

    model = load_model("planted-ub", device="cpu")
    task = copying_task(model.tokenizer, "UB", 3, 2)
    original = masking._bases
    monkeypatch.setattr(masking, "_bases", lambda graph, delta, clean: {k: v * 1.5 for k, v in original(graph, delta, clean).items()})
    with pytest.raises(NotImplementedError, match="not the sum of the graph's writers"):
        circuit_runner(model, task)


def test_prompts_in_uneven_chunks_measure_what_one_chunk_does():
    torch.manual_seed(0)
    model = load_model("planted-ub", device="cpu")
    task = copying_task(model.tokenizer, "UB", 4, 3, prepend_bos=True)
    whole = circuit_runner(model, task, batch_size=3)
    circuits = [torch.arange(0, len(whole.graph), 2), torch.arange(len(whole.graph))]
    expected = whole.measure(circuits).metric
    # beartype checks one element of a list, drawn at random: build the runner often enough to meet the short chunk
    for _ in range(10):
        uneven = circuit_runner(model, task, batch_size=2)
        assert [s.stop - s.start for s in uneven.chunks] == [2, 1]
        torch.testing.assert_close(uneven.measure(circuits).metric, expected, atol=1e-4, rtol=1e-4)
