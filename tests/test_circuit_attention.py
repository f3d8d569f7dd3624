"""Attention-level edges (interp.interventions.circuits.attention): the planted edge is the top row, the
exact instrument reproduces the paper's edge patching (published tables and a live run, GQA included), and
the first-order scores are the linearisation of the exact effects."""

import sys
from pathlib import Path

import pytest
import torch

from interp.core.tables import read_csv
from interp.experiments.edge_study import EdgeStudyConfig, edge_study
from interp.interventions.circuits.attention import (AttentionEdgeSet, attention_edge_scores, attention_exact_scores,
                                                     entry_role_pairs, role_edges, role_scores)
from interp.interventions.circuits.task import copying_task
from interp.interventions.edges import attention_layout
from interp.interventions.edges.patching import EdgePatch, Edges, edge_patch_hooks
from interp.models import bridge_from_hf, load_model
from interp.models.tiny import TinyModelConfig, tiny_hf_model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))


@pytest.fixture(scope="module")
def gqa():
    """Tiny Llama with 4 query heads on 2 key/value heads, attention weights scaled up so patches move the logits."""
    hf, tokenizer = tiny_hf_model("tiny-llama", TinyModelConfig(positional="rope", n_key_value_heads=2))
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "self_attn" in name:
                param.mul_(3.0)
    return bridge_from_hf(hf, tokenizer, "tiny-gqa", torch.device("cpu"))


def _hypothesis(edges, name):
    return next(e for e in edges if e.hypothesis == name)


@pytest.mark.parametrize("name,task,head,kind,key_role", [("planted-ub", "UB", "a1.1", "value", "o"),
                                                          ("planted-uf", "UF", "a1.0", "key", "o+1")])
def test_planted_edge_is_the_top_attention_row(name, task, head, kind, key_role):
    """With the paper's counterfactual the planted head's edge (UB: V-composition at o, UF: K-composition at
    o+1) is the top per-head row, and no other head's row moves the metric."""
    model = load_model(name, device="cpu")
    copying = copying_task(model.tokenizer, task, 3, 2)
    layout = attention_layout(model)
    edges = [e for e in role_edges(copying, layout) if e.head >= 0]
    exact = attention_exact_scores(model, copying, [e.edge_set for e in edges], counterfactual="previous_token_cut",
                                   layout=layout, sets_per_pass=32)
    top = edges[int(exact.abs().argmax())]
    assert (top.label, top.kind, top.query_role, top.key_role) == (head, kind, "c", key_role)
    assert exact.min() < -5
    assert exact[torch.tensor([e.label != head for e in edges])].abs().max() < 0.5


@pytest.mark.parametrize("name,task,hypothesis", [("planted-ub", "UB", "anti_induction"), ("planted-uf", "UF", "induction"),
                                                  ("planted-ub", "UB", "induction")])
def test_hypothesis_rows_reproduce_the_published_edge_patching_table(name, task, hypothesis):
    """results/edge_patching_<model>_single-shot: 32 prompts of length 3, the paper's counterfactual."""
    model = load_model(name, device="cpu")
    published = next(r for r in read_csv(ROOT / "results" / f"edge_patching_{name}_single-shot.csv")
                     if r["task"] == task and int(r["length"]) == 3 and r["condition"] == hypothesis)
    copying = copying_task(model.tokenizer, task, 3, int(published["n_examples"]), metric_kind="logprob")
    layout = attention_layout(model)
    edge_set = _hypothesis(role_edges(copying, layout), hypothesis).edge_set
    delta = attention_exact_scores(model, copying, [edge_set], counterfactual="previous_token_cut", layout=layout)
    with torch.no_grad():
        clean = float(copying.metric(model(copying.clean)).mean())
    # the published tables carry float drift of up to 1e-3 from the versions they were computed with; the live
    # study is matched to 1e-5 below
    assert clean + float(delta[0]) == pytest.approx(float(published["mean_logprob"]), abs=1e-3)
    assert abs(float(delta[0])) > 1 or hypothesis == "induction"  # the planted edge; UB has no induction route


def test_hypothesis_entries_are_the_paper_edges():
    model = load_model("planted-ub", device="cpu")
    for task in ("UF", "UB"):
        copying = copying_task(model.tokenizer, task, 5, 2)
        pairs = entry_role_pairs(copying)
        for name, role in (("induction", "o+1"), ("anti_induction", "o")):
            paper = copying.prompts.edges(name)  # its last query predicts the end marker, scored by neither
            query, source = pairs[("c", role)]
            assert query.tolist() == paper.query[0, :-1].tolist() and source.tolist() == paper.source[0, :-1].tolist()


def test_exact_instrument_equals_a_live_edge_study_on_a_gqa_model(gqa):
    """Key (with RoPE) and value patches, every layer and query head of a 4/2 GQA model, against edge_study."""
    rows, _ = edge_study(gqa, EdgeStudyConfig(tasks=("UF", "UB"), lengths=(4,), n=6, n_shots=1, prompt_format="single-shot",
                                              prepend_bos=False))
    layout = attention_layout(gqa)
    moved = 0.0
    for task in ("UF", "UB"):
        copying = copying_task(gqa.tokenizer, task, 4, 6, metric_kind="logprob")
        edges = role_edges(copying, layout)
        sets = [_hypothesis(edges, name).edge_set for name in ("induction", "anti_induction")]
        delta = attention_exact_scores(gqa, copying, sets, counterfactual="previous_token_cut", layout=layout, batch_size=4)
        with torch.no_grad():
            clean = float(copying.metric(gqa(copying.clean)).mean())
        study = {r.condition: r.mean_logprob for r in rows if r.task == task}
        assert clean == pytest.approx(study["none"], abs=5e-6)
        for name, value in zip(("induction", "anti_induction"), delta.tolist()):
            assert clean + value == pytest.approx(study[name], abs=5e-6)
        moved = max(moved, delta.abs().max().item())
    assert moved > 1e-4  # the patches move the metric far beyond the tolerance


def test_sets_sharing_a_pass_equal_sets_run_alone(gqa):
    copying = copying_task(gqa.tokenizer, "UB", 4, 3)
    layout = attention_layout(gqa)
    sets = [e.edge_set for e in role_edges(copying, layout) if e.head >= 0 and e.query_role == "c"][::9]
    together = attention_exact_scores(gqa, copying, sets, layout=layout, sets_per_pass=len(sets))
    alone = torch.cat([attention_exact_scores(gqa, copying, [s], layout=layout) for s in sets])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-4)
    assert len(sets) > 4 and together.abs().max() > 1e-3


def test_patch_acts_only_in_its_batch_rows(gqa):
    tokens = torch.randint(0, gqa.cfg.d_vocab, (4, 8), generator=torch.Generator().manual_seed(0))
    edges = Edges.shared([5, 6, 7], [1, 2, 3], 2)  # for the two acting rows
    rows = torch.tensor([False, True, False, True])
    hooks = edge_patch_hooks(gqa, [EdgePatch("value", edges, None, batch_rows=rows),
                                   EdgePatch("key", edges, {l: torch.zeros(2, 3, 2, 16) for l in (0, 1)}, batch_rows=rows)])
    with torch.no_grad():
        clean, patched = gqa(tokens), gqa.run_with_hooks(tokens, fwd_hooks=hooks)
    assert torch.equal(clean[~rows], patched[~rows]) and not torch.allclose(clean[rows], patched[rows], atol=1e-3)


@pytest.mark.parametrize("counterfactual", ["corrupt", "zero"])
def test_first_order_scores_track_exact_effects(gqa, counterfactual):
    """Per-head role rows on the GQA model: EAP is the linearisation of the same patch (sign and indexing)."""
    copying = copying_task(gqa.tokenizer, "UF", 4, 4)
    layout = attention_layout(gqa)
    edges = [e for e in role_edges(copying, layout) if e.head >= 0]
    eap = role_scores(attention_edge_scores(gqa, copying, "eap", counterfactual=counterfactual, layout=layout), edges)
    exact = attention_exact_scores(gqa, copying, [e.edge_set for e in edges], counterfactual=counterfactual, layout=layout,
                                   sets_per_pass=64)
    for kind in ("key", "value"):
        chosen = torch.tensor([e.kind == kind for e in edges])
        first, patched = eap[chosen], exact[chosen]
        pearson = float(torch.corrcoef(torch.stack([first, patched]))[0, 1])
        slope = float((first * patched).sum() / (patched * patched).sum())
        assert pearson > 0.95 and 0.8 < slope < 1.25, (kind, pearson, slope)


def test_eap_ig_with_one_step_is_eap(gqa):
    copying = copying_task(gqa.tokenizer, "UB", 3, 2)
    eap = attention_edge_scores(gqa, copying, "eap")
    torch.testing.assert_close(attention_edge_scores(gqa, copying, "eap-ig", steps=1), eap)
    assert eap.abs().max() > 0 and not eap[..., ~torch.tril(torch.ones(eap.shape[-1], eap.shape[-1], dtype=torch.bool))].any()


def test_edge_sets_are_checked():
    with pytest.raises(ValueError, match="kind"):
        AttentionEdgeSet("pattern", torch.tensor([3]), torch.tensor([1]))
    with pytest.raises(ValueError, match="eap-ig"):
        model = load_model("planted-ub", device="cpu")
        attention_edge_scores(model, copying_task(model.tokenizer, "UB", 3, 1), "eap-ig", counterfactual="zero")


def test_zero_ablation_of_a_head_is_cutting_every_value_entry_it_reads(gqa):
    """Head ablation as a special case of the instrument: z_t = sum_s A[t, s] v_s, so cutting every value
    entry of a head zeroes its output (mean ablation is not an entry patch and stays in interventions.ablation)."""
    from interp.interventions.ablation import ablation_hooks
    from interp.interventions.edges.patching import cut

    tokens = torch.randint(0, gqa.cfg.d_vocab, (2, 9), generator=torch.Generator().manual_seed(1))
    query, source = torch.tril(torch.ones(9, 9, dtype=torch.bool)).nonzero(as_tuple=True)
    with torch.no_grad():
        ablated = gqa.run_with_hooks(tokens, fwd_hooks=ablation_hooks(gqa, [(1, 2)]))
        entries = gqa.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(gqa, [cut(Edges.shared(query, source, 2), [1], [2])]))
        clean = gqa(tokens)
    torch.testing.assert_close(entries, ablated, atol=1e-5, rtol=1e-5)
    assert (ablated - clean).abs().max() > 1e-3


def test_mean_counterfactual_of_one_prompt_is_that_prompt(gqa):
    copying = copying_task(gqa.tokenizer, "UB", 4, 1)
    sets = [e.edge_set for e in role_edges(copying, attention_layout(gqa)) if e.query_role == "c" and e.key_role in ("o", "o+1")]
    mean = attention_exact_scores(gqa, copying, sets, counterfactual="mean")
    torch.testing.assert_close(mean, attention_exact_scores(gqa, copying, sets, counterfactual="corrupt"))
    assert mean.abs().max() > 1e-4
