"""Planted retrieval circuits (``planted-ur``, ``planted-ul``): the head that reads the query ``q``
from the previous-token head (0.0) in its own query, at the ``:`` after ``q``, is 1.3 in both.

Right retrieval keys on the previous token (it lands on the item after ``q``'s earlier
occurrence); left retrieval keys on the token and reads the item before through its value. On
the repeated-token probe the first looks like a duplicate-token head, the second has the paper's
full anti-induction score: in the retrieval line the score does name the left-retrieval head.
"""

from __future__ import annotations

import pytest

from interp.core.heads import Head
from interp.interventions.ablation import ablation_hooks, compute_head_means
from interp.interventions.attribution import attribution_sweep
from interp.interventions.sweep import head_sweep
from interp.measure.evaluate import evaluate_task, generate_accuracy, task_prompts
from interp.measure.mechanism_scores import all_head_scores
from interp.models import load_model
from interp.models.planted import PREVIOUS_TOKEN_HEAD, RETRIEVAL_HEAD, planted_heads
from interp.prompts import PromptConfig, encode_prompts

ZERO_SHOT = PromptConfig(n_shots=0)
TASKS = {"planted-ur": "UR", "planted-ul": "UL"}
NEEDED = {PREVIOUS_TOKEN_HEAD, RETRIEVAL_HEAD}


@pytest.fixture(scope="module")
def models():
    return {name: load_model(name, device="cpu") for name in TASKS}


@pytest.fixture(scope="module")
def scores(models):
    return {name: all_head_scores(model, n_sequences=10, progress=False) for name, model in models.items()}


def accuracy(model, task, hooks=(), length=10, n=20):
    return evaluate_task(model, task, length, n, prompt_config=ZERO_SHOT, fwd_hooks=hooks, progress=False).accuracy


def encoded(model, task, n=8, seed=0):
    return encode_prompts(model.tokenizer, task_prompts(model, task, 10, n, seed=seed, prompt_config=ZERO_SHOT),
                          prepend_bos=False)


@pytest.mark.parametrize("name", list(TASKS))
def test_retrieval_plants_solve_their_task_teacher_forced_and_generated(models, name):
    model, task = models[name], TASKS[name]
    for length, n in ((4, 20), (10, 30), (52, 10)):  # 52: every item once
        assert accuracy(model, task, length=length, n=n) >= 0.99
    prompts = task_prompts(model, task, 8, 4, seed=3, prompt_config=ZERO_SHOT)
    assert generate_accuracy(model, prompts, ZERO_SHOT, progress=False)[0] == 1.0  # the item, then the newline


def test_planted_heads_name_the_retrieval_roles():
    assert planted_heads("planted-ur") == {"previous_token": PREVIOUS_TOKEN_HEAD, "right_retrieval": RETRIEVAL_HEAD}
    assert planted_heads("planted-ul") == {"previous_token": PREVIOUS_TOKEN_HEAD, "left_retrieval": RETRIEVAL_HEAD}


@pytest.mark.parametrize("kind", ["zero", "mean"])
@pytest.mark.parametrize("name", list(TASKS))
def test_ablating_a_retrieval_plant_head_breaks_it_and_no_other_head_does(models, name, kind):
    model, task = models[name], TASKS[name]
    means = compute_head_means(model, encoded(model, task, n=10, seed=99), progress=False) if kind == "mean" else None
    for layer in range(model.cfg.n_layers):
        for index in range(model.cfg.n_heads):
            head = Head(layer, index)
            after = accuracy(model, task, ablation_hooks(model, [head], kind, means), n=10)
            if head in NEEDED:
                # nothing is written at ':' then: every logit ties, and float noise can break the
                # tie on the answer (1 of 10 prompts here), so chance level, not zero
                assert after <= 0.1 + 1e-6, (head, after)
            else:
                assert after >= 0.95, (head, after)


def test_head_scores_on_the_retrieval_plants(scores):
    """The left-retrieval head has the paper's anti-induction pattern (and reads its predecessor
    through the value); the right-retrieval head looks like a duplicate-token head, not an
    induction head, although it retrieves rightwards."""
    left, right = scores["planted-ul"], scores["planted-ur"]
    assert left.top_heads("anti_induction", 1) == [RETRIEVAL_HEAD]
    assert float(left["anti_induction"][RETRIEVAL_HEAD]) > 0.99
    assert float(left["v_composition"][RETRIEVAL_HEAD]) > float(right["v_composition"][RETRIEVAL_HEAD])
    assert right.top_heads("duplicate_token", 1) == [RETRIEVAL_HEAD]
    assert float(right["duplicate_token"][RETRIEVAL_HEAD]) > 0.95  # a probe token repeated inside a half can mislead it
    assert float(right["induction"][RETRIEVAL_HEAD]) < 0.05
    for table in (left, right):
        assert table.top_heads("previous_token", 1) == [PREVIOUS_TOKEN_HEAD]


@pytest.mark.parametrize("name", list(TASKS))
def test_sweep_and_screen_rank_the_retrieval_heads_first(models, name):
    model, task = models[name], TASKS[name]
    prompts = encoded(model, task)
    exact = head_sweep(model, prompts, progress=False)
    assert {h for h, d in zip(exact.heads, exact.delta_logprobs()) if d < -1} == NEEDED
    assert set(attribution_sweep(model, prompts, "zero", progress=False).top_heads(len(NEEDED))) == NEEDED
