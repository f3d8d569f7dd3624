"""One head's way to its ablation (interp.interventions.ablation_path): its end is the exact sweep's
number, and on the planted K-composition circuit it shows why a first-order screen misses the
previous-token head (a threshold that runs through the induction head's pattern)."""

import pytest
import torch

from interp.interventions.ablation import compute_head_means
from interp.interventions.ablation_path import AblationPath, ablation_path
from interp.interventions.attribution import attribution_sweep
from interp.interventions.sweep import head_sweep
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.models import load_model
from interp.models.planted import INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD
from interp.prompts import PromptConfig


@pytest.fixture(scope="module")
def tiny_prompts(tiny_llama):
    return encode_for(tiny_llama, task_prompts(tiny_llama, "UF", 5, 4, seed=1))


@pytest.mark.parametrize("kind", ["zero", "mean"])
def test_path_ends_at_the_exact_sweep(tiny_llama, tiny_prompts, kind):
    means = compute_head_means(tiny_llama, tiny_prompts, progress=False) if kind == "mean" else None
    heads = [(0, 1), (1, 2)]
    sweep = head_sweep(tiny_llama, tiny_prompts, heads, kind, means, batch_size=3, progress=False)
    for head, exact in zip(heads, sweep.delta_logprobs()):
        path = ablation_path(tiny_llama, tiny_prompts, head, [0.5, 1.0], kind, means, batch_size=3)
        assert path.delta[-1] == pytest.approx(exact, abs=1e-5)
        assert path.delta[0] != pytest.approx(path.delta[-1], abs=1e-6)  # halfway is not the whole way


def test_last_layer_has_no_later_patterns_to_freeze(tiny_llama, tiny_prompts):
    free = ablation_path(tiny_llama, tiny_prompts, "1.3", [0.5, 1.0])
    frozen = ablation_path(tiny_llama, tiny_prompts, "1.3", [0.5, 1.0], frozen_patterns=True)
    assert frozen.frozen_patterns and torch.allclose(torch.tensor(free.delta), torch.tensor(frozen.delta), atol=1e-6)


def test_previous_token_head_of_the_plant_is_a_threshold_through_patterns():
    """Planted UF: the previous-token head's effect appears only near the full ablation and runs
    through the induction head's pattern. The induction head's is a cliff too (the answers are
    near certain, so the final log-softmax is flat until the answer's logit has nearly gone), but
    it runs through no later pattern (layer 1 is the last)."""
    model = load_model("planted-uf", device="cpu")
    prompts = encode_for(model, task_prompts(model, "UF", 8, 6, seed=2, prompt_config=PromptConfig(n_shots=0)),
                         PromptConfig(n_shots=0))
    alphas = [0.1, 0.5, 1.0]
    previous = ablation_path(model, prompts, PREVIOUS_TOKEN_HEAD, alphas)
    frozen = ablation_path(model, prompts, PREVIOUS_TOKEN_HEAD, alphas, frozen_patterns=True)
    induction = ablation_path(model, prompts, INDUCTION_HEAD, alphas)
    induction_frozen = ablation_path(model, prompts, INDUCTION_HEAD, alphas, frozen_patterns=True)
    assert previous.delta[-1] < -1.0  # the task breaks
    assert abs(previous.linear_share()) < 0.1  # no slope at the clean run to extrapolate
    assert abs(frozen.delta[-1]) < 0.1 * abs(previous.delta[-1])  # nearly all of it through the pattern
    assert induction.delta[-1] < -1.0 and abs(induction.linear_share()) < 0.1
    assert induction_frozen.delta == pytest.approx(induction.delta, abs=1e-6)
    # the first-order screen sees the previous-token head's slope, not its cliff
    first = attribution_sweep(model, prompts, "zero", progress=False, screen="first-order").delta_logprob()
    assert abs(first[PREVIOUS_TOKEN_HEAD]) < 0.1 * abs(previous.delta[-1])


def test_bad_path_arguments_get_clear_errors(tiny_llama, tiny_prompts):
    with pytest.raises(ValueError, match="alphas="):
        ablation_path(tiny_llama, tiny_prompts, "0.1", [0.0, 1.0])
    with pytest.raises(ValueError, match="head"):
        ablation_path(tiny_llama, tiny_prompts, "5.0")
    with pytest.raises(ValueError, match="means="):
        ablation_path(tiny_llama, tiny_prompts, "0.1", kind="mean")


def test_summary_and_linear_share():
    path = AblationPath(PREVIOUS_TOKEN_HEAD, "zero", [0.5, 1.0], [-0.5, -1.0])
    assert path.linear_share() == 1.0 and path.summary() == "0.0 (zero ablation): 0.5: -0.500, 1: -1.000"
