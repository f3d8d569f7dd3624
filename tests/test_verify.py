"""The verified head screen on the planted UF circuit: the screen's order, exact values where
verified, the cost of verified recall, and the budget refused in one line."""

import sys
from pathlib import Path

import pytest
import torch

from interp.core.heads import Head
from interp.interventions.attribution import attribution_sweep
from interp.interventions.sweep import head_sweep
from interp.interventions.verify import VerifiedScreen, verified_recall, verify_screen
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.models import load_model
from interp.models.planted import INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD
from interp.prompts import PromptConfig

sys.path.insert(0, str(Path(__file__).parents[1] / "analyses"))


@pytest.fixture(scope="module")
def planted():
    model = load_model("planted-uf", device="cpu")
    config = PromptConfig(n_shots=0)
    prompts = encode_for(model, task_prompts(model, "UF", 8, 6, seed=2, prompt_config=config), config)
    screen = attribution_sweep(model, prompts, "zero")
    exact = head_sweep(model, prompts).delta_logprob_table(model.cfg.n_layers, model.cfg.n_heads)
    return model, prompts, screen, exact


def test_the_screens_first_heads_are_verified_with_the_exact_sweeps_values(planted):
    model, prompts, screen, exact = planted
    verified = verify_screen(model, prompts, screen, budget=3)
    order = screen.flagged_heads(8)
    assert verified.verified_heads == order[:3]
    rows = {Head(r["layer"], r["head"]): r for r in verified.rows()}
    assert len(rows) == 8 and [rows[h]["verify_rank"] for h in order] == list(range(1, 9))
    assert {h for h, r in rows.items() if r["status"] == "verified"} == set(order[:3])
    for head, row in rows.items():
        if row["status"] == "verified":
            assert row["delta_logprob"] == pytest.approx(exact[head].item(), abs=1e-6)
            assert row["accuracy"] is not None and row["estimate"] == "exact (zero)"
        else:
            assert row["delta_logprob"] == pytest.approx(screen.delta_logprob()[head].item(), abs=1e-6)
            assert row["accuracy"] is None
    deltas = [r["delta_logprob"] for r in verified.rows()]
    assert deltas == sorted(deltas)  # most harmful first
    assert "3 of 8 heads verified" in repr(verified) and len(verified.to_pandas()) == 8


def test_a_full_budget_ranks_like_the_exact_sweep(planted):
    """The plant's previous-token head acts through a threshold that no gradient at the clean run
    sees; verified, it takes its place beside the induction head."""
    model, prompts, screen, exact = planted
    verified = verify_screen(model, prompts, screen, budget=8)
    assert torch.allclose(verified.delta_logprob(), exact, atol=1e-6)
    assert set(verified.top_heads(2)) == {INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD}
    assert isinstance(verified, VerifiedScreen) and all(r["status"] == "verified" for r in verified.rows())


@pytest.mark.parametrize("budget, message", [(0, "budget=0 must be >= 1"), (9, "budget=9 exact evaluations, but the model has 8"),
                                             (True, "expected a whole number")])
def test_bad_budgets_are_refused(planted, budget, message):
    model, prompts, screen, _ = planted
    with pytest.raises(ValueError, match=message):
        verify_screen(model, prompts, screen, budget=budget)


def test_the_recall_curve_counts_the_exact_top_heads_found(planted):
    _, _, screen, exact = planted
    order = screen.flagged_heads(8)
    curve = verified_recall(order, exact, k=3)
    top = set(curve.top_exact)
    assert curve.top_exact == sorted(top, key=lambda h: exact[h].item())[:3]
    assert curve.found == [sum(h in top for h in order[: i + 1]) for i in range(8)]
    assert curve.found[-1] == 3 and curve.needed(3) == 1 + max(order.index(h) for h in top)
    assert [r["spent"] for r in curve.rows()] == list(range(1, 9))


def test_recall_refuses_what_it_cannot_count(planted):
    _, _, screen, exact = planted
    order = screen.flagged_heads(8)
    with pytest.raises(ValueError, match="each of the 8 heads once"):
        verified_recall(order[:-1], exact, k=3)
    with pytest.raises(ValueError, match="full exact sweep"):
        verified_recall(order, torch.where(torch.eye(2, 4, dtype=torch.bool), float("nan"), exact), k=3)
    with pytest.raises(ValueError, match="k=9"):
        verified_recall(order, exact, k=9)
    with pytest.raises(ValueError, match="m=4"):
        verified_recall(order, exact, k=3).needed(4)


@pytest.mark.parametrize("budget, message", [("9", "K=9 exact evaluations, but the model has 8 heads"),
                                             ("0", "K=0 must be >= 1"), ("two", "invalid int value")])
def test_the_script_refuses_a_bad_budget_before_loading(monkeypatch, capsys, budget, message):
    """tiny-llama: a model whose shape (2 x 4 heads) is known from its name, before loading."""
    import head_sweep

    monkeypatch.setattr(head_sweep, "load_model_from_args", lambda args: pytest.fail("the model was loaded"))
    with pytest.raises(SystemExit) as exit_:
        head_sweep.main(["--model", "tiny-llama", "--method", "attribution", "--verify", budget])
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit_.value.code == 2 and len(lines) == 1 and f"argument --verify: {message}" in lines[0]
