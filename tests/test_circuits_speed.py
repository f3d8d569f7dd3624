"""The fast path of the first-order edge scores (readers in blocks over their upstream writers, scored as the
backward pass delivers their gradients, the counterfactual pass stopped at the last writer, logits at the
scored positions only) against the plain computation, and the reference benchmark's skip and mapping.
No timing here: the speed is measured by benchmarks/bench_eap_reference.py."""

import sys
from functools import partial
from pathlib import Path

import pytest
import torch

from interp.interventions.circuits import circuit_graph, copying_task, edge_scores
from interp.interventions.circuits.graph import CircuitGraph, graph_hooks_enabled
from interp.interventions.circuits.patching import writer_activations
from interp.interventions.circuits.scores import _reader_blocks
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.parametrize("graph", [CircuitGraph(3, 4, 2, True), CircuitGraph(2, 9, 3, False), CircuitGraph(1, 2, 2, False)])
def test_reader_blocks_cover_every_reader_once_with_all_its_writers(graph):
    blocks = _reader_blocks(graph, graph.reader_hooks)
    covered = [r for block in blocks for r in range(block.readers.start, block.readers.stop)]
    assert covered == list(range(len(graph.readers)))
    for block in blocks:
        for r in range(block.readers.start, block.readers.stop):
            n_writers = int(graph.valid[r].sum())
            assert bool(graph.valid[r, :n_writers].all())  # a prefix of the writers
            assert 0 <= block.upstream - n_writers <= 1  # the block's product computes at most one edge too many
    # the first layer's q/k/v; each later layer's with the MLP input before them; the last MLP input with the logits
    assert len(blocks) == graph.n_layers + 1


def _plain_scores(model, task, steps: int) -> torch.Tensor:
    """EAP-IG over the inputs written out directly: every reader's gradient from one pass per step over all
    prompts, dotted with every writer's change at every position, masked by the graph."""
    graph = circuit_graph(model)
    with graph_hooks_enabled(model):
        clean, _ = writer_activations(model, graph, task.clean)
        corrupt, _ = writer_activations(model, graph, task.corrupt)
        grads = {}
        for k in range(1, steps + 1):
            held = {}

            def embed(x, hook, k=k):
                mixed = x if k == steps else corrupt[:, :, 0] + (k / steps) * (x - corrupt[:, :, 0])
                return mixed.detach().requires_grad_(True)

            def hold(x, hook, name):
                held[name] = x = x.clone()
                return x

            hooks = [("hook_embed", embed)] + [(h.name, partial(hold, name=h.name)) for h in graph.reader_hooks]
            with torch.enable_grad():
                logits = model.run_with_hooks(task.clean, fwd_hooks=hooks)
                names = list(held)
                values = torch.autograd.grad(task.metric(logits).sum(), [held[n] for n in names])
            for name, g in zip(names, values):
                grads[name] = grads.get(name, 0) + g / steps
    total = torch.zeros(task.clean.shape[1], len(graph.readers), len(graph.writers))
    for slots in graph.reader_hooks:
        g = grads[slots.name] if slots.per_head else grads[slots.name][:, :, None]
        total[:, slots.start:slots.stop] += torch.einsum("bpwd,bprd->prw", corrupt - clean, g)
    return total * graph.valid / task.n


def _check_against_plain(model, task):
    for method, steps in (("eap", 1), ("eap-ig", 3)):
        fast = edge_scores(model, task, method, steps=steps, batch_size=2)
        plain = _plain_scores(model, task, steps)
        scale = float(plain.abs().max())
        assert scale > 1e-3
        torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-5 * scale)


def test_scores_equal_the_plain_computation_with_a_position_writer():
    model = load_model("tiny-gpt2", device="cpu")  # a position-embedding writer, fused query/key/value weights
    _check_against_plain(model, copying_task(model.tokenizer, "UF", 3, 3, seed=1, fmt="few-shot", n_shots=2))


@pytest.mark.embedded
def test_scores_equal_the_plain_computation_on_grouped_query_attention():
    model = load_model(device="cpu")  # SmolLM2-135M: 9 query heads share 3 key/value heads
    task = copying_task(model.tokenizer, "UF", 2, 3, seed=1, fmt="few-shot", n_shots=1, prepend_bos=True)
    assert circuit_graph(model).n_kv_heads < model.cfg.n_heads
    _check_against_plain(model, task)


def test_reference_benchmark_skips_in_one_line_without_the_reference(tmp_path, monkeypatch, capsys):
    import bench_eap_reference

    monkeypatch.delenv(bench_eap_reference.REFERENCE_ENV, raising=False)
    for argv in ([], ["--reference", str(tmp_path)]):
        assert bench_eap_reference.main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 1 and lines[0].startswith("bench_eap_reference: skipped")


def test_reference_scores_map_to_the_toolkit_readers_and_writers():
    """The reference's [forward, backward] matrix (a key/value input per query head) summed into the toolkit's
    [reader, writer] one (a key/value input per key/value head)."""
    from bench_eap_reference import at_toolkit_grain

    graph = CircuitGraph(2, 4, 2, False)  # 2 layers, 4 query heads in 2 groups
    n_forward, n_backward = 1 + 2 * (4 + 1), 2 * (3 * 4 + 1) + 1
    scores = torch.zeros(n_forward, n_backward)
    layer1 = 3 * 4 + 1
    scores[3, layer1 + 4 + 2] = 1.0  # head 0.2 -> key input of query head 1.2 (group 1)
    scores[3, layer1 + 4 + 3] = 2.0  # head 0.2 -> key input of query head 1.3 (group 1)
    scores[0, layer1 + 2 * 4 + 0] = 5.0  # embeddings -> value input of query head 1.0 (group 0)
    scores[5, -1] = 7.0  # MLP 0 -> logits
    mapped = at_toolkit_grain(scores, graph)
    head = graph.writer_index
    from interp.interventions.circuits.graph import Component
    assert float(mapped[graph.reader_index(Component("k", 1, 1)), head(Component("head", 0, 2))]) == 3.0
    assert float(mapped[graph.reader_index(Component("v", 1, 0)), head(Component("embed"))]) == 5.0
    assert float(mapped[graph.reader_index(Component("logits", 2)), head(Component("mlp", 0))]) == 7.0
    assert float(mapped.sum()) == 15.0
