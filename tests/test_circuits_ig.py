"""Integrated-gradient edge scores: EAP-IG over the inputs and over each writer layer's outputs
(``eap-ig-act``), checked against EAP, against each other and against the integral they approximate."""

import pytest
import torch

from interp.interventions.circuits import circuit_graph, circuit_runner, copying_task, edge_scores, exact_effects
from interp.interventions.circuits.graph import Component
from interp.interventions.circuits.role_scores import residual_scores
from interp.interventions.circuits.scores import PassCount
from interp.models import load_model


@pytest.fixture(scope="module")
def noisy_ub():
    model = load_model("planted-ub@0.7", device="cpu")  # planted plus noise: every edge carries something
    return model, copying_task(model.tokenizer, "UB", 3, 3, seed=5), circuit_graph(model)


@pytest.mark.parametrize("counterfactual", ["corrupt", "zero", "mean"])
def test_activation_ig_with_one_step_is_eap(noisy_ub, counterfactual):
    model, task, graph = noisy_ub
    eap = edge_scores(model, task, "eap", counterfactual=counterfactual, graph=graph)
    passes = PassCount()
    act = edge_scores(model, task, "eap-ig-act", steps=1, counterfactual=counterfactual, graph=graph, passes=passes)
    torch.testing.assert_close(act, eap, atol=1e-5, rtol=1e-4)
    assert eap.abs().max() > 0.1 and passes.backward == 1  # the clean run's gradients serve every layer


def test_activation_ig_on_the_embeddings_is_input_ig(noisy_ub):
    """Moving the token embeddings alone is the inputs variant's path: their edges score the same;
    the other writers' edges differ (their own layer moves, not the inputs)."""
    model, task, graph = noisy_ub
    inputs = edge_scores(model, task, "eap-ig", steps=3, graph=graph)
    act = edge_scores(model, task, "eap-ig-act", steps=3, graph=graph)
    embed = graph.writer_index(Component("embed"))
    torch.testing.assert_close(act[:, :, embed], inputs[:, :, embed], atol=1e-5, rtol=1e-4)
    assert inputs[:, :, embed].abs().max() > 0.1
    assert (act[:, :, embed + 1:] - inputs[:, :, embed + 1:]).abs().max() > 1e-2


# One middle writer layer: each case costs 64 integration steps over every layer (25 s on 2 cores).
@pytest.mark.parametrize("hook_name", ["blocks.0.attn.hook_result"])
def test_activation_ig_sums_to_the_effect_of_patching_its_layer(noisy_ub, hook_name):
    """Completeness: a writer layer's edge scores add up to the integral of its path, the metric with
    that layer's outputs patched to the counterfactual's for every reader (exact: every residual edge out
    of the layer removed at once from the whole model); the right Riemann sum converges to it as steps
    grow, and one step (EAP) misses it."""
    model, task, graph = noisy_ub
    hook = next(h for h in graph.writer_hooks if h.name == hook_name)
    runner = circuit_runner(model, task, grain="components")
    writer = runner.graph.residual[:, 1]
    out_of_layer = ((writer >= hook.start) & (writer < hook.stop)).nonzero()[:, 0]
    assert len(out_of_layer) == int(graph.valid[:, hook.start:hook.stop].sum())  # every reader downstream
    effect = float(runner.measure([out_of_layer], kept_by_default=True).metric[0]) - runner.clean_metric
    errors = {}
    for steps in (1, 64):
        scores = edge_scores(model, task, "eap-ig-act", steps=steps, graph=graph)
        errors[steps] = abs(float(scores[:, :, hook.start:hook.stop].sum()) - effect)
    assert abs(effect) > 0.5
    assert errors[64] < 0.03 * abs(effect) + 1e-3
    assert errors[1] > 3 * errors[64]


def test_activation_ig_tracks_exact_single_edges_on_gqa_model():
    """tiny-llama reads keys and values per key/value head: the activation path agrees with exact
    component-level effects at least as well as EAP does."""
    model = load_model("tiny-llama", device="cpu")
    task = copying_task(model.tokenizer, "UF", 3, 4, seed=2)
    runner = circuit_runner(model, task, grain="components")
    exact = exact_effects(runner, torch.arange(runner.graph.n_residual))

    def pearson(method, steps):
        s = residual_scores(edge_scores(model, task, method, steps=steps, graph=runner.graph.components), runner.graph)
        return float(torch.corrcoef(torch.stack([s.double(), exact.double()]))[0, 1])

    assert exact.abs().max() > 0
    assert pearson("eap-ig-act", 8) >= pearson("eap", 1) - 0.01


def test_check_method_allows_ablation_counterfactuals_for_activation_ig():
    from interp.interventions.circuits.scores import check_method

    check_method("eap-ig-act", "zero", 4)  # interpolates activations, not inputs: any counterfactual
    with pytest.raises(ValueError, match="steps=0"):
        check_method("eap-ig-act", "corrupt", 0)


@pytest.mark.parametrize("name", ["tiny-llama", pytest.param("gemma-3-270m", marks=pytest.mark.gemma_model)])
def test_token_embeddings_replaced_at_hook_embed_are_the_whole_input(name):
    """The inputs variant interpolates at ``hook_embed``: with the corrupt prompt's embeddings put
    there, a clean run is the corrupt run (Gemma scales its embeddings by sqrt(d_model): the hook
    must sit where nothing but linear maps follow), and EAP-IG runs on the key/value readers of a
    multi-query model."""
    from interp.interventions.circuits.scores import _embeddings
    from interp.models.paper.installer import GEMMA_3_270M, installed_folder

    if name.startswith("gemma") and installed_folder(GEMMA_3_270M) is None:
        pytest.skip("Gemma-3-270M is not installed (make gemma)")
    model = load_model(name, device="cpu")
    task = copying_task(model.tokenizer, "UF", 3, 2, fmt="few-shot", n_shots=2, prepend_bos=True)
    corrupt_embed = _embeddings(model, task.corrupt)
    with torch.no_grad():
        swapped = model.run_with_hooks(task.clean, fwd_hooks=[("hook_embed", lambda x, hook: corrupt_embed)])
        corrupt = model(task.corrupt)
    torch.testing.assert_close(task.metric(swapped), task.metric(corrupt), atol=1e-3, rtol=1e-3)
    assert (task.metric(swapped) - task.metric(model(task.clean).detach())).abs().max() > 1e-2
    graph = circuit_graph(model)
    scores = edge_scores(model, task, "eap-ig", steps=2, graph=graph)
    kv = torch.tensor([r.kind in ("k", "v") for r in graph.readers])
    assert scores[:, kv].abs().sum() > 0 and not scores[:, ~graph.valid].any()
