"""The model cache heals itself: a damaged converted model is converted again, a damaged
processed-weight file is rebuilt, an unwritable one is skipped, and non-finite weights are
refused with the file named. A tiny model stands in for the GGUF conversion."""

from __future__ import annotations

import json
import logging
import os
import struct

import pytest
import torch

from interp.models import bridge as tl
from interp.models import CacheDamaged, bridge_from_hf, load_hf_model, processed_weights_file, tiny_hf_model
from interp.models.converted import load_converted
from interp.models.store import MANIFEST, publish_folder, read_manifest, record_files, verify

CPU = torch.device("cpu")


def convert_tiny(folder):
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


class Conversions:
    """Counts conversions, so a test sees whether the cache was rebuilt."""

    def __init__(self):
        self.count = 0

    def __call__(self, folder):
        self.count += 1
        convert_tiny(folder)


@pytest.fixture
def converted(tmp_path):
    folder = tmp_path / "models" / "tiny"
    convert = Conversions()
    load_converted(folder, torch.float32, convert, "tiny")
    assert convert.count == 1 and folder.is_symlink() and (folder / MANIFEST).exists()
    return folder, convert


def reference_logits():
    model, _ = tiny_hf_model("tiny-llama")
    with torch.no_grad():
        return model(torch.tensor([[3, 5, 7]])).logits


def loaded_logits(model):
    with torch.no_grad():
        return model(torch.tensor([[3, 5, 7]])).logits


def test_a_sound_cache_is_not_converted_again(converted):
    folder, convert = converted
    model, tokenizer = load_converted(folder, torch.float32, convert, "tiny")
    assert convert.count == 1 and torch.equal(loaded_logits(model), reference_logits())


def truncate(path, keep=100):
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize("damage", ["truncated weights", "deleted tokenizer", "changed bytes", "no manifest"])
def test_a_damaged_conversion_is_converted_again(converted, damage, caplog):
    folder, convert = converted
    weights = folder / "model.safetensors"
    if damage == "truncated weights":
        truncate(weights)
    elif damage == "deleted tokenizer":
        (folder / "tokenizer.json").unlink()
    elif damage == "changed bytes":
        data = bytearray(weights.read_bytes())
        data[-64:] = bytes(64)
        weights.write_bytes(bytes(data))
    else:
        (folder / MANIFEST).unlink()
    with caplog.at_level(logging.WARNING):
        model, tokenizer = load_converted(folder, torch.float32, convert, "tiny")
    assert convert.count == 2 and torch.equal(loaded_logits(model), reference_logits())
    assert len(caplog.records) == 1 and "converting it again" in caplog.records[0].getMessage()
    verify(folder, full=True)  # the new conversion is recorded and sound


def write_nan_into_first_weight(path, record=False):
    """A NaN in the first float32 weight of a safetensors file, its size and time unchanged; with
    ``record`` the manifest takes the NaN file as written, so that only the finite check can see it."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    name = next(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")
    start = 8 + header_len + header[name]["data_offsets"][0]
    data[start : start + 4] = struct.pack("<f", float("nan"))
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    if record:
        record_files(path.parent.resolve(), [path.name])


def test_non_finite_weights_are_refused_and_healed(converted, caplog):
    folder, convert = converted
    write_nan_into_first_weight(folder / "model.safetensors", record=True)
    with caplog.at_level(logging.WARNING):
        model, _ = load_converted(folder, torch.float32, convert, "tiny")
    assert convert.count == 2 and "NaN" in caplog.text and torch.isfinite(loaded_logits(model)).all()


def test_a_source_that_converts_to_nan_is_refused_with_its_name(tmp_path):
    def bad(folder):
        convert_tiny(folder)
        write_nan_into_first_weight(folder / "model.safetensors")

    with pytest.raises(CacheDamaged, match="NaN or infinite.*its source is damaged"):
        load_converted(tmp_path / "models" / "bad", torch.float32, bad, "bad source")


def test_publishing_replaces_in_one_rename(tmp_path):
    target = tmp_path / "m"
    publish_folder(target, lambda f: (f / "a.txt").write_text("one"))
    first = target.resolve()
    publish_folder(target, lambda f: (f / "a.txt").write_text("two"))
    assert (target / "a.txt").read_text() == "two" and not first.exists()
    assert set(read_manifest(target)) == {"a.txt"}

    def fail_halfway(folder):
        (folder / "a.txt").write_text("three")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):  # a failed write leaves the published version alone
        publish_folder(target, fail_halfway)
    assert (target / "a.txt").read_text() == "two"
    assert {p.name for p in tmp_path.iterdir()} == {"m", target.resolve().name}  # nothing half-written left


# --------------------------------------------------------------------------- processed weights


def processed_bridge(folder):
    return bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", CPU, processed_cache=folder)


@pytest.mark.parametrize("damage", ["truncated", "changed bytes", "another model's file"])
def test_a_damaged_processed_file_is_rebuilt(tmp_path, damage, caplog):
    fresh = processed_bridge(tmp_path)
    stored = processed_weights_file(tmp_path, torch.float32, CPU)
    if damage == "truncated":
        truncate(stored)
    elif damage == "changed bytes":
        data = bytearray(stored.read_bytes())
        data[-16:] = bytes(16)
        stored.write_bytes(bytes(data))
    else:  # a llama's processed weights under the gpt2's name, recorded as sound
        llama = bridge_from_hf(*load_hf_model("tiny-llama"), "tiny-llama", CPU, processed_cache=tmp_path / "llama")
        stored.write_bytes(processed_weights_file(tmp_path / "llama", torch.float32, CPU).read_bytes())
        record_files(tmp_path, [stored.name])
        assert tl.weights_processed(llama)
    with caplog.at_level(logging.WARNING):
        healed = processed_bridge(tmp_path)
    assert "processing the raw weights again" in caplog.text
    tokens = torch.tensor([[3, 7, 11, 5]])
    with torch.no_grad():
        assert torch.equal(healed(tokens), fresh(tokens))
    verify(tmp_path, [stored.name], full=True)  # rebuilt and recorded again


def test_an_unwritable_processed_file_only_warns(tmp_path, monkeypatch, caplog):
    import interp.models.processed as processed

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(processed, "save_file", no_space)
    with caplog.at_level(logging.WARNING):
        bridge = processed_bridge(tmp_path)
    assert tl.weights_processed(bridge) and "could not write the processed-weight cache" in caplog.text
    assert not processed_weights_file(tmp_path, torch.float32, CPU).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".processed")]  # no temporary file left


def test_verifying_while_another_process_records_a_file_keeps_its_entry(tmp_path, monkeypatch):
    import interp.models.manifest as manifest

    for name in ("a.bin", "b.bin"):
        (tmp_path / name).write_bytes(name.encode() * 100)
    record_files(tmp_path, ["a.bin", "b.bin"])
    os.utime(tmp_path / "a.bin", ns=(1, 1))  # same bytes under a new stat: verify refreshes its entry
    hash_file, recorded = manifest.sha256_of, []

    def hash_while_another_writer_records(path):
        if not recorded:  # a load processing weights writes its file meanwhile
            recorded.append((tmp_path / "c.bin").write_bytes(b"c"))
            record_files(tmp_path, ["c.bin"])
        return hash_file(path)

    monkeypatch.setattr(manifest, "sha256_of", hash_while_another_writer_records)
    verify(tmp_path)
    files = read_manifest(tmp_path)
    assert set(files) == {"a.bin", "b.bin", "c.bin"}
    assert files["a.bin"]["mtime_ns"] == 1  # and its own refresh landed too


def test_a_folder_the_file_system_cannot_lock_still_records_its_files(tmp_path, monkeypatch):
    import errno

    import interp.models.manifest as manifest

    def no_folder_locks(fd, operation):  # NFS: flock is a POSIX lock, refused on a read-only descriptor
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    monkeypatch.setattr(manifest.fcntl, "flock", no_folder_locks)
    (tmp_path / "a.bin").write_bytes(b"a")
    record_files(tmp_path, ["a.bin"])
    verify(tmp_path, full=True)
    assert set(read_manifest(tmp_path)) == {"a.bin"}


def test_recording_nothing_still_writes_a_manifest(tmp_path):
    record_files(tmp_path, [])  # a version folder with no files is still the cache's own
    assert read_manifest(tmp_path) == {}
