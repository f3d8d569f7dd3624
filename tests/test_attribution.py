import pytest
import torch
from scipy.stats import spearmanr

from interp.interventions.ablation import ablation_hooks, compute_head_means
from interp.interventions.attribution import agreement, answer_logprob, attribution_sweep, head_attributions
from interp.measure.batching import in_input_order, padded_batches, right_pad
from interp.measure.evaluate import task_prompts
from interp.core.heads import Head
from interp.prompts import PromptConfig, encode_prompts
from interp.interventions.sweep import head_sweep
from interp.interventions.replay import run_clean
from interp.measure.teacher_forcing import (AnswerPositions, AnswerScores, answer_slice, score_answer, select_positions_hook,
                                            teacher_forced_scores)


@pytest.fixture(scope="module")
def uf_prompts(tiny_llama):
    prompts = task_prompts(tiny_llama, "UF", 6, 6, prompt_config=PromptConfig(n_shots=1))
    return encode_prompts(tiny_llama.tokenizer, prompts, True)


@pytest.fixture(scope="module")
def mixed_prompts(tiny_llama):
    """Prompts of different lengths, so batches carry padding."""
    prompts = [p for task, length in (("UF", 5), ("UR", 8), ("UB", 7))
               for p in task_prompts(tiny_llama, task, length, 2, prompt_config=PromptConfig(n_shots=1))]
    return encode_prompts(tiny_llama.tokenizer, prompts, True)


@pytest.fixture(scope="module")
def means(tiny_llama, uf_prompts):
    return compute_head_means(tiny_llama, uf_prompts, progress=False)


def frozen_tail_hooks(model, tokens):
    """Hooks that pin the last block's MLP output and the final norm's scale to their clean
    values: the answer logits then depend on the last layer's ``hook_z`` linearly."""
    last = model.cfg.n_layers - 1
    names = {f"blocks.{last}.hook_mlp_out", "ln_final.hook_scale"}
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return [(name, lambda x, hook, value=cache[name].detach(): value) for name in names]


def answer_logit(batch):
    """Mean logit of the answer tokens (linear in the logits, unlike the log-prob)."""
    def metric(logits):
        return torch.stack([logits[row, p.answer_start - 1 : p.answer_start - 1 + len(p.answer_ids)]
                            .gather(-1, torch.tensor(p.answer_ids)[:, None]).mean() for row, p in enumerate(batch)])
    return metric


@pytest.mark.filterwarnings("ignore:A forward hook edited hook_scale")
@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_linear_case_is_exact(tiny_llama, uf_prompts, means, kind):
    """Where the metric is linear in a head's output, the estimate is the exact ablation effect."""
    tokens, _ = right_pad([p.ids for p in uf_prompts], tiny_llama.tokenizer.pad_token_id)
    frozen = frozen_tail_hooks(tiny_llama, tokens)
    metric = answer_logit(uf_prompts)
    logits, delta = head_attributions(tiny_llama, tokens, metric, kind, means, fwd_hooks=frozen)
    last = tiny_llama.cfg.n_layers - 1
    with torch.no_grad():
        clean = metric(tiny_llama.run_with_hooks(tokens, fwd_hooks=frozen))
        assert torch.allclose(clean, metric(logits), atol=1e-5)
        for head in range(tiny_llama.cfg.n_heads):
            hooks = frozen + ablation_hooks(tiny_llama, [(last, head)], kind, means)
            exact = metric(tiny_llama.run_with_hooks(tokens, fwd_hooks=hooks)) - clean
            assert torch.allclose(delta[:, last, head], exact, atol=1e-6, rtol=0), (head, delta[:, last, head], exact)
            assert exact.abs().max() > 1e-3  # the check has something to check


def scores_from_logits(logits, batch, keep_predictions=False):
    """The reference: each prompt's answer rows sliced out of logits at every position."""
    rows = [score_answer(logits[row, answer_slice(p)], p.answer_ids, p.end) for row, p in enumerate(batch)]
    return AnswerScores.from_rows(rows, keep_predictions)


def test_metric_is_the_sweeps_mean_logprob(tiny_llama, mixed_prompts):
    """Logits taken at the answer positions only (through the unembedding hook) are the full
    logits there, and give the exact sweep's per-prompt mean answer log-prob."""
    tokens, _ = right_pad([p.ids for p in mixed_prompts], tiny_llama.tokenizer.pad_token_id)
    where = AnswerPositions.of(mixed_prompts)
    with torch.no_grad():
        logits = tiny_llama(tokens)
        with tiny_llama.hooks(fwd_hooks=[select_positions_hook(where.positions)]):
            selected = tiny_llama(tokens)
    assert selected.shape[:2] == where.positions.shape
    gathered = logits.gather(1, where.positions[..., None].expand(-1, -1, logits.shape[-1]))
    assert torch.allclose(selected, gathered, atol=1e-5)
    assert torch.allclose(answer_logprob(selected, where), scores_from_logits(logits, mixed_prompts).mean_logprob, atol=1e-5)


def test_answer_position_logits_score_like_full_logits(tiny_llama, mixed_prompts):
    """teacher_forced_scores and the replay's clean run unembed the answer positions only; with
    padding, multi-token answers and an ablation hook they score every prompt as the full logits do."""
    hooks = ablation_hooks(tiny_llama, [(1, 0), (0, 1)], "zero")
    tokens, _ = right_pad([p.ids for p in mixed_prompts], tiny_llama.tokenizer.pad_token_id)
    with torch.no_grad():
        full = scores_from_logits(tiny_llama.run_with_hooks(tokens, fwd_hooks=hooks), mixed_prompts, keep_predictions=True)
    forced = teacher_forced_scores(tiny_llama, mixed_prompts, batch_size=4, fwd_hooks=hooks, progress=False,
                                   keep_predictions=True)
    reference = teacher_forced_scores(tiny_llama, mixed_prompts, batch_size=4, fwd_hooks=hooks, progress=False,
                                      keep_predictions=True, every_position=True)
    for scores in (forced, reference):
        assert scores.predictions == full.predictions
        assert torch.equal(scores.correct, full.correct)
        assert torch.allclose(scores.mean_logprob, full.mean_logprob, atol=1e-5)
    with torch.no_grad():
        plain = scores_from_logits(tiny_llama(tokens), mixed_prompts)
    batch = next(iter(padded_batches(mixed_prompts, len(mixed_prompts), tiny_llama.tokenizer.pad_token_id)))
    clean = AnswerScores.from_rows(in_input_order(len(mixed_prompts), [(batch.indices, run_clean(tiny_llama, batch, [1]).rows)]))
    assert torch.allclose(clean.mean_logprob, plain.mean_logprob, atol=1e-5)
    assert not torch.allclose(plain.mean_logprob, full.mean_logprob, atol=1e-3)  # the hook did something


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_sign_and_scale_follow_the_exact_sweep(tiny_llama, uf_prompts, means, kind):
    """On a small random model single-head ablations are small perturbations, where a first-order
    estimate should be close to the exact change: same ranking, same sign, about the same size."""
    estimate = attribution_sweep(tiny_llama, uf_prompts, kind, means, batch_size=3, progress=False)
    exact = head_sweep(tiny_llama, uf_prompts, None, kind, means, batch_size=3, progress=False)
    assert torch.allclose(estimate.clean.mean_logprob, exact.clean.mean_logprob, atol=1e-5)
    est = estimate.delta_logprob().flatten()
    truth = torch.tensor([r["delta_logprob"] for r in exact.rows("UF", 6)])
    assert spearmanr(est, truth).statistic > 0.9
    slope = (est @ truth) / (truth @ truth)  # least-squares scale of estimate against truth
    assert 0.7 < slope < 1.3, slope
    worst = int(truth.argmin())
    assert est[worst] < 0 and estimate.top_heads(1)[0] == exact.heads[worst]


def test_padding_and_batching_do_not_change_estimates(tiny_llama, mixed_prompts):
    one = attribution_sweep(tiny_llama, mixed_prompts, "zero", batch_size=1, progress=False)
    padded = attribution_sweep(tiny_llama, mixed_prompts, "zero", batch_size=4, progress=False)
    assert len({len(p.ids) for p in mixed_prompts[:4]}) > 1  # the batch of 4 really is padded
    assert torch.allclose(one.delta, padded.delta, atol=1e-5)
    assert one.delta.abs().max() > 1e-3


def test_gpt2_estimates_track_exact_sweep(tiny_gpt2):
    prompts = task_prompts(tiny_gpt2, "UB", 6, 4, prompt_config=PromptConfig(n_shots=1))
    encoded = encode_prompts(tiny_gpt2.tokenizer, prompts, True)
    estimate = attribution_sweep(tiny_gpt2, encoded, "zero", progress=False)
    exact = head_sweep(tiny_gpt2, encoded, progress=False)
    truth = torch.tensor([r["delta_logprob"] for r in exact.rows("UB", 6)])
    assert spearmanr(estimate.delta_logprob().flatten(), truth).statistic > 0.9


def test_rows_match_the_sweep_layout(tiny_llama, uf_prompts):
    result = attribution_sweep(tiny_llama, uf_prompts, "zero", progress=False)
    rows = result.rows("UF", 6, "tiny")
    assert len(rows) == tiny_llama.cfg.n_layers * tiny_llama.cfg.n_heads
    first = rows[0]
    assert (first["layer"], first["head"], first["model"]) == (0, 0, "tiny")
    assert first["delta_logprob"] == pytest.approx(result.delta_logprob()[0, 0].item())
    assert first["mean_logprob"] == pytest.approx(result.clean.mean_logprob.mean().item() + first["delta_logprob"])
    assert result.heads[5] == Head(5 // tiny_llama.cfg.n_heads, 5 % tiny_llama.cfg.n_heads)


def test_bad_arguments_get_clear_errors(tiny_llama, uf_prompts):
    with pytest.raises(ValueError, match="not an ablation"):
        attribution_sweep(tiny_llama, uf_prompts, "resample", progress=False)
    with pytest.raises(ValueError, match="mean ablation needs means"):
        attribution_sweep(tiny_llama, uf_prompts, "mean", progress=False)
    with pytest.raises(ValueError, match="must not be empty"):
        attribution_sweep(tiny_llama, [], "zero", progress=False)
    result = attribution_sweep(tiny_llama, uf_prompts[:1], "zero", progress=False)
    with pytest.raises(ValueError, match="k=99"):
        result.top_heads(99)


def test_agreement_counts_ranks_and_overlap():
    exact = torch.tensor([[-3.0, -2.0, 0.1], [0.0, -1.0, 0.2]])
    same = agreement(exact * 0.5, exact, k=2)
    assert same.spearman == pytest.approx(1.0) and same.overlap == 2
    assert same.top_exact == [Head(0, 0), Head(0, 1)]
    flipped = agreement(-exact, exact, k=2)
    assert flipped.spearman == pytest.approx(-1.0) and flipped.overlap == 0 and flipped.overlap_magnitude == 2
    with pytest.raises(ValueError, match="every head"):
        agreement(exact, torch.full_like(exact, float("nan")))


def test_sweep_table_marks_unswept_heads(tiny_llama, uf_prompts):
    swept = head_sweep(tiny_llama, uf_prompts, [(1, 2)], progress=False)
    table = swept.delta_logprob_table(tiny_llama.cfg.n_layers, tiny_llama.cfg.n_heads)
    assert torch.isnan(table).sum() == table.numel() - 1
    expected = (swept.ablated[0].mean_logprob.mean() - swept.clean.mean_logprob.mean()).item()
    assert table[1, 2].item() == pytest.approx(expected, abs=1e-6)
    assert swept.rows("UF", 6)[0]["delta_logprob"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_integrated_gradients_add_up_to_ablating_every_head(tiny_llama, uf_prompts, means, kind):
    """Completeness: along the path that moves every head towards its ablation at once, the
    per-head integrals sum to the effect of ablating all heads together."""
    all_heads = [(l, h) for l in range(tiny_llama.cfg.n_layers) for h in range(tiny_llama.cfg.n_heads)]
    estimate = attribution_sweep(tiny_llama, uf_prompts, kind, means, steps=12, progress=False, screen="first-order")
    with torch.no_grad():
        ablated = teacher_forced_scores(tiny_llama, uf_prompts, fwd_hooks=ablation_hooks(tiny_llama, all_heads, kind, means),
                                        progress=False)
    joint = ablated.mean_logprob - estimate.clean.mean_logprob
    total = estimate.delta.sum(dim=(1, 2))
    tolerance = 0.02 * joint.abs().max()
    assert joint.abs().max() > 0.01  # ablating every head changes something
    assert (total - joint).abs().max() < tolerance, (total, joint)
    first_order = attribution_sweep(tiny_llama, uf_prompts, kind, means, progress=False).delta.sum(dim=(1, 2))
    assert (first_order - joint).abs().max() > 5 * tolerance  # the test tells a path integral from one gradient
