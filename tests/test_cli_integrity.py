"""Scripts that printed or computed a wrong number for some argument orders or values: the path
method's linear share, and options silently ignored by the method chosen."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from interp.core.heads import Head
from interp.interventions.ablation_path import AblationPath, ablation_path
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.prompts import PromptConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))
TINY = ["--model", "tiny-llama", "--device", "cpu", "--quiet"]


@pytest.fixture(scope="module")
def uf_prompts(tiny_llama):
    shots = PromptConfig(n_shots=0)
    return encode_for(tiny_llama, task_prompts(tiny_llama, "UF", 4, 3, seed=0, prompt_config=shots), shots)


def test_the_linear_share_does_not_depend_on_the_order_of_alphas(tiny_llama, uf_prompts):
    ascending = ablation_path(tiny_llama, uf_prompts, "0.1", [0.5, 1.0])
    descending = ablation_path(tiny_llama, uf_prompts, "0.1", [1.0, 0.5])
    without_one = ablation_path(tiny_llama, uf_prompts, "0.1", [0.5, 0.5])
    assert ascending.alphas == descending.alphas == without_one.alphas == [0.5, 1.0]
    assert ascending.linear_share() == descending.linear_share() == without_one.linear_share()
    assert ascending.linear_share() != 2.0  # what [0.5] alone used to give, whatever the head


@pytest.mark.parametrize("alphas", [[1e-300], [0.0, 1.0], [float("nan")], [float("inf")], [1.5], []])
def test_alphas_that_give_no_number_are_refused(tiny_llama, uf_prompts, alphas):
    with pytest.raises(ValueError, match=r"alphas=.*expected points in \[0.001, 1\]"):
        ablation_path(tiny_llama, uf_prompts, "0.1", alphas)


def test_a_path_given_out_of_order_still_reads_its_share_right():
    path = AblationPath(Head(0, 0), "zero", [1.0, 0.5], [-2.0, -0.5])
    assert path.linear_share() == 0.5
    assert AblationPath(Head(0, 0), "zero", [0.5], [-0.5]).linear_share() != path.linear_share()  # no full point: NaN


@pytest.mark.parametrize("argv, fragment", [
    (["--alphas", "0.5,1"], "argument --alphas: points of the way refine --method path; --method exact takes none"),
    (["--method", "attribution", "--alphas", "0.5"], "argument --alphas: points of the way refine --method path"),
    (["--method", "path", "--heads", "0.1", "--verify", "3"], "argument --verify: it refines --method attribution"),
    (["--method", "path", "--heads", "0.1", "--alphas", "1e-300"], "argument --alphas: points of the way must be in"),
    (["--method", "path", "--heads", "0.1", "--alphas", "0,1"], "argument --alphas: points of the way must be in"),
    (["--method", "path", "--heads", "0.1", "--alphas", "nan"], "argument --alphas: expected comma-separated numbers"),
])
def test_head_sweep_refuses_options_its_method_ignores_before_loading(argv, fragment, capsys, monkeypatch):
    import head_sweep

    monkeypatch.setattr(head_sweep, "load_model_from_args", lambda args: pytest.fail("loaded the model first"))
    with pytest.raises(SystemExit) as exit_info:
        head_sweep.main([*TINY, *argv])
    assert exit_info.value.code == 2 and fragment in capsys.readouterr().err


def test_the_path_method_prints_the_same_share_for_any_order(tmp_path, capsys):
    import head_sweep

    shares = []
    for alphas in ("0.5,1", "1,0.5", "0.5"):
        argv = [*TINY, "--out", str(tmp_path), "--task", "UF", "--length", "4", "--n", "3", "--method", "path",
                "--heads", "0.1", "--alphas", alphas]
        assert head_sweep.main(argv) == 0
        shares.append([line.rsplit("linear share", 1)[1] for line in capsys.readouterr().out.splitlines()
                       if "linear share" in line])
    assert shares[0] == shares[1] == shares[2] and len(shares[0]) == 2


@pytest.mark.parametrize("argv, fragment", [
    (["--formats", "bogus"], "argument --formats: unknown ['bogus']"),
    (["--seeds", "-1"], "argument --seeds: expected a seed from 0"),
    (["--seeds", "1,1"], "argument --seeds: seed(s) [1] given twice"),
])
def test_planted_sensitivity_refuses_bad_arguments_before_any_work(argv, fragment, capsys, monkeypatch, tmp_path):
    import planted_sensitivity

    monkeypatch.setattr(planted_sensitivity, "sensitivity_study", lambda *a, **k: pytest.fail("ran the study first"))
    with pytest.raises(SystemExit) as exit_info:
        planted_sensitivity.main(["--out", str(tmp_path), "--figures", str(tmp_path), *argv])
    assert exit_info.value.code == 2 and fragment in capsys.readouterr().err


def test_make_figures_blames_results_for_an_unreadable_results_entry(tmp_path, capsys, monkeypatch):
    import errno

    import make_figures

    results = tmp_path / "results"
    results.mkdir()
    (results / "directional_bias_m.csv").mkdir()  # a folder where a table belongs
    assert make_figures.main(["--results", str(results), "--out", str(tmp_path / "figures"), "--formats", "html"]) == 1
    err = capsys.readouterr().err
    assert "directional_bias_m.csv is not a file" in err and "--out" not in err

    def unreadable(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(results / "head_scores_m.csv"))

    monkeypatch.setattr(make_figures, "make_figures", unreadable)
    with pytest.raises(SystemExit):
        make_figures.main(["--results", str(results), "--out", str(tmp_path / "figures"), "--formats", "html"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --results: cannot read" in err and "head_scores_m.csv" in err and "--out" not in err
