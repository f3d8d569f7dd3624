"""Every script refuses a mistake with one line naming the argument and exit code 2, before any
model work; problems only the loaded model can show (its context, its number of heads) too."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from interp.cli import Namespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))
sys.path.insert(0, str(ROOT / "benchmarks"))

TINY = ["--model", "tiny-llama", "--device", "cpu", "--quiet"]


def refused(main, argv, capsys) -> str:
    """The error line a script prints for ``argv`` (it must exit with code 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("script, argv, fragment", [
    ("ablate_heads", ["--n", "0"], "argument --n: expected an integer >= 1, got '0'"),
    ("ablate_heads", ["--tasks", ""], "argument --tasks: no tasks"),
    ("ablate_heads", ["--tasks", "UF,XX"], "argument --tasks: unknown ['XX']"),
    ("ablate_heads", ["--score-sequences", "0"], "argument --score-sequences: expected an integer >= 1"),
    ("ablate_heads", ["--kinds", "zero,half"], "argument --kinds: unknown ['half']"),
    ("ablate_heads", ["--out", "/etc/hostname/results"], "argument --out: cannot write into '/etc/hostname/results'"),
    ("directional_bias", ["--tasks", ""], "argument --tasks: no tasks"),
    ("directional_bias", ["--lengths", "20-5"], "argument --lengths: range '20-5' is empty"),
    ("head_sweep", ["--task", "UX"], "argument --task: unknown task 'UX'"),
    ("head_sweep", ["--heads", "1.x"], "--heads: cannot read head '1.x'"),
    ("head_sweep", ["--verify", "3"], "argument --verify/--ig-steps: they refine --method attribution"),
    ("head_sweep", ["--method", "attribution", "--verify", "0"], "argument --verify: K=0 must be >= 1"),
    ("head_sweep", ["--method", "attribution", "--verify", "-1"], "argument --verify: K=-1 must be >= 1"),
    ("head_sweep", ["--method", "attribution", "--ig-steps", "2"], "argument --ig-steps: integrated gradients refine the first-order"),
    ("head_sweep", ["--method", "attribution", "--screen", "exact"], "argument --screen: invalid choice"),
    ("head_sweep", ["--method", "path"], "argument --heads: --method path follows the heads it is given"),
    ("head_sweep", ["--method", "path", "--heads", "1.0", "--alphas", "0,1"], "argument --alphas: points of the way"),
    ("score_heads", ["--tasks", ""], "argument --tasks: no tasks"),
    ("finetune", ["--train-lengths", "20-5"], "argument --train-lengths: range '20-5' is empty"),
    ("finetune", ["--adapter-out", "adapters/x"], "argument --adapter-out: needs --lora"),
    ("git_history", ["--tasks", "revert,rebase"], "argument --tasks: unknown ['rebase']"),
    ("lorem_ipsum", ["--paragraphs", "0"], "argument --paragraphs: expected an integer >= 1"),
    ("train_from_scratch", ["--positional", "sinusoidal"], "argument --positional: unknown ['sinusoidal']"),
    ("theory_table", ["--n", "-1"], "argument --n: expected an integer >= 1"),
    ("make_figures", ["--results", "/nonexistent"], "argument --results: '/nonexistent' is not a folder"),
    # the shape of a named model is known from its name or config file: a head it lacks is refused unloaded
    ("show_heads", ["--model", "tiny-llama", "--task", "UF", "--heads", "99.0"], "argument --heads: head 99.0 is out of range"),
    ("show_heads", ["--model", "tiny-llama", "--task", "UF", "--heads", "0.1", "--view", "all"], "argument --view: expected"),
    ("head_sweep", ["--model", "tiny-llama", "--heads", "1.4"], "argument --heads: head 1.4 is out of range (head 4)"),
    ("ablate_heads", ["--model", "tiny-llama", "--k", "9"], "argument --k: k=9 heads per set, but the model has only 8"),
])
def test_bad_arguments_are_refused_before_any_model_work(script, argv, fragment, capsys, monkeypatch):
    module = __import__(script)  # imported first: it binds the real loader, which the test then replaces

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(module, "load_model_from_args", no_model, raising=False)
    assert fragment in refused(module.main, argv, capsys)


@pytest.mark.parametrize("script, argv, fragment", [
    ("ablate_heads", ["--k", "9"], "argument --k: k=9 heads per set, but the model has only 8 heads"),
    ("ablate_heads", ["--k", "3"], "argument --k: k=3: the random-head control needs 3 heads outside"),
    ("head_sweep", ["--task", "UR", "--length", "700"], "argument --length: the longest prompt + answer has"),
    ("head_sweep", ["--heads", "2.0"], "--heads: head 2.0 is out of range"),
    ("head_sweep", ["--method", "attribution", "--verify", "9"], "argument --verify: K=9 exact evaluations, but the model has 8 heads"),
    ("directional_bias", ["--tasks", "UR", "--lengths", "600"], "argument --lengths: UR at length 600"),
    ("ablate_heads", ["--adapter", "ub", "--k", "1"], "--adapter: "),
])
def test_what_only_the_model_can_tell_is_refused_before_scoring(script, argv, fragment, capsys, monkeypatch, tmp_path):
    import interp.experiments.ablation_setup as study

    def no_scoring(*args, **kwargs):
        raise AssertionError("scoring started before the arguments were checked")

    monkeypatch.setattr(study, "all_head_scores", no_scoring)
    module = __import__(script)
    argv = [*TINY, "--out", str(tmp_path), *argv]
    if script == "ablate_heads" and "--adapter" in argv:  # the library's error becomes the script's one line
        from interp.cli import run

        assert run(module.main, argv) == 2
        assert "trained on 'smollm2-135m', not on 'tiny-llama'" in capsys.readouterr().err
        return
    assert fragment in refused(module.main, argv, capsys)


def test_a_corrupt_checkpoint_names_the_file_and_the_way_out(tmp_path):
    from interp.models import load_hf_model
    from interp.training import CHECKPOINT_NAME, CheckpointUnreadable, TrainConfig, train

    model, tokenizer = load_hf_model("tiny-gpt2")
    config = TrainConfig(task="UF", train_lengths=(3,), id_lengths=(3,), ood_lengths=(4,), steps=2, batch_size=2,
                         eval_examples=0, n_shots=0)
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"\x80\x04 not a checkpoint")
    with pytest.raises(CheckpointUnreadable, match=rf"{CHECKPOINT_NAME} cannot be read .*--no-resume"):
        train(model, tokenizer, config, tmp_path, progress=False)


def test_an_adapter_for_another_base_model_is_refused():
    from interp.models.adapters import merge_adapter
    from interp.models import load_hf_model

    model, _ = load_hf_model("tiny-llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="trained on 'smollm2-135m', not on 'tiny-llama'"):
        merge_adapter(model, "ub", base_model="tiny-llama")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing merged


def test_a_binary_results_file_is_named(tmp_path):
    from interp.core.tables import read_csv

    path = tmp_path / "ablation.csv"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"ablation\.csv is not a readable CSV table"):
        read_csv(path)


def test_heads_must_be_whole_numbers_and_sweeps_unique(tiny_llama):
    from interp.core.heads import validate_heads
    from interp.interventions.sweep import head_sweep

    with pytest.raises(ValueError, match="1.7 is not a whole-number index"):
        validate_heads([(1.7, 0)])
    with pytest.raises(ValueError, match="each head may be swept once; the list repeats 1.2"):
        head_sweep(tiny_llama, [], heads=[(1, 2), (0, 1), (1, 2)], progress=False)


def test_the_attribution_screen_writes_estimates_and_verified_heads(tmp_path, capsys):
    import head_sweep

    from interp.core.tables import read_csv

    argv = [*TINY, "--out", str(tmp_path), "--task", "UF", "--length", "4", "--n", "3", "--method", "attribution"]
    assert head_sweep.main([*argv, "--verify", "2"]) == 0
    rows = read_csv(tmp_path / "head_screen_tiny-llama.csv")
    assert len(rows) == 8 and not (tmp_path / "head_sweep_tiny-llama.csv").exists()
    kinds = sorted(r["estimate"] for r in rows)
    assert kinds.count("exact (zero)") == 2 and kinds.count("AtP* (QK fix) (zero)") == 6
    assert sorted(r["status"] for r in rows) == ["estimated"] * 6 + ["verified"] * 2
    assert "estimated to hurt UF most" in capsys.readouterr().out
    assert head_sweep.main([*argv, "--screen", "first-order", "--ig-steps", "2"]) == 0
    rows = read_csv(tmp_path / "head_screen_tiny-llama.csv")
    assert {r["estimate"] for r in rows} == {"integrated gradients (2 steps) (zero)"}


def test_the_path_method_prints_each_head_free_and_frozen(tmp_path, capsys):
    import head_sweep

    argv = [*TINY, "--out", str(tmp_path), "--task", "UF", "--length", "4", "--n", "3", "--method", "path",
            "--heads", "0.1,1.2", "--alphas", "0.5,1"]
    assert head_sweep.main(argv) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "ablation" in line]
    assert [line.split(" ")[0] for line in lines] == ["0.1", "0.1", "1.2", "1.2"]
    assert sum("later patterns frozen" in line for line in lines) == 2 and all("linear share" in line for line in lines)
    assert not list(tmp_path.iterdir())  # printed, not written


@pytest.mark.parametrize("argv, fragment", [
    (["install", "--model", "nope"], "argument --model: unknown ['nope']; expected comma-separated models from "
                                     "qwen2.5-1.5b, gemma-3-270m or 'all'"),
    (["install", "--model", ""], "argument --model: no models"),
    (["install", "--wheels", "/nonexistent"], "argument --wheels: '/nonexistent' is not a folder"),
    (["status", "--model", "gemma-2"], "argument --model: unknown ['gemma-2']"),
    (["uninstall"], "argument command: invalid choice: 'uninstall'"),
])
def test_the_model_installer_refuses_a_mistake_before_any_download(argv, fragment, capsys, monkeypatch):
    from interp.cli import models as command

    def no_download(*args, **kwargs):
        raise AssertionError("the installer started before the arguments were checked")

    monkeypatch.setattr(command, "install", no_download)
    monkeypatch.setattr(command, "installed_folder", no_download)
    assert fragment in refused(command.main, argv, capsys)


@pytest.mark.parametrize("script, argv, fragment", [
    ("bench_attribution", ["--n", "0"], "argument --n: expected an integer >= 1, got '0'"),
    ("bench_attribution", ["--task", "XX"], "argument --task: unknown task 'XX'"),
    ("bench_attribution", ["--variants", "ig0"], "argument --variants: variant 'ig0': expected igK"),
    ("bench_attribution", ["--kinds", "zero,half"], "argument --kinds: unknown ['half']"),
    ("bench_attribution", ["--kinds", "zero", "--time-kinds", "mean"], "argument --time-kinds: ['mean'] not among"),
    ("bench_attribution", ["--repeats", "2"], "argument --repeats: expected an integer >= 3, got '2'"),
    ("bench_evaluate", ["--forward-shape", "8x"], "argument --forward-shape: expected BATCHxTOKENS like '8x100'"),
    ("bench_evaluate", ["--forward-shape", "0x100"], "argument --forward-shape: expected a batch and a token count"),
    ("bench_teacher_forcing", ["--cases", "UF:20"], "argument --cases: case 'UF:20': expected TASK:LENGTH:N"),
    ("bench_teacher_forcing", ["--cases", "UF:20:0"], "argument --cases: case 'UF:20:0': expected TASK:LENGTH:N, "
                                                      "e.g. NF:100:4 (expected an integer >= 1, got '0')"),
    ("bench_sweep", ["--every", "0"], "argument --every: expected an integer >= 1, got '0'"),
    ("bench_checksum", ["--model", "nope"], "argument --model: invalid choice: 'nope'"),
    ("bench_peak", ["--sizes", "1024,0"], "argument --sizes: expected positive integers"),
    ("bench_ablation", ["--warmup", "-1"], "argument --warmup: expected an integer >= 0, got '-1'"),
])
def test_a_benchmark_refuses_a_mistake_before_any_model_is_loaded(script, argv, fragment, capsys, monkeypatch):
    module = __import__(script)

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(module, "load_model", no_model, raising=False)
    monkeypatch.setattr(module, "matmul_gflops", no_model, raising=False)
    assert fragment in refused(module.main, argv, capsys)


def test_argparse_is_imported_by_interp_cli_alone():
    """One parser for analyses, benchmarks and installers: the rest take it from interp.cli."""
    sources = [*(ROOT / "interp").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "analyses").rglob("*.py")]
    users = [str(p.relative_to(ROOT)) for p in sources if "argparse" in p.read_text()]
    importers = [u for u in users if re.search(r"^\s*(import|from) argparse\b", (ROOT / u).read_text(), re.M)]
    assert importers == ["interp/cli/parser.py"]
    assert all(u.startswith("interp/cli/") for u in users), users  # the argument types' examples name its error


def test_a_bad_task_is_refused_before_torch_is_imported():
    """The figure and model modules take seconds to import; a mistaken --task is refused first."""
    import subprocess

    code = ("import runpy, sys; sys.modules['torch'] = None; "  # importing torch now raises ImportError
            "sys.argv = ['show_heads.py', '--task', 'UX', '--heads', '1.1']; "
            f"runpy.run_path({str(ROOT / 'analyses' / 'show_heads.py')!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("show_heads.py: error: argument --task: unknown task 'UX'")


def test_quiet_silences_the_loading_bars_of_transformers_too():
    from transformers.utils import logging as transformers_logging

    from interp.cli.args import load_model_from_args

    transformers_logging.enable_progress_bar()  # scripts run in-process by other tests may have switched it off
    try:
        args = Namespace(model="tiny-gpt2", device="cpu", dtype=None, device_map=None, adapter=None, quiet=False)
        load_model_from_args(args)
        assert transformers_logging.is_progress_bar_enabled()
        load_model_from_args(Namespace(**{**vars(args), "quiet": True}))
        assert not transformers_logging.is_progress_bar_enabled()
    finally:
        transformers_logging.enable_progress_bar()
