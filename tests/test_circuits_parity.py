"""Oracle parity with TransformerLens 4.3's edge attribution and faithfulness on a planted model
(n_kv_heads = n_heads there, so TransformerLens' edge graph runs)."""

import pytest
import torch
from transformer_lens.tools.analysis.attribution_patching import (EdgeAttributionConfig, Node, attribution_patch,
                                                                  faithfulness)

from interp.interventions.circuits import circuit_graph, circuit_runner, copying_task, edge_scores
from interp.interventions.circuits.graph import Component
from interp.models import load_model


@pytest.fixture(scope="module")
def setup():
    model = load_model("planted-ub@0.7", device="cpu")  # planted plus noise: no score is exactly zero by design
    task = copying_task(model.tokenizer, "UB", 3, 2, seed=3)
    return model, task, circuit_graph(model)


def _component(node: Node, graph) -> Component:
    kinds = {"embed": "embed", "attn_head_out": "head", "mlp_out": "mlp", "q_input": "q", "k_input": "k",
             "v_input": "v", "mlp_in": "mlp_in", "logits": "logits"}
    kind = kinds[node.kind]
    if kind == "logits":
        return Component("logits", graph.n_layers)
    return Component(kind, -1 if node.layer is None else node.layer, -1 if node.head is None else node.head)


def _one_row_metric(task, row):
    single = task.rows(slice(row, row + 1))
    return lambda logits: single.metric(logits)[0]


def test_first_order_scores_equal_transformer_lens_edge_attribution(setup):
    model, task, graph = setup
    ours = edge_scores(model, task.rows(slice(0, 1)), "eap", graph=graph)
    # ours(clean=X, counterfactual=Y) is TL's denoising score with clean=Y and corrupt=X
    theirs = attribution_patch(model, task.corrupt[:1], task.clean[:1], _one_row_metric(task, 0),
                               EdgeAttributionConfig(granularity="edge"))
    assert len(theirs.edge_scores) > 1000
    compared = 0
    scale = max(abs(v) for v in theirs.edge_scores.values())
    for (writer, reader), value in theirs.edge_scores.items():
        r = graph.reader_index(_component(reader, graph))
        w = graph.writer_index(_component(writer, graph))
        assert float(ours[reader.position, r, w]) == pytest.approx(value, abs=1e-4 * scale)
        compared += 1
    assert compared == len(theirs.edge_scores)
    assert scale > 1e-3  # the comparison is not between zeros


def test_circuit_metric_equals_transformer_lens_faithfulness(setup):
    """TransformerLens' circuit (its top edges, every other one ablated to the corrupt run) measured by the
    position-level graph gives the same metric. TL's graph has no position writer, so its circuits keep the
    position embeddings' edges."""
    model, task, graph = setup
    one = task.rows(slice(1, 2))
    scores = edge_scores(model, one, "eap", graph=graph)
    theirs = attribution_patch(model, one.corrupt, one.clean, _one_row_metric(task, 1),
                               EdgeAttributionConfig(granularity="edge"))
    circuit = [(w, r) for w, r, _ in theirs.top_edges(40)]
    result = faithfulness(model, one.clean, one.corrupt, _one_row_metric(task, 1), circuit)
    runner = circuit_runner(model, one, grain="positions")
    positions = runner.graph
    index = {(r, w, role): i for i, (r, w, role) in enumerate(positions.residual.tolist())}
    pos_embed = graph.writer_index(Component("pos_embed"))
    kept = [i for i, (_, w, _) in enumerate(positions.residual.tolist()) if w == pos_embed]
    for writer, reader in circuit:  # TL's top edges all lie at or before the last scored position
        r, w = graph.reader_index(_component(reader, graph)), graph.writer_index(_component(writer, graph))
        kept.append(index[(r, w, int(positions.position_roles[reader.position]))])
    ours = runner.measure([torch.tensor(sorted(kept))])
    ablated = result.corrupt_metric + result.recovered * (result.full_metric - result.corrupt_metric)
    assert float(ours.metric[0]) == pytest.approx(ablated, abs=1e-3)
    assert abs(result.recovered) > 0.05 and abs(result.recovered - 1) > 0.05  # a circuit that is neither empty nor full
    assert scores.abs().sum() > 0
