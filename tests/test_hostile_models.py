"""Hostile files and arguments around models, the cache and training (issue 21, items 1, 4, 5,
7, 8, 11 and parts of 12): nothing read runs code, damaged cached files are caught and rebuilt,
killed writers' leftovers are cleaned up, bad values are refused with one line. Tiny models,
each test with its own INTERP_CACHE."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from interp.cli import run
from interp.models import bridge_from_hf, load_hf_model, processed_weights_file, tiny_hf_model
from interp.models.converted import ensure_converted
from interp.models.store import STALE_AFTER_S, CachePathError, publish_folder
from interp.training import CHECKPOINT_NAME, CheckpointUnreadable, TrainConfig, train
from interp.training.checkpoint import LEGACY_CHECKPOINT_NAME, read_checkpoint
from interp.training.loop import TrainingDiverged
from interp.training.tensor_tree import pack, same_tree, unpack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Planted:
    """A pickle that creates ``marker`` when it is unpickled: proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def small_config(**overrides) -> TrainConfig:
    base = dict(task="UF", train_lengths=(3, 4), id_lengths=(4,), ood_lengths=(5,), steps=4, batch_size=4, lr=3e-3,
                warmup_frac=0.0, n_shots=0, eval_every=2, eval_examples=0, checkpoint_every=2)
    return TrainConfig(**(base | overrides))


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err


# --------------------------------------------------------------------------- 1: checkpoints run no code


@pytest.mark.parametrize("name", [CHECKPOINT_NAME, LEGACY_CHECKPOINT_NAME])
def test_a_planted_pickle_checkpoint_is_refused_unrun(tmp_path, name, capsys):
    import finetune

    run_dir, marker = tmp_path / "run", tmp_path / "code-ran"
    run_dir.mkdir()
    (run_dir / name).write_bytes(pickle.dumps(Planted(marker)))
    argv = ["--model", "tiny-gpt2", "--device", "cpu", "--quiet", "--task", "UF", "--train-lengths", "3",
            "--id-lengths", "3", "--ood-lengths", "4", "--steps", "2", "--batch-size", "2", "--eval-examples", "0",
            "--shots", "0", "--run-dir", str(run_dir), "--out", str(tmp_path / "results")]
    assert run(finetune.main, argv) == 2
    assert f"checkpoint {run_dir / name} cannot be read" in one_error_line(capsys)
    assert not marker.exists()


def test_a_pickle_inside_a_torch_zip_is_refused_naming_what_it_imports(tmp_path):
    path, marker = tmp_path / LEGACY_CHECKPOINT_NAME, tmp_path / "code-ran"
    torch.save({"step": Planted(marker)}, path)
    with pytest.raises(CheckpointUnreadable, match=r"pickle holding more than tensors.*system"):
        read_checkpoint(path)
    assert not marker.exists()


def test_checkpoint_payload_round_trips_with_its_types():
    payload = {"step": 3, "rng": {"python": (3, tuple(range(5)), None), "torch": torch.arange(4, dtype=torch.uint8)},
               "optimizer": {"state": {0: {"step": torch.tensor(2.0)}}, "param_groups": [{"betas": (0.9, 0.999)}]},
               "losses": [(1, 2.5), (2, float("nan"))], "lr": 1e-5 / 3}
    tensors: dict = {}
    text = __import__("json").dumps(pack(payload, tensors))
    assert same_tree(unpack(__import__("json").loads(text), tensors), payload)
    with pytest.raises(TypeError, match="cannot store set at extra"):
        pack({"extra": {1, 2}}, {})


def test_an_older_pt_checkpoint_still_resumes(tmp_path):
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    config = small_config()
    train(model, tokenizer, config, tmp_path / "new", progress=False)
    payload = read_checkpoint(tmp_path / "new" / CHECKPOINT_NAME)
    (tmp_path / "old").mkdir()
    torch.save(payload, tmp_path / "old" / LEGACY_CHECKPOINT_NAME)
    resumed = train(tiny_hf_model("tiny-gpt2")[0], tokenizer, config, tmp_path / "old", progress=False)
    assert resumed.resumed_from == config.steps and resumed.losses == payload["losses"]


# --------------------------------------------------------------------------- 5: ruinous training values


@pytest.mark.parametrize("argv, fragment", [
    (["--lr", "inf"], "argument --lr: expected a finite number > 0, got 'inf'"),
    (["--lr", "nan"], "argument --lr: expected a finite number > 0"),
    (["--lr", "0"], "argument --lr: expected a finite number > 0"),
    (["--weight-decay", "nan"], "argument --weight-decay: expected a finite number >= 0"),
    (["--max-grad-norm", "-1"], "argument --max-grad-norm: expected a finite number >= 0, got '-1'"),
    (["--lora-alpha", "inf"], "argument --lora-alpha: expected a finite number > 0"),
])
def test_ruinous_training_values_are_refused_by_the_parser(argv, fragment, capsys):
    import finetune

    with pytest.raises(SystemExit) as exit_info:
        finetune.main(argv)
    assert exit_info.value.code == 2 and fragment in capsys.readouterr().err


@pytest.mark.parametrize("field, value", [("lr", float("inf")), ("weight_decay", float("nan")),
                                          ("max_grad_norm", -1.0), ("lr", -1e-3)])
def test_train_config_refuses_ruinous_values(field, value):
    with pytest.raises(ValueError, match=rf"{field}=.* must be a finite number"):
        small_config(**{field: value})


def test_a_nan_loss_stops_training_with_one_line(tmp_path):
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    with pytest.raises(TrainingDiverged, match=r"training diverged: the loss is (nan|inf) at step \d") as err:
        train(model, tokenizer, small_config(lr=1e30, steps=6, checkpoint_every=1), tmp_path, progress=False)
    assert len(str(err.value).splitlines()) == 1
    step = read_checkpoint(tmp_path / CHECKPOINT_NAME)["step"]  # the last sound step, not the diverged one
    assert f"at step {step + 1}" in str(err.value)


# --------------------------------------------------------------------------- 4, 7: cached files as written


def convert_tiny(folder):
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def keep_time(path: Path, change) -> None:
    """Apply ``change(bytes) -> bytes`` to ``path`` and restore its modification time."""
    stat = path.stat()
    path.write_bytes(change(path.read_bytes()))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def flip_last_bytes(data: bytes) -> bytes:
    return data[:-8] + bytes(b ^ 0xFF for b in data[-8:])


def test_flipped_processed_bytes_under_a_restored_time_are_rebuilt(tmp_path, caplog):
    tokens = torch.tensor([[3, 7, 11, 5]])
    fresh = bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=tmp_path)
    keep_time(processed_weights_file(tmp_path, torch.float32, CPU), flip_last_bytes)
    with caplog.at_level(logging.WARNING):
        healed = bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=tmp_path)
    assert "checksum mismatch" in caplog.text and "processing the raw weights again" in caplog.text
    with torch.no_grad():
        assert torch.equal(healed(tokens), fresh(tokens))


def test_a_garbled_config_with_its_time_kept_is_converted_again(tmp_path, monkeypatch, caplog):
    import interp.models.loading as loading

    folder, conversions = tmp_path / "models" / "tiny-llama", []

    def convert(staging):
        conversions.append(staging)
        convert_tiny(staging)

    monkeypatch.setattr(loading, "own_model", lambda name: (ensure_converted(folder, convert, name), convert))
    loading.load_model("tiny-llama", device="cpu")
    keep_time(folder / "config.json", lambda data: data.replace(b'"', b"'"))  # same size, not JSON
    with caplog.at_level(logging.WARNING):
        bridge = loading.load_model("tiny-llama", device="cpu")
    assert len(conversions) == 2 and bridge.cfg.n_layers == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "config.json" in warnings[0] and "converting it again" in warnings[0]


UNWRITABLE = textwrap.dedent("""
    import logging, resource, sys, torch
    from interp.models import bridge as tl
    from interp.models import bridge_from_hf, load_hf_model, processed_weights_file
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    model, tokenizer = load_hf_model("tiny-gpt2")  # the tokenizer is cached before the limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 10, 32 << 10))
    bridge = bridge_from_hf(model, tokenizer, "tiny-gpt2", torch.device("cpu"), processed_cache=sys.argv[1])
    assert tl.weights_processed(bridge)
    assert not processed_weights_file(sys.argv[1], torch.float32, torch.device("cpu")).exists()
    print("loaded")
""")


def test_a_file_size_limit_only_warns(tmp_path):
    done = subprocess.run([sys.executable, "-c", UNWRITABLE, str(tmp_path / "m")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded" in done.stdout and "could not write the processed-weight cache" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- 8: leftovers of killed writers


def age(path: Path, seconds: float = STALE_AFTER_S + 60) -> None:
    then = time.time() - seconds
    for root, folders, files in os.walk(path):
        for name in (*folders, *files):
            os.utime(os.path.join(root, name), (then, then), follow_symlinks=False)
    os.utime(path, (then, then), follow_symlinks=False)


KILLED_CONVERSION = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from interp.models.store import publish_folder
    def write(staging):
        (staging / "model.safetensors").write_bytes(bytes(1 << 20))
        print("writing", flush=True)
        time.sleep(60)
    publish_folder(Path(sys.argv[1]), write)
""")


def test_a_killed_conversion_leaves_nothing_after_the_next_load(tmp_path, caplog):
    folder = tmp_path / "models" / "tiny"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CONVERSION, str(folder)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    (staging,) = [p for p in folder.parent.iterdir() if p.name.startswith(".tiny.")]
    with caplog.at_level(logging.INFO):  # its owner is gone (the lock is free): removed at once
        ensure_converted(folder, convert_tiny, "tiny")
    assert not staging.exists() and "stale leftover" in caplog.text
    assert {p.name for p in folder.parent.iterdir()} == {"tiny", folder.resolve().name}


def test_the_orphan_of_two_simultaneous_cold_loads_is_removed(tmp_path):
    folder = tmp_path / "models" / "tiny"

    def first(staging):  # another process that takes no lock (an older interp) publishes meanwhile
        publish_folder(folder, convert_tiny, locked=True)
        convert_tiny(staging)

    publish_folder(folder, first)
    versions = [p for p in folder.parent.iterdir() if p.name.startswith(".tiny.")]
    assert len(versions) == 2  # the loser's complete copy, pointed to by nothing
    (orphan,) = [p for p in versions if p != folder.resolve()]
    age(orphan)
    age(folder.resolve())  # the current version, however old, is never removed
    ensure_converted(folder, convert_tiny, "tiny")
    assert not orphan.exists() and (folder / "config.json").exists()


def test_a_killed_processed_save_leaves_no_temporary_file(tmp_path):
    bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=tmp_path)
    stored = processed_weights_file(tmp_path, torch.float32, CPU)
    leftover = tmp_path / f".{stored.name}.k1ll3d"
    leftover.write_bytes(stored.read_bytes()[:1000])
    age(leftover)
    bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=tmp_path)
    assert not leftover.exists() and stored.exists()


# --------------------------------------------------------------------------- 11: one line, not a traceback


def show_heads(argv, capsys) -> str:
    import show_heads as script

    assert run(script.main, ["--model", "tiny-gpt2", "--task", "UF", "--heads", "0.0", *argv]) == 2
    return one_error_line(capsys)


def test_a_cache_under_a_regular_file_is_named(tmp_path, monkeypatch, capsys):
    (tmp_path / "plain").write_text("not a folder")
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "plain" / "cache"))
    assert f"INTERP_CACHE={tmp_path / 'plain' / 'cache'} cannot be used: {tmp_path / 'plain'} is a file" in \
        show_heads(["--out", str(tmp_path / "view.html")], capsys)


def test_a_model_folder_replaced_by_a_file_is_named(tmp_path):
    folder = tmp_path / "models" / "tiny"
    folder.parent.mkdir(parents=True)
    folder.write_text("not a model")
    with pytest.raises(CachePathError, match=rf"{folder} is a file where the cache keeps a model folder"):
        ensure_converted(folder, convert_tiny, "tiny")


def test_a_processed_path_that_is_a_folder_only_warns(tmp_path, caplog):
    processed_weights_file(tmp_path, torch.float32, CPU).mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        bridge = bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "is not a file" in warnings[0] and bridge.cfg.n_layers == 2


@pytest.mark.parametrize("flag", ["--run-dir", "--adapter-out"])
def test_run_folders_naming_a_file_are_refused_before_training(tmp_path, flag, capsys):
    import finetune

    (tmp_path / "plain").write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        finetune.main(["--lora", flag, str(tmp_path / "plain")])
    assert exit_info.value.code == 2
    assert f"argument {flag}: '{tmp_path / 'plain'}' cannot be a folder" in capsys.readouterr().err


def saved_adapter(tmp_path) -> Path:
    from interp.models.adapters import LoraSettings, add_lora, save_adapter

    model, _ = tiny_hf_model("tiny-gpt2")
    return save_adapter(add_lora(model, LoraSettings(rank=2)), tmp_path / "adapter", base_model="tiny-gpt2")


@pytest.mark.parametrize("damage", ["truncated", "pickled"])
def test_a_damaged_adapter_is_one_line(tmp_path, damage, capsys):
    adapter, marker = saved_adapter(tmp_path), tmp_path / "code-ran"
    weights = adapter / "adapter_model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:200])
    else:
        weights.unlink()
        (adapter / "adapter_model.bin").write_bytes(pickle.dumps(Planted(marker)))
    line = show_heads(["--adapter", str(adapter), "--out", str(tmp_path / "view.html")], capsys)
    expected = "not a complete safetensors file" if damage == "truncated" else "pickle holding more than tensors"
    assert f"adapter {adapter}" in line and expected in line and not marker.exists()


def test_a_pickled_model_bin_is_one_line(tmp_path, capsys):
    import show_heads as script

    folder, marker = tmp_path / "model", tmp_path / "code-ran"
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Planted(marker)))
    argv = ["--model", str(folder), "--task", "UF", "--heads", "0.0", "--out", str(tmp_path / "view.html")]
    assert run(script.main, argv) == 2
    line = one_error_line(capsys)
    assert f"--model {folder}: its weights (pytorch_model.bin)" in line and "could run code" in line
    assert not marker.exists()


def test_device_meta_is_one_line(tmp_path, capsys):
    assert "device='meta' holds shapes but no data" in show_heads(["--device", "meta", "--out", str(tmp_path / "view.html")], capsys)


# --------------------------------------------------------------------------- 12: Chromium keeps out of $HOME
# (a non-zip wheel and a damaged cached GGUF: tests/test_paper_model.py)


FAKE_BROWSER = """#!/bin/sh
mkdir -p "$HOME/.pki/nssdb" && touch "$HOME/.pki/nssdb/cert9.db" && echo "$HOME" > "{record}"
echo "<html></html>"
"""


def test_headless_chromium_writes_nothing_into_home(tmp_path, monkeypatch):
    from interp.figures.browser import headless_chromium, isolated_launcher

    home, record = tmp_path / "home", tmp_path / "browser-home.txt"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    browser = tmp_path / "chromium"
    browser.write_text(FAKE_BROWSER.format(record=record))
    browser.chmod(0o755)
    page = tmp_path / "page.html"
    page.write_text("<html></html>")
    assert "<html>" in headless_chromium(page, browser=str(browser))
    assert not any(home.iterdir()) and not Path(record.read_text().strip()).exists()  # its profile is gone
    launcher = isolated_launcher(str(browser), tmp_path / "profile")  # what kaleido starts
    subprocess.run([str(launcher), "--headless"], check=True, capture_output=True)
    assert not any(home.iterdir()) and record.read_text().startswith(str(tmp_path / "profile"))
