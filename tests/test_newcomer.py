"""What a new user meets first: the API visible from a prompt, results that print short and turn
into tables, heads that print as the README writes them, quiet library calls."""

from __future__ import annotations

import pydoc
import re
import subprocess
import sys

import pytest
import torch

import interp
from interp.core.heads import Head


def test_the_public_api_is_visible_to_dir_help_and_type_checkers():
    names = dir(interp)
    for name in ("load_model", "evaluate_task", "score_heads", "ablated", "attribution_sweep", "head_sweep", "Head",
                 "HeadScores", "task_prompts", "encode_for", "measure", "interventions"):
        assert name in names
    assert "import_module" not in names and "TYPE_CHECKING" not in names
    assert set(interp.__all__) <= set(names)
    for name in interp.__all__:  # every advertised name resolves
        assert getattr(interp, name) is not None
    text = pydoc.render_doc(interp, renderer=pydoc.plaintext)
    assert "score_heads(" in text and "evaluate_task(" in text  # help() lists the functions, not __getattr__
    source = (pytest.importorskip("pathlib").Path(interp.__file__)).read_text()
    for name in interp.__all__:  # IDEs and type checkers read these imports
        assert f" {name}" in source.partition("if TYPE_CHECKING:")[2].partition("_EXPORTS")[0], name


def test_importing_interp_stays_light():
    code = "import sys, interp; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_head_prints_as_the_readme_writes_it():
    assert repr(Head(18, 6)) == "Head(18, 6)" and eval(repr(Head(18, 6))) == Head(layer=18, head=6)
    assert str(Head(18, 6)) == "18.6"
    assert repr([Head(1, 2)]) == "[Head(1, 2)]"


def test_ablated_takes_every_spelling_of_a_head(tiny_llama):
    from interp.interventions.ablation import HookCounter, ablated, random_heads

    tokens = tiny_llama.to_tokens("a b c a b c")
    outputs = []
    for heads in ([Head(1, 2)], ["1.2"], "1.2", [(1, 2)]):
        counter = HookCounter()
        with ablated(tiny_llama, heads, "zero", counter=counter):
            outputs.append(tiny_llama(tokens))
        assert sum(counter.calls.values()) == 1
    assert all(torch.equal(outputs[0], o) for o in outputs[1:])
    assert Head(1, 2) not in random_heads(2, 4, 7, seed=0, exclude=["1.2"])


@pytest.fixture(scope="module")
def results(tiny_llama):
    from interp.interventions.attribution import attribution_sweep
    from interp.interventions.sweep import head_sweep
    from interp.measure.encoding import encode_for
    from interp.measure.evaluate import evaluate_task, task_prompts
    from interp.measure.head_scores import score_heads

    encoded = encode_for(tiny_llama, task_prompts(tiny_llama, "UF", 4, n_examples=3))
    return {"scores": score_heads(tiny_llama, n_sequences=2, half_length=6),
            "screen": attribution_sweep(tiny_llama, encoded, "zero"),
            "sweep": head_sweep(tiny_llama, encoded, heads=["0.1", "1.2"]),
            "accuracy": evaluate_task(tiny_llama, "UF", 4, n_examples=3)}


@pytest.mark.parametrize("name, expected_rows", [("scores", 8), ("screen", 8), ("sweep", 2), ("accuracy", 1)])
def test_every_result_prints_short_and_has_rows_and_a_dataframe(results, name, expected_rows):
    result = results[name]
    text = repr(result)
    assert "tensor(" not in text and len(text) < 300 and "\n" not in text
    rows = result.rows()  # no required argument on any result type
    assert len(rows) == expected_rows
    frame = result.to_pandas()
    assert frame.shape[0] == expected_rows and list(frame.columns) == list(rows[0])
    if name != "accuracy":
        assert {r["model"] for r in rows} == {"tiny-llama"}  # the model column is filled
        assert "tiny-llama" in text


def test_top_heads_is_called_the_same_way_on_every_result(results):
    scores, screen, sweep = results["scores"], results["screen"], results["sweep"]
    assert len(scores.top_heads("induction", 3)) == 3
    assert screen.top_heads("delta_logprob", 3) == screen.top_heads(3)
    assert sweep.top_heads("delta_logprob", 2) == sweep.top_heads(2)
    assert set(sweep.top_heads(2)) == {Head(0, 1), Head(1, 2)}
    with pytest.raises(TypeError, match="name one of"):
        scores.top_heads(3)  # several scores: which one is not guessed
    assert results["screen"].rows(task="UF", length=4)[0]["task"] == "UF"


def test_library_calls_draw_no_progress_bar_unless_asked(tiny_llama, capsys):
    from interp.measure.evaluate import evaluate_task
    from interp.measure.head_scores import score_heads

    evaluate_task(tiny_llama, "UF", 4, n_examples=2)
    score_heads(tiny_llama, n_sequences=2, half_length=6)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
    evaluate_task(tiny_llama, "UF", 4, n_examples=2, progress=True)
    assert "UF n=4" in capsys.readouterr().err


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.stem for p in (ROOT / "analyses").glob("*.py"))
# Scripts that load no named model (they read tables, run C-RASP programs, or build their own models)
# take --out and --quiet only; the README's table says which.
NO_MODEL = {"claims", "make_figures", "theory_table", "train_from_scratch", "train_models", "planted_sensitivity",
            "circuit_sensitivity", "circuit_difference", "scratch_family"}
MODEL_OPTIONS = ("--model", "--device", "--dtype", "--device-map", "--adapter")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_takes_the_common_options(script, capsys):
    sys.path.insert(0, str(ROOT / "analyses"))
    module = __import__(script)
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    wanted = ("--out", "--quiet") + (() if script in NO_MODEL else MODEL_OPTIONS)
    assert [option for option in wanted if option not in text] == []
    readme = (ROOT / "README.md").read_text()
    assert f"analyses/{script}.py" in readme
    if script in NO_MODEL:  # the README says which scripts take no model options
        row = next(line for line in readme.splitlines() if f"analyses/{script}.py" in line and line.startswith("|"))
        assert "no model" in row, row


def test_a_script_run_by_hand_writes_into_build_and_its_lines_never_land_in_a_bar(tmp_path, monkeypatch):
    import io
    import re

    sys.path.insert(0, str(ROOT / "analyses"))
    import ablate_heads

    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()  # a terminal: bars (stderr) and lines (stdout) on one screen
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", stream)
    argv = ["--model", "tiny-llama", "--device", "cpu", "--tasks", "UF", "--lengths", "3", "--n", "2", "--k", "1",
            "--kinds", "zero", "--random-seeds", "0", "--score-sequences", "2"]
    assert ablate_heads.main(argv) == 0
    text = stream.getvalue()
    pieces = re.split(r"[\r\n]", text)
    assert any("%|" in p for p in pieces)  # bars were drawn
    merged = [p for p in pieces if "%|" in p and re.search(r"ablating|top 1|resuming", p)]
    assert merged == []
    assert "(one random-head seed: no spread)" in text and "random-head spread]" not in text
    wrote = next(line for line in text.splitlines() if line.startswith("wrote "))
    for name in ("ablation_tiny-llama.csv", "ablation_summary_tiny-llama.csv", "ablation_summary_tiny-llama.md",
                 "head_scores_tiny-llama.csv", "head_scores_tiny-llama.json"):
        assert f"build/results/{name}" in wrote, name
        assert (tmp_path / "build" / "results" / name).is_file()


def test_show_heads_writes_into_build_and_takes_quiet(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "analyses"))
    import show_heads

    monkeypatch.setattr(show_heads, "ROOT", tmp_path)
    argv = ["--model", "tiny-llama", "--device", "cpu", "--task", "UF", "--heads", "0.1", "--length", "3", "--quiet"]
    assert show_heads.main(argv) == 0
    assert (tmp_path / "build" / "figures" / "attention_UF.html").is_file()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_script_writes_into_a_tracked_folder_by_default(script, capsys):
    sys.path.insert(0, str(ROOT / "analyses"))
    module = __import__(script)
    with pytest.raises(SystemExit):
        module.main(["--help"])
    options = " ".join(capsys.readouterr().out.split()).partition("options:")[2]
    outputs = [part for part in re.split(r" (?=--[a-z])", options) if re.match(r"--(out|figures) ", part)]
    assert outputs, script
    for help_text in outputs:  # --results (what is read) may well default to results/
        assert "build/" in help_text and not re.search(r"default:? (results|figures)/", help_text), help_text


def test_log_records_of_a_training_script_never_land_in_a_bar(monkeypatch):
    import io
    import logging

    from tqdm.auto import tqdm

    from interp.cli import log_through_tqdm

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", stream)
    logger = logging.getLogger("interp.test.training")
    log_through_tqdm(logger=logger)
    logger.propagate = False
    with tqdm(total=4, desc="training", file=sys.stderr) as bar:
        bar.update(1)
        logger.info("step 1: loss 2.5")
        bar.update(1)
    pieces = re.split(r"[\r\n]", stream.getvalue())
    assert "INFO interp.test.training: step 1: loss 2.5" in pieces
    assert [p for p in pieces if "%|" in p and "loss" in p] == []


def test_a_scripts_log_shows_its_own_progress_and_only_the_warnings_of_other_libraries(monkeypatch):
    import io
    import logging

    from interp.cli import log_through_tqdm

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", stream)
    log_through_tqdm()  # the root logger, as train_from_scratch.py sets it (the test fixture restores it)
    logging.getLogger("interp.training.loop").info("step 1: loss 2.5")
    logging.getLogger("__main__").info("wrote table")
    logging.getLogger("choreographer.utils._tmpfile").info("TemporaryDirectory.cleanup() worked.")
    logging.getLogger("kaleido").warning("slow render")
    lines = stream.getvalue().splitlines()
    assert lines == ["INFO interp.training.loop: step 1: loss 2.5", "INFO __main__: wrote table",
                     "WARNING kaleido: slow render"]


def test_head_means_and_ablation_paths_print_short_and_tabulate(tiny_llama):
    from interp.interventions.ablation import compute_head_means
    from interp.interventions.ablation_path import AblationPath
    from interp.measure.encoding import encode_for
    from interp.measure.evaluate import task_prompts

    means = compute_head_means(tiny_llama, encode_for(tiny_llama, task_prompts(tiny_llama, "UF", 4, n_examples=2)))
    assert repr(means).startswith("HeadMeans(layers 0-1, 4 heads x") and "tensor(" not in repr(means)
    path = AblationPath(Head(1, 2), "zero", [0.5, 1.0], [-0.1, -0.4])
    assert path.to_pandas()["delta_logprob"].tolist() == [-0.1, -0.4]
