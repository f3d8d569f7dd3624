"""The cache deletes nothing but its own version folders, and refuses what it did not write:
a link to a folder elsewhere, a folder without a manifest. Each test has its own INTERP_CACHE."""

from __future__ import annotations

import pytest

from interp.cli import run
from interp.models import load_model, tiny_hf_model
from interp.models.converted import ensure_converted
from interp.models.store import CachePathError, publish_folder


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def convert_tiny(folder):
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def victim_folder(tmp_path):
    victim = tmp_path / "victim"
    (victim / "work").mkdir(parents=True)
    (victim / "work" / "thesis.txt").write_text("years of work")
    (victim / "config.json").write_text("{}")  # looks like a model folder with no manifest
    return victim


def intact(victim) -> bool:
    return (victim / "work" / "thesis.txt").read_text() == "years of work" and (victim / "config.json").exists()


def test_loading_the_embedded_model_through_a_foreign_link_deletes_nothing(tmp_path, own_cache):
    victim = victim_folder(tmp_path)
    (own_cache / "models").mkdir(parents=True)
    (own_cache / "models" / "smollm2-135m").symlink_to(victim)
    with pytest.raises(CachePathError) as refused:
        load_model(device="cpu")
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and str(victim) in message and "remove the link" in message
    assert intact(victim) and (own_cache / "models" / "smollm2-135m").is_symlink()


def test_a_script_refuses_a_foreign_link_in_one_line(tmp_path, own_cache, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))
    import show_heads

    victim = victim_folder(tmp_path)
    (own_cache / "models").mkdir(parents=True)
    (own_cache / "models" / "smollm2-135m").symlink_to(victim)
    argv = ["--model", "smollm2-135m", "--task", "UF", "--heads", "0.0", "--out", str(tmp_path / "view.html")]
    assert run(show_heads.main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "is a link to" in err
    assert intact(victim)


@pytest.mark.parametrize("target", ["outside", "another model's version"])
def test_publishing_over_a_foreign_link_is_refused(tmp_path, target):
    models = tmp_path / "cache" / "models"
    if target == "outside":
        victim = victim_folder(tmp_path)
    else:  # the current version of another model must not be taken for this one's
        victim = publish_folder(models / "other", convert_tiny).resolve()
    (models / "tiny").parent.mkdir(parents=True, exist_ok=True)
    (models / "tiny").symlink_to(victim)
    before = sorted(p.name for p in victim.rglob("*"))
    with pytest.raises(CachePathError, match="is a link to"):
        publish_folder(models / "tiny", convert_tiny)
    with pytest.raises(CachePathError, match="is a link to"):
        ensure_converted(models / "tiny", convert_tiny, "tiny")
    assert sorted(p.name for p in victim.rglob("*")) == before


def test_a_link_swapped_in_during_a_conversion_is_not_deleted(tmp_path):
    victim, models = victim_folder(tmp_path), tmp_path / "cache" / "models"
    first = publish_folder(models / "tiny", convert_tiny).resolve()

    def swap_then_convert(staging):  # someone points the link elsewhere while we convert
        (models / "tiny").unlink()
        (models / "tiny").symlink_to(victim)
        convert_tiny(staging)

    with pytest.raises(CachePathError, match="is a link to"):
        publish_folder(models / "tiny", swap_then_convert)
    assert intact(victim)
    assert [p for p in models.iterdir() if p.name.startswith(".tiny.")] == [first]  # our staging went


def test_a_folder_without_a_manifest_is_refused_not_replaced(tmp_path):
    models = tmp_path / "cache" / "models"
    models.mkdir(parents=True)
    (models / "tiny").mkdir()
    (models / "tiny" / "notes.txt").write_text("mine")
    with pytest.raises(CachePathError, match="did not write"):
        ensure_converted(models / "tiny", convert_tiny, "tiny")
    assert (models / "tiny" / "notes.txt").read_text() == "mine"


# --------------------------------------------------------------------------- checksums: stat trusted, bytes caught


class Conversions:
    def __init__(self):
        self.count = 0

    def __call__(self, staging):
        self.count += 1
        convert_tiny(staging)


@pytest.fixture
def own_tiny(tmp_path, monkeypatch):
    """``load_model("tiny-llama")`` as a model of the cache (the embedded model's code path,
    with the tiny model as its conversion); returns (folder, conversions)."""
    import interp.models.loading as loading
    from interp.models.converted import ensure_converted

    folder, convert = tmp_path / "cache" / "models" / "tiny-llama", Conversions()
    monkeypatch.setattr(loading, "own_model", lambda name: (ensure_converted(folder, convert, name), convert))
    return folder, convert


def flip_one_bit_keeping_time(path):
    """One bit of a weight in the middle of the file flipped (still finite), the time put back."""
    import os

    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def logits(bridge):
    import torch

    with torch.no_grad():
        return bridge(torch.tensor([[3, 7, 11, 5]]))


@pytest.mark.parametrize("then", ["processed file deleted", "another dtype asked for"])
def test_flipped_raw_weights_are_caught_not_checksummed_again(own_tiny, then, monkeypatch, caplog):
    import logging

    import torch

    import interp.models.manifest as manifest
    from interp.models import processed_weights_file
    from interp.models.store import verify

    monkeypatch.setattr(manifest, "ALWAYS_HASHED_BYTES", 0)  # as large as a real model's weights
    folder, convert = own_tiny
    fresh = logits(load_model("tiny-llama", device="cpu"))
    flip_one_bit_keeping_time(folder / "model.safetensors")
    dtype = "float32"
    if then == "processed file deleted":
        processed_weights_file(folder, torch.float32, torch.device("cpu")).unlink()
    else:
        dtype = "bfloat16"
    with caplog.at_level(logging.WARNING):
        bridge = load_model("tiny-llama", device="cpu", dtype=dtype)
    assert convert.count == 2 and "model.safetensors" in caplog.text and "checksum mismatch" in caplog.text
    verify(folder, full=True)
    if dtype == "float32":
        assert torch.equal(logits(bridge), fresh)


def test_large_files_with_their_stat_unchanged_are_not_hashed_again(own_tiny, monkeypatch):
    import interp.models.manifest as manifest

    monkeypatch.setattr(manifest, "ALWAYS_HASHED_BYTES", 0)  # the tiny model's files count as large
    load_model("tiny-llama", device="cpu")
    hashed = []
    real = manifest.sha256_of
    monkeypatch.setattr(manifest, "sha256_of", lambda path: hashed.append(path.name) or real(path))
    load_model("tiny-llama", device="cpu")
    assert hashed == []


@pytest.mark.parametrize("name", ["model.safetensors", "processed"])
def test_a_flipped_bit_under_a_restored_time_is_caught_by_the_stat(own_tiny, monkeypatch, name, caplog):
    """The change time a write sets cannot be put back: trusting the stat misses no such edit."""
    import logging

    import torch

    import interp.models.manifest as manifest
    from interp.models import processed_weights_file

    monkeypatch.setattr(manifest, "ALWAYS_HASHED_BYTES", 0)
    folder, convert = own_tiny
    fresh = logits(load_model("tiny-llama", device="cpu"))
    processed = processed_weights_file(folder, torch.float32, torch.device("cpu"))
    target = folder / name if name != "processed" else processed
    before = target.stat()
    flip_one_bit_keeping_time(target)
    assert target.stat().st_mtime_ns == before.st_mtime_ns and target.stat().st_size == before.st_size
    with caplog.at_level(logging.WARNING):
        bridge = load_model("tiny-llama", device="cpu")
    assert "checksum mismatch" in caplog.text and target.name in caplog.text
    assert torch.equal(logits(bridge), fresh)


def test_a_copied_cache_is_hashed_once_then_trusted(own_tiny, monkeypatch):
    import interp.models.manifest as manifest
    from interp.models.store import read_manifest

    monkeypatch.setattr(manifest, "ALWAYS_HASHED_BYTES", 0)
    folder, convert = own_tiny
    load_model("tiny-llama", device="cpu")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes())  # same bytes, new times (as a copy or a restore gives)
    hashed = []
    real = manifest.sha256_of
    monkeypatch.setattr(manifest, "sha256_of", lambda path: hashed.append(path.name) or real(path))
    load_model("tiny-llama", device="cpu")
    assert hashed.count("model.safetensors") == 1 and convert.count == 1
    assert read_manifest(folder)["model.safetensors"]["ctime_ns"] == weights.stat().st_ctime_ns
    hashed.clear()
    load_model("tiny-llama", device="cpu")
    assert hashed == []


def test_the_verify_command_hashes_every_file(own_tiny, capsys):
    from interp.cli.models import main

    folder, _ = own_tiny
    load_model("tiny-llama", device="cpu")
    assert main(["verify"]) == 0 and "tiny-llama: sound" in capsys.readouterr().out
    flip_one_bit_keeping_time(folder / "model.safetensors")
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert "tiny-llama: DAMAGED" in out and "model.safetensors" in out and "checksum mismatch" in out


# --------------------------------------------------------------------------- simultaneous loads, live and dead writers

SIMULTANEOUS = """
import os, sys, time
from pathlib import Path
from interp.models import tiny_hf_model
from interp.models.converted import ensure_converted
folder, marks, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
def convert(staging):
    (marks / f"converted-{os.getpid()}").touch()
    time.sleep(1.0)
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
(marks / f"ready-{os.getpid()}").touch()
while len(list(marks.glob("ready-*"))) < n:  # start together
    time.sleep(0.05)
ensure_converted(folder, convert, "tiny")
print("loaded", (folder / "config.json").exists())
"""


def test_simultaneous_first_loads_convert_once_and_leave_nothing(tmp_path):
    import os
    import subprocess
    import sys

    folder, marks, n = tmp_path / "cache" / "models" / "tiny", tmp_path / "marks", 2
    marks.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    children = [subprocess.Popen([sys.executable, "-c", SIMULTANEOUS, str(folder), str(marks), str(n)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    outputs = [child.communicate(timeout=300) for child in children]
    assert all(child.returncode == 0 and out.strip() == "loaded True" for child, (out, _) in zip(children, outputs)), outputs
    assert len(list(marks.glob("converted-*"))) == 1  # the others waited for it
    assert {p.name for p in folder.parent.iterdir()} == {"tiny", folder.resolve().name}


def test_a_live_writers_staging_is_left_alone(tmp_path):
    from interp.models.store import conversion_lock

    folder = tmp_path / "cache" / "models" / "tiny"
    publish_folder(folder, convert_tiny)
    staging = folder.parent / ".tiny.locked-live"
    staging.mkdir()
    with conversion_lock(folder):  # a writer converting again (as another process would hold it)
        import threading

        done = threading.Event()
        threading.Thread(target=lambda: (ensure_converted(folder, convert_tiny, "tiny"), done.set())).start()
        assert done.wait(60) and staging.exists()  # a sound folder is used without waiting, its staging kept
    ensure_converted(folder, convert_tiny, "tiny")
    assert not staging.exists()  # the lock is free: its owner is gone


@pytest.mark.parametrize("code", ["ENOSPC", "EROFS"])
def test_a_full_or_read_only_cache_is_one_line(tmp_path, code):
    import errno

    from interp.models.store import CacheWriteError

    folder = tmp_path / "cache" / "models" / "tiny"

    def full_disk(staging):
        (staging / "model.safetensors").write_bytes(b"half")
        raise OSError(getattr(errno, code), "no")

    with pytest.raises(CacheWriteError) as refused:
        ensure_converted(folder, full_disk, "tiny")
    assert len(str(refused.value).splitlines()) == 1 and "INTERP_CACHE" in str(refused.value)
    assert isinstance(refused.value, ValueError)  # scripts print it as one error line
    assert [p.name for p in folder.parent.iterdir()] == []  # the half-written copy is gone
