"""Planted circuits (interp.models.planted): every instrument must find the heads put there by hand.

Heads: 0.0 previous-token; 0.1 task marker (planted-both); 1.0 induction (K-composition, carries
UF); 1.1 backward copier (V-composition, the paper's anti-induction *edge*, carries UB); 1.2
head-level anti-induction head (attends to the earlier occurrence of the previous token, copies
nothing); 1.3 empty.
"""

from __future__ import annotations

import pytest
import torch

from interp.interventions.ablation import ablation_hooks, compute_head_means
from interp.experiments.edge_study import EdgeStudyConfig, edge_study
from interp.measure.evaluate import evaluate_task, generate_accuracy, task_prompts
from interp.measure.generation import greedy_answers
from interp.core.heads import Head
from interp.measure.mechanism_scores import all_head_scores
from interp.models import ModelNotFoundError, load_model
from interp.models.planted import (BACKWARD_HEAD, HEAD_LEVEL_ANTI_HEAD, INDUCTION_HEAD, MARKER_HEAD, PREVIOUS_TOKEN_HEAD,
                                   PlantedConfig, planted_heads)
from interp.prompts import PromptConfig, encode_prompts
from interp.interventions.sweep import head_sweep
from interp.figures.attention import attention_view, save_attention_view

ZERO_SHOT = PromptConfig(n_shots=0)
WITH_MARKER = PromptConfig(n_shots=0, template="obey")  # the rule's "same" / "reverse" selects the circuit
LENGTH, N = 10, 20


@pytest.fixture(scope="module")
def models():
    return {name: load_model(name, device="cpu") for name in ("planted-uf", "planted-ub", "planted-both")}


@pytest.fixture(scope="module")
def both_scores(models):
    return all_head_scores(models["planted-both"], n_sequences=10, progress=False)


@pytest.fixture(scope="module")
def ub_scores(models):
    return all_head_scores(models["planted-ub"], n_sequences=10, progress=False)


def accuracy(model, task, config, hooks=(), length=LENGTH, n=N):
    return evaluate_task(model, task, length, n, prompt_config=config, fwd_hooks=hooks, progress=False).accuracy


# --------------------------------------------------------------------------- the models solve their tasks


@pytest.mark.parametrize("name,task,config", [("planted-uf", "UF", ZERO_SHOT), ("planted-ub", "UB", ZERO_SHOT),
                                              ("planted-both", "UF", WITH_MARKER), ("planted-both", "UB", WITH_MARKER)])
def test_planted_model_solves_its_task_teacher_forced_and_generated(models, name, task, config):
    model = models[name]
    for length, n in ((3, 30), (10, 30), (52, 10)):  # 52: every letter once, the longest unique string
        assert accuracy(model, task, config, length=length, n=n) >= 0.99
    prompts = task_prompts(model, task, 8, 4, seed=3, prompt_config=config)
    encoded = encode_prompts(model.tokenizer, prompts, prepend_bos=False)
    generated = greedy_answers(model, encoded, progress=False)
    assert all(tokens == p.answer_ids for tokens, p in zip(generated, encoded))
    assert generate_accuracy(model, prompts[:2], config, progress=False)[0] == 1.0  # the string, "<eos>" included


def test_single_circuit_models_cannot_do_the_other_task(models):
    assert accuracy(models["planted-uf"], "UB", ZERO_SHOT) <= 0.05
    assert accuracy(models["planted-ub"], "UF", ZERO_SHOT) <= 0.05


# --------------------------------------------------------------------------- head scores


def test_paper_scores_rank_the_planted_heads_first(models, both_scores):
    assert both_scores.top_heads("induction", 1) == [INDUCTION_HEAD]
    assert both_scores.top_heads("previous_token", 1) == [PREVIOUS_TOKEN_HEAD]
    assert both_scores.top_heads("anti_induction", 1) == [HEAD_LEVEL_ANTI_HEAD]
    assert float(both_scores["previous_token"][PREVIOUS_TOKEN_HEAD]) > 0.99


def test_paper_anti_induction_score_is_fooled_by_the_head_level_head(ub_scores, models):
    """The head with the full paper score copies nothing; the head that carries UB scores zero."""
    assert float(ub_scores["anti_induction"][HEAD_LEVEL_ANTI_HEAD]) > 0.99
    assert float(ub_scores["anti_induction"][BACKWARD_HEAD]) < 0.01
    model = models["planted-ub"]
    assert accuracy(model, "UB", ZERO_SHOT, ablation_hooks(model, [HEAD_LEVEL_ANTI_HEAD], "zero")) >= 0.95
    assert accuracy(model, "UB", ZERO_SHOT, ablation_hooks(model, [BACKWARD_HEAD], "zero")) <= 0.05


def test_mechanism_scores_name_the_backward_copier(ub_scores, both_scores):
    for scores in (ub_scores, both_scores):
        for name in ("duplicate_token", "reversed_duplicate", "v_composition", "duplicate_v_composition"):
            assert scores.top_heads(name, 1) == [BACKWARD_HEAD], name
        assert float(scores["duplicate_v_composition"][BACKWARD_HEAD]) > 0.9
        assert float(scores["duplicate_v_composition"][HEAD_LEVEL_ANTI_HEAD]) < 0.05
    # on the reversed probe the head-level head attends *after* the earlier occurrence: it looks
    # for the previous token's earlier occurrence, not for the token before the current one's
    assert float(ub_scores["reversed_induction"][HEAD_LEVEL_ANTI_HEAD]) > 0.99
    assert float(ub_scores["reversed_anti_induction"][HEAD_LEVEL_ANTI_HEAD]) < 0.01
    assert both_scores.top_heads("k_composition", 1) == [INDUCTION_HEAD]


# --------------------------------------------------------------------------- ablation


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_ablating_a_planted_head_breaks_its_task_only(models, kind):
    model = models["planted-both"]
    reference = [p for task in ("UF", "UB") for p in task_prompts(model, task, LENGTH, 10, seed=99, prompt_config=WITH_MARKER)]
    means = compute_head_means(model, encode_prompts(model.tokenizer, reference, prepend_bos=False), progress=False)
    carries = {INDUCTION_HEAD: "UF", BACKWARD_HEAD: "UB"}
    for layer in range(model.cfg.n_layers):
        for index in range(model.cfg.n_heads):
            head = Head(layer, index)
            hooks = ablation_hooks(model, [head], kind, means)
            after = {task: accuracy(model, task, WITH_MARKER, hooks, n=10) for task in ("UF", "UB")}
            if head in carries:
                other = "UB" if carries[head] == "UF" else "UF"
                assert after[carries[head]] <= 0.05 and after[other] >= 0.95, (head, after)
            elif head == PREVIOUS_TOKEN_HEAD:  # both circuits compose with it
                assert max(after.values()) <= 0.05, (head, after)
            elif head != MARKER_HEAD:  # without the marker both circuits answer at once
                assert min(after.values()) >= 0.95, (head, after)


# --------------------------------------------------------------------------- the exact sweep


@pytest.mark.parametrize("name,task,needed", [("planted-uf", "UF", {PREVIOUS_TOKEN_HEAD, INDUCTION_HEAD}),
                                              ("planted-ub", "UB", {PREVIOUS_TOKEN_HEAD, BACKWARD_HEAD})])
def test_single_head_sweep_ranks_the_planted_heads_first(models, name, task, needed):
    model = models[name]
    encoded = encode_prompts(model.tokenizer, task_prompts(model, task, LENGTH, N, prompt_config=ZERO_SHOT), prepend_bos=False)
    result = head_sweep(model, encoded, progress=False)
    ranked = [head for _, head in sorted(zip(result.delta_logprobs(), result.heads))]
    assert set(ranked[: len(needed)]) == needed
    assert max(result.delta_logprobs()[result.heads.index(h)] for h in needed) < -3.0


# --------------------------------------------------------------------------- edge patching (paper definitions)


def test_edge_patching_separates_the_circuits(models):
    config = EdgeStudyConfig(lengths=(5,), n=10, n_shots=1, prepend_bos=True)  # one string: the heads find the earliest occurrence
    found = {}
    for name, task in (("planted-uf", "UF"), ("planted-ub", "UB")):
        rows, _ = edge_study(models[name], config.__class__(**{**config.__dict__, "tasks": (task,)}), progress=False)
        found[task] = {row.condition: row.accuracy for row in rows}
    assert found["UF"]["none"] >= 0.99 and found["UB"]["none"] >= 0.99
    assert found["UF"]["induction"] <= 0.05 and found["UF"]["anti_induction"] >= 0.95  # key edges carry UF
    assert found["UB"]["anti_induction"] <= 0.05 and found["UB"]["induction"] >= 0.95  # value edges carry UB


# --------------------------------------------------------------------------- attention views


def test_attention_views_render_the_planted_heads(models, ub_scores, tmp_path):
    view = attention_view(models["planted-ub"], "UB", [BACKWARD_HEAD, HEAD_LEVEL_ANTI_HEAD], length=8,
                          prompt_config=ZERO_SHOT, scores=ub_scores)
    by_head = {row["head"]: row for row in view.source_attention()}
    # 1.1 attends to the earlier occurrence of each output item, one after the source it copies
    steps = list(zip(view.layout.predicting_positions, view.layout.source_positions))
    pattern = view.patterns[0]
    assert all(pattern[p, s + 1] > 0.99 for p, s in steps[1:])
    assert by_head["1.2"]["mean_to_source"] < 0.5
    assert view.head_scores["1.1"]["duplicate_v_composition"] > 0.9 and view.head_scores["1.2"]["anti_induction"] > 0.99
    page = save_attention_view(view, tmp_path / "ub.html").read_text()
    assert 'class="scores"' in page and "duplicate_v_composition" in page and 'data-heads="1.1;1.2"' in page


# --------------------------------------------------------------------------- names and the noise knob


def test_planted_names_and_strength():
    assert PlantedConfig.from_name("planted-ub@0.25").strength == 0.25
    assert PlantedConfig.from_name("planted-both").marker
    assert planted_heads("planted-uf") == {"previous_token": PREVIOUS_TOKEN_HEAD, "induction": INDUCTION_HEAD}
    with pytest.raises(ModelNotFoundError, match="planted-ub"):
        load_model("planted-xx")
    with pytest.raises(ValueError, match="strength"):
        PlantedConfig(strength=1.5)


def test_noise_weakens_the_plant_until_it_is_gone():
    clean, weak, noise = (load_model(f"planted-ub@{s}", device="cpu") for s in (1.0, 0.5, 0.0))
    assert not torch.equal(clean.W_Q, weak.W_Q)
    assert torch.equal(load_model("planted-ub@0.5", device="cpu").W_Q, weak.W_Q)  # seeded
    assert accuracy(noise, "UB", ZERO_SHOT) <= 0.05


# --------------------------------------------------------------------------- composition arithmetic and scripts


def test_composition_scores_match_the_explicit_products(tiny_gpt2):
    from interp.models.bridge import head_weights
    from interp.measure.mechanism_scores import composition_scores

    w = head_weights(tiny_gpt2)
    writer = Head(0, 1)
    scores = composition_scores(tiny_gpt2, [writer])
    ov = w["W_V"][writer] @ w["W_O"][writer]
    for head in range(tiny_gpt2.cfg.n_heads):
        qk_t = w["W_K"][1, head] @ w["W_Q"][1, head].T
        reader_ov = w["W_V"][1, head] @ w["W_O"][1, head]
        expected_k = (ov @ qk_t).norm() / (ov.norm() * qk_t.norm())
        expected_v = (ov @ reader_ov).norm() / (ov.norm() * reader_ov.norm())
        assert torch.allclose(scores["k_composition"][1, head], expected_k, rtol=1e-4)
        assert torch.allclose(scores["v_composition"][1, head], expected_v, rtol=1e-4)
    assert torch.equal(scores["v_composition"][0], torch.zeros(tiny_gpt2.cfg.n_heads))  # nothing writes below layer 0


def test_head_weights_repeat_shared_key_value_heads():
    from interp.models.bridge import head_weights
    from interp.models import TinyModelConfig, bridge_from_hf, tiny_hf_model

    model, tokenizer = tiny_hf_model("tiny-llama", TinyModelConfig(positional="rope", n_heads=4, n_key_value_heads=2))
    bridge = bridge_from_hf(model, tokenizer, "tiny-llama", torch.device("cpu"))
    weights = head_weights(bridge)
    assert all(weights[name].shape[1] == 4 for name in ("W_Q", "W_K", "W_V", "W_O"))
    assert torch.equal(weights["W_K"][:, 0], weights["W_K"][:, 1])  # query heads 0 and 1 share key head 0


def test_ablate_heads_picks_ub_candidates_by_a_mechanism_score(tmp_path):
    import sys
    from pathlib import Path

    from interp.core.tables import read_csv

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))
    import ablate_heads

    common = ["--model", "planted-ub", "--shots", "0", "--k", "1", "--n", "10", "--tasks", "UB", "--kinds", "zero",
              "--random-seeds", "0", "--score-sequences", "5", "--out", str(tmp_path), "--quiet"]
    assert ablate_heads.main(common) == 0
    assert ablate_heads.main([*common, "--anti-heads-by", "duplicate_v_composition"]) == 0
    paper = {r["condition"]: r for r in read_csv(tmp_path / "ablation_planted-ub.csv")}
    chosen = {r["condition"]: r for r in read_csv(tmp_path / "ablation_planted-ub_anti-by-duplicate_v_composition.csv")}
    assert str(paper["anti_induction"]["heads"]) == "1.2" and paper["anti_induction"]["accuracy"] >= 0.95  # fooled
    assert str(chosen["anti_induction"]["heads"]) == "1.1" and chosen["anti_induction"]["accuracy"] <= 0.05
    assert chosen["anti_induction"]["selected_by"] == "duplicate_v_composition"


def test_sensitivity_instruments_find_the_full_strength_plant():
    from interp.experiments.planted_sensitivity import SensitivityConfig, found_summary, sensitivity_study, weakest_found

    config = SensitivityConfig(strengths=(1.0, 0.0), seeds=(0,), circuits=("UB",), n_examples=10, n_sequences=5, edge_n=5)
    rows = sensitivity_study(config, progress=False)
    at_full = {r.instrument: r for r in rows if r.strength == 1.0}
    for name in ("score:anti_induction", "score:duplicate_v_composition", "ablation:zero", "ablation:mean", "sweep", "edges"):
        assert at_full[name].found, name
    at_zero = {r.instrument: r for r in rows if r.strength == 0.0}
    assert not at_zero["ablation:zero"].found and at_zero["ablation:zero"].clean_accuracy <= 0.05
    down_to = {r.instrument: r.found_down_to for r in weakest_found(found_summary(rows))}
    assert down_to["sweep"] == 1.0


def test_sensitivity_study_sets_atp_star_beside_first_order_on_the_induction_plant():
    """The K-composition plant is where plain attribution patching fails (no gradient through the
    saturated softmax) and AtP*'s QK fix does not."""
    from interp.experiments.planted_sensitivity import SensitivityConfig, sensitivity_study

    config = SensitivityConfig(strengths=(1.0,), seeds=(0,), circuits=("UF",), n_examples=10, n_sequences=5, edge_n=5)
    at_full = {r.instrument: r for r in sensitivity_study(config, progress=False)}
    assert at_full["screen:atp*"].found
    assert not at_full["screen:first-order"].found
