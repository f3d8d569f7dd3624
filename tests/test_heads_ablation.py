import pytest
import torch

from interp.interventions.ablation import HookCounter, ablated, ablation_hooks, compute_head_means, random_heads
from interp.measure.evaluate import task_prompts
from interp.experiments import AblationConfig, ablation_conditions
from interp.core.heads import Head, parse_heads
from interp.prompts import PromptConfig, encode_prompts
from interp.measure.head_scores import (HeadScores, detect_induction_batched, repeated_random_tokens, score_heads, spearman,
                            task_attention_scores, token_pool)
from interp.interventions.sweep import head_sweep, naive_head_sweep

N = 8  # half length of the probe sequences in these tests


def forced_pattern_hook(layer, head, offset):
    """Make one head attend entirely to ``q - offset`` (or to itself where that does not exist)."""

    def hook(pattern, hook):
        seq = pattern.shape[-1]
        forced = torch.zeros(seq, seq)
        for q in range(seq):
            forced[q, q - offset if q - offset >= 0 else q] = 1.0
        pattern = pattern.clone()
        pattern[:, head] = forced
        return pattern

    return f"blocks.{layer}.attn.hook_pattern", hook


@pytest.mark.parametrize("score,offset", [("induction", N - 1), ("anti_induction", N + 1), ("previous_token", 1)])
def test_scores_find_a_head_forced_to_the_pattern(tiny_llama, score, offset):
    tokens = repeated_random_tokens(token_pool(tiny_llama.tokenizer), 6, N, seed=0)
    with tiny_llama.hooks(fwd_hooks=[forced_pattern_hook(1, 2, offset)]):
        scores = score_heads(tiny_llama, tokens, half_length=N, batch_size=4, progress=False)
    assert scores[score][1, 2].item() == pytest.approx(1.0)
    assert scores.top_heads(score, 1) == [Head(1, 2)]
    others = scores[score].clone()
    others[1, 2] = 0
    assert others.max() < 0.9


def test_probe_sequences_repeat_without_inner_duplicates(tiny_llama):
    tokens = repeated_random_tokens(token_pool(tiny_llama.tokenizer), 5, N, seed=1, bos_id=0)
    assert tokens.shape == (5, 2 * N + 1) and (tokens[:, 0] == 0).all()
    assert torch.equal(tokens[:, 1 : N + 1], tokens[:, N + 1 :])
    assert all(len(set(row[1 : N + 1].tolist())) == N for row in tokens)
    special = set(tiny_llama.tokenizer.all_special_ids)
    assert not special & set(tokens[:, 1:].flatten().tolist())


def test_score_table_ranks_and_roundtrip():
    scores = HeadScores({"induction": torch.tensor([[0.1, 0.9], [0.5, 0.2]]),
                         "anti_induction": torch.zeros(2, 2), "previous_token": torch.zeros(2, 2)})
    assert scores.top_heads("induction", 2) == [Head(0, 1), Head(1, 0)]
    rows = scores.rows()
    assert [r["induction_rank"] for r in rows] == [4, 1, 2, 3]
    assert torch.equal(HeadScores.from_rows(rows)["induction"], scores["induction"])
    with pytest.raises(ValueError, match="k=9"):
        scores.top_heads("induction", 9)


def test_task_attention_scores_a_forced_head(tiny_llama):
    """A head forced to attend from every position to the answer source scores 1."""
    prompts = task_prompts(tiny_llama, "UR", 8, 3, prompt_config=PromptConfig(n_shots=1))
    encoded = encode_prompts(tiny_llama.tokenizer, prompts, True)
    from interp.measure.head_scores import answer_source_positions

    pairs = [dict(answer_source_positions(tiny_llama.tokenizer, p, e)) for p, e in zip(prompts, encoded)]
    for p, e, pos in zip(prompts, encoded, pairs):
        (q, k), = pos.items()
        assert e.ids[k] == e.answer_ids[0] and q == e.answer_start - 1

    def hook(pattern, hook):
        pattern = pattern.clone()
        for row, pos in enumerate(pairs[: pattern.shape[0]]):
            (q, k), = pos.items()
            pattern[row, 3, q] = 0
            pattern[row, 3, q, k] = 1
        return pattern

    with tiny_llama.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", hook)]):
        scores = task_attention_scores(tiny_llama, prompts, encoded, batch_size=3, progress=False)
    assert scores[0, 3].item() == pytest.approx(1.0)
    assert scores[1].max() < 0.9


@pytest.fixture(scope="module")
def reference(tiny_llama):
    prompts = task_prompts(tiny_llama, "UF", 6, 6, prompt_config=PromptConfig(n_shots=1))
    return encode_prompts(tiny_llama.tokenizer, prompts, True)


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_ablation_sets_exactly_the_chosen_heads(tiny_llama, reference, kind):
    means = compute_head_means(tiny_llama, reference, progress=False)
    tokens = torch.tensor([reference[0].ids])
    _, clean = tiny_llama.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_z"))
    clean_logits = tiny_llama(tokens)
    counter = HookCounter()
    with ablated(tiny_llama, [(0, 1), (1, 3)], kind, means, counter):
        logits, cache = tiny_llama.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_z"))
    assert counter.calls == {"blocks.0.attn.hook_z": 1, "blocks.1.attn.hook_z": 1}  # every hook fired
    z0 = cache["blocks.0.attn.hook_z"][0]
    expected = torch.zeros_like(z0[:, 1]) if kind == "zero" else means.overall[0][1].expand_as(z0[:, 1])
    assert torch.allclose(z0[:, 1], expected)
    assert torch.equal(z0[:, 0], clean["blocks.0.attn.hook_z"][0][:, 0])  # untouched head in layer 0
    assert not torch.allclose(logits, clean_logits)  # and the output changed


def test_mean_is_over_real_tokens(tiny_llama, reference):
    means = compute_head_means(tiny_llama, reference[:2], progress=False)
    _, cache = tiny_llama.run_with_cache(torch.tensor([reference[0].ids]), names_filter=lambda n: n.endswith("hook_z"))
    _, cache1 = tiny_llama.run_with_cache(torch.tensor([reference[1].ids]), names_filter=lambda n: n.endswith("hook_z"))
    both = torch.cat([cache["blocks.1.attn.hook_z"][0], cache1["blocks.1.attn.hook_z"][0]])
    assert torch.allclose(means.overall[1], both.mean(0), atol=1e-5)
    per_pos = compute_head_means(tiny_llama, reference[:2], per_position=True, progress=False)
    assert per_pos.for_layer(1, 500).shape == (500, tiny_llama.cfg.n_heads, tiny_llama.cfg.d_head)


def test_bad_heads_get_clear_errors(tiny_llama):
    with pytest.raises(ValueError, match="out of range"):
        ablation_hooks(tiny_llama, [(2, 0)], "zero")
    with pytest.raises(ValueError, match="mean ablation needs means"):
        ablation_hooks(tiny_llama, [(0, 0)], "mean")
    with pytest.raises(ValueError, match="not an ablation"):
        ablation_hooks(tiny_llama, [(0, 0)], "resample")
    with pytest.raises(ValueError, match="LAYER.HEAD"):
        parse_heads("18-6", 30, 9)


def test_random_control_avoids_scored_heads():
    chosen = random_heads(4, 4, 5, seed=0, exclude=[(0, 0), (1, 1)])
    assert len(set(chosen)) == 5 and Head(0, 0) not in chosen
    assert chosen == random_heads(4, 4, 5, seed=0, exclude=[(0, 0), (1, 1)])
    scores = HeadScores({"induction": torch.arange(16.).view(4, 4), "anti_induction": -torch.arange(16.).view(4, 4),
                         "previous_token": torch.zeros(4, 4)})
    conditions = ablation_conditions(scores, AblationConfig(k=2, random_seeds=(0, 1)))
    assert [c[0] for c in conditions] == ["induction", "anti_induction", "random", "random"]
    assert conditions[0][2] == [Head(3, 3), Head(3, 2)] and conditions[1][2] == [Head(0, 0), Head(0, 1)]


@pytest.mark.parametrize("kind,heads_per_pass", [("zero", 1), ("mean", 1), ("zero", 2), ("mean", 3)])
def test_fast_sweep_equals_naive_loop(tiny_llama, reference, kind, heads_per_pass):
    means = compute_head_means(tiny_llama, reference, progress=False) if kind == "mean" else None
    heads = [(0, 0), (0, 3), (1, 1), (1, 2)]
    fast = head_sweep(tiny_llama, reference, heads, kind, means, batch_size=4, progress=False,
                      heads_per_pass=heads_per_pass)
    slow = naive_head_sweep(tiny_llama, reference, heads, kind, means, batch_size=4, progress=False)
    assert torch.equal(fast.clean.correct, slow.clean.correct)
    for a, b in zip(fast.ablated, slow.ablated):
        assert torch.equal(a.correct, b.correct)
        assert torch.allclose(a.mean_logprob, b.mean_logprob, atol=1e-5)
    assert any(not torch.allclose(a.mean_logprob, fast.clean.mean_logprob) for a in fast.ablated)
    # the pass-through swap is undone: a plain forward still works afterwards
    assert tiny_llama(torch.tensor([reference[0].ids])).shape[-1] == len(tiny_llama.tokenizer)


def test_fast_sweep_gpt2(tiny_gpt2):
    prompts = task_prompts(tiny_gpt2, "UB", 6, 4, prompt_config=PromptConfig(n_shots=1))
    encoded = encode_prompts(tiny_gpt2.tokenizer, prompts, True)
    fast = head_sweep(tiny_gpt2, encoded, [(0, 1), (1, 0)], progress=False)
    slow = naive_head_sweep(tiny_gpt2, encoded, [(0, 1), (1, 0)], progress=False)
    for a, b in zip(fast.ablated, slow.ablated):
        assert torch.allclose(a.mean_logprob, b.mean_logprob, atol=1e-5)


@pytest.mark.embedded
def test_embedded_induction_heads_and_detect_head_agreement(embedded):
    """L18H6 tops the induction table, and TransformerLens's detect_head ranks heads the same way."""
    from transformer_lens.head_detector import detect_head

    from interp.data.vocab import word_vocabulary

    tokenizer = embedded.tokenizer
    words = word_vocabulary(tokenizer, 200)
    pool = torch.tensor([tokenizer.encode(" " + w, add_special_tokens=False)[0] for w in words])
    tokens = repeated_random_tokens(pool, 4, 25, seed=0)
    texts = [tokenizer.decode(row) for row in tokens]
    assert all(tokenizer.encode(t, add_special_tokens=False) == row.tolist() for t, row in zip(texts, tokens))
    ours = score_heads(embedded, tokens, half_length=25, progress=False)
    assert ours.top_heads("induction", 3)[0] == Head(18, 6) and ours["induction"][18, 6] > 0.8
    theirs = detect_head(embedded, texts, "induction_head")
    assert torch.allclose(detect_induction_batched(embedded, tokens), theirs.float(), atol=1e-4)
    assert spearman(ours["induction"], theirs) > 0.9
