"""AtP*'s QK fix (interp.interventions.qk_fix): exact where the metric is linear in the downstream patterns, the
first-order screen unchanged, and sign and size right where a softmax saturates."""

import pytest
import torch

from interp.interventions.ablation import ablation_hooks
from interp.interventions.attribution import atp_star_attributions, attribution_sweep, head_attributions
from interp.measure.batching import right_pad
from interp.measure.evaluate import task_prompts
from interp.prompts import PromptConfig, encode_prompts
from interp.interventions.qk_fix import pattern_spread, select_rows

SHARPEN = 20.0  # layer 1's attention input scaled up this much: scores x 400, patterns saturate


@pytest.fixture(scope="module")
def prompts(tiny_llama):
    return encode_prompts(tiny_llama.tokenizer, task_prompts(tiny_llama, "UF", 6, 4, prompt_config=PromptConfig(n_shots=1)), True)


def answer_logit(batch):
    """Mean logit of the answer tokens (linear in the logits)."""
    def metric(logits):
        return torch.stack([logits[row, p.answer_start - 1 : p.answer_start - 1 + len(p.answer_ids)]
                            .gather(-1, torch.tensor(p.answer_ids)[:, None]).mean() for row, p in enumerate(batch)])
    return metric


def pattern_linear_hooks(model, tokens):
    """Hooks under which the answer logit is linear in every head's output except through layer
    1's attention patterns: MLP outputs, layer 1's values and the normalisation scales of layer 1
    and the unembedding pinned to their clean values; layer 1's scale divided by ``SHARPEN``."""
    names = {"blocks.0.hook_mlp_out", "blocks.1.hook_mlp_out", "blocks.1.attn.hook_v", "blocks.1.ln1.hook_scale",
             "ln_final.hook_scale"}
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    values = {name: cache[name].detach() for name in names}
    values["blocks.1.ln1.hook_scale"] = values["blocks.1.ln1.hook_scale"] / SHARPEN
    return [(name, lambda x, hook, value=value: value) for name, value in values.items()]


@pytest.mark.filterwarnings("ignore:A forward hook edited hook_scale")
@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_qk_fix_is_exact_where_only_patterns_are_nonlinear(tiny_llama, prompts, kind):
    """With everything but layer 1's patterns linear, AtP* is the exact single-head ablation effect
    of every head; first order misses the saturated softmax."""
    from interp.interventions.ablation import compute_head_means

    means = compute_head_means(tiny_llama, prompts, progress=False) if kind == "mean" else None
    tokens, _ = right_pad([p.ids for p in prompts], tiny_llama.tokenizer.pad_token_id)
    hooks = pattern_linear_hooks(tiny_llama, tokens)
    metric = answer_logit(prompts)
    _, first = head_attributions(tiny_llama, tokens, metric, kind, means, fwd_hooks=hooks)
    _, star = atp_star_attributions(tiny_llama, tokens, metric, kind, means, fwd_hooks=hooks, qk_rows=None)
    with torch.no_grad():
        with tiny_llama.hooks(fwd_hooks=hooks):
            clean_logits, cache = tiny_llama.run_with_cache(tokens, names_filter=lambda n: n == "blocks.1.attn.hook_pattern")
        clean = metric(clean_logits)
        exact = torch.stack([torch.stack([metric(tiny_llama.run_with_hooks(tokens, fwd_hooks=hooks + ablation_hooks(
            tiny_llama, [(layer, head)], kind, means))) - clean for head in range(tiny_llama.cfg.n_heads)], -1)
            for layer in range(tiny_llama.cfg.n_layers)], 1)
    assert cache["blocks.1.attn.hook_pattern"].amax(-1).median() > 0.5  # the softmax is far from linear
    assert torch.allclose(star, exact, atol=2e-5, rtol=0), (star - exact).abs().max()
    assert (first - exact).abs().max() > 0.2 * exact.abs().max()  # first order is wrong here


def test_first_order_screen_is_plain_attribution_patching(tiny_llama, prompts):
    """``screen="first-order"`` is one gradient, as before AtP*; AtP* adds a correction that is
    small where the model is near linear (a random tiny model)."""
    first = attribution_sweep(tiny_llama, prompts, "zero", batch_size=4, progress=False, screen="first-order")
    tokens, _ = right_pad([p.ids for p in prompts], tiny_llama.tokenizer.pad_token_id)
    from interp.interventions.attribution import answer_logprob
    from interp.measure.teacher_forcing import AnswerPositions, select_positions_hook

    where = AnswerPositions.of(prompts)
    _, direct = head_attributions(tiny_llama, tokens, lambda logits: answer_logprob(logits, where), "zero",
                                  fwd_hooks=[select_positions_hook(where.positions)])
    assert torch.allclose(first.delta, direct, atol=1e-6) and first.method == "attribution patching"
    star = attribution_sweep(tiny_llama, prompts, "zero", batch_size=4, progress=False)
    assert star.method == "AtP* (QK fix)"
    gap = (star.delta - first.delta).abs().max()
    assert 0 < gap < 0.1 * first.delta.abs().max()


def test_rows_are_chosen_by_gradient_spread():
    grad = torch.zeros(1, 1, 3, 3)
    grad[0, 0, 2] = torch.tensor([0.0, 5.0, -1.0])  # spread 6 over the three visible keys
    grad[0, 0, 1] = torch.tensor([0.0, 2.0, 99.0])  # the 99 is a masked (future) key: spread 2
    assert pattern_spread(grad)[0, 0].tolist() == [0.0, 2.0, 6.0]
    rows = select_rows([torch.zeros_like(grad), grad], rows_per_prompt=1)
    assert (rows.layer.tolist(), rows.query.tolist()) == ([1], [2])
    assert select_rows([torch.zeros_like(grad), grad], rows_per_prompt=None).query.tolist() == [1, 2]


def test_bad_screen_arguments_get_clear_errors(tiny_llama, prompts):
    with pytest.raises(ValueError, match="screen='exact'"):
        attribution_sweep(tiny_llama, prompts, "zero", screen="exact", progress=False)
    with pytest.raises(ValueError, match="integrated gradients need screen='first-order'"):
        attribution_sweep(tiny_llama, prompts, "zero", steps=2, progress=False)
    with pytest.raises(ValueError, match="qk_rows=0"):
        attribution_sweep(tiny_llama, prompts, "zero", qk_rows=0, progress=False)


@pytest.mark.parametrize("kind", ["zero", "mean"])
@pytest.mark.parametrize("name,task", [("planted-uf", "UF"), ("planted-ub", "UB")])
def test_atp_star_ranks_the_planted_heads_first(name, task, kind):
    """On the planted circuits (interp.models.planted) the exact sweep's only harmful heads are the
    previous-token head and the head that reads it (K-composition for UF, V-composition for UB).
    AtP* ranks both first with the right sign; first order gives the previous-token head of the
    K-composition the wrong sign (its effect runs through the induction head's saturated
    softmax). The planted answers are near certain, so the final log-softmax saturates too and
    both screens' estimates are tiny (~1e-12): the ranking is what they get right."""
    from interp.interventions.ablation import compute_head_means
    from interp.core.heads import Head
    from interp.models import load_model
    from interp.models.planted import BACKWARD_HEAD, INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD
    from interp.interventions.sweep import head_sweep

    model = load_model(name, device="cpu")
    config = PromptConfig(n_shots=0)
    encoded = encode_prompts(model.tokenizer, task_prompts(model, task, 10, 8, prompt_config=config), prepend_bos=False)
    means = None
    if kind == "mean":
        reference = task_prompts(model, task, 10, 8, seed=10_000, prompt_config=config)
        means = compute_head_means(model, encode_prompts(model.tokenizer, reference, prepend_bos=False), progress=False)
    needed = {PREVIOUS_TOKEN_HEAD, INDUCTION_HEAD if task == "UF" else BACKWARD_HEAD}
    exact = head_sweep(model, encoded, kind=kind, means=means, progress=False)
    assert {h for h, d in zip(exact.heads, exact.delta_logprobs()) if d < -1} == needed
    star = attribution_sweep(model, encoded, kind, means, progress=False)
    assert set(star.top_heads(len(needed))) == needed
    assert all(star.delta_logprob()[head] < 0 for head in needed)
    first = attribution_sweep(model, encoded, kind, means, progress=False, screen="first-order")
    if task == "UF":
        assert first.delta_logprob()[Head(*PREVIOUS_TOKEN_HEAD)] > 0  # the failure AtP* fixes
        assert set(first.top_heads(len(needed))) != needed
