"""``python -m interp.cli.models verify`` trusts no manifest: every entry is a plain file of its
version folder with a size and checksum of the right form, the folder holds nothing unlisted, and
a malformed manifest is one ``DAMAGED`` line naming the entry, never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from interp.cli.models import main
from interp.models.manifest import MANIFEST, _record, check_listing, read_manifest
from interp.models.store import CacheDamaged, publish_folder, record_files


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cached_model(cache: Path, name: str = "m") -> Path:
    """A model of the cache as `publish_folder` writes it: a link to a version folder with a
    config, weights and a manifest recording both."""
    def write(folder):
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"weights" * 100)

    return publish_folder(cache / "models" / name, write)


def verify_output(capsys) -> tuple[int, str]:
    code = main(["verify"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out


def rewrite_manifest(folder: Path, files) -> None:
    (folder / MANIFEST).write_text(json.dumps({"files": files}))


def test_a_sound_cache_is_sound(own_cache, capsys):
    cached_model(own_cache)
    assert verify_output(capsys) == (0, "m: sound (2 files, 0.00 GB hashed)\n")


@pytest.mark.parametrize("how", ["relative", "absolute", "link"])
def test_an_entry_leading_out_of_the_folder_is_damaged_not_hashed(own_cache, tmp_path, capsys, how):
    """Before: the file outside was hashed and the model reported sound."""
    folder = cached_model(own_cache)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the cache's")
    files = read_manifest(folder)
    if how == "link":
        (folder / "config.json").unlink()
        (folder / "config.json").symlink_to(outside)
        files["config.json"] = _record(outside)
        expected = "config.json: a link where the cache wrote a file"
    else:
        entry = os.path.relpath(outside, folder.resolve()) if how == "relative" else str(outside)
        assert (folder / entry).resolve() == outside
        files[entry] = _record(outside)
        expected = f"entry {entry!r}: expected a plain file name inside the folder"
    rewrite_manifest(folder, files)
    code, out = verify_output(capsys)
    assert code == 1 and out.count("\n") == 1
    assert out.startswith("m: DAMAGED: ") and expected in out


@pytest.mark.parametrize("entry, record, expected", [
    ("config.json", {"sha256": "0" * 64}, "entry 'config.json': expected size, an integer >= 0, but it is missing"),
    ("config.json", {"size": "2", "sha256": "0" * 64}, "entry 'config.json': expected size, an integer >= 0, got '2'"),
    ("config.json", {"size": -1, "sha256": "0" * 64}, "expected size, an integer >= 0, got -1"),
    ("config.json", {"size": True, "sha256": "0" * 64}, "expected size, an integer >= 0, got True"),
    ("config.json", {"size": 2}, "entry 'config.json': expected sha256, 64 lower-case hexadecimal digits, but it is missing"),
    ("config.json", {"size": 2, "sha256": "abc"}, "expected sha256, 64 lower-case hexadecimal digits, got 'abc'"),
    ("config.json", {"size": 2, "sha256": ["0" * 64]}, "expected sha256, 64 lower-case hexadecimal digits, got ['000"),
    ("config.json", {"size": 2, "sha256": "0" * 64, "mtime_ns": "now"}, "expected mtime_ns, an integer, got 'now'"),
    ("config.json", 5, "entry 'config.json': expected an object with size and sha256, got 5"),
    ("config.json", None, "entry 'config.json': expected an object with size and sha256, got None"),
    (".", {"size": 2, "sha256": "0" * 64}, "entry '.': expected a plain file name inside the folder"),
    ("..", {"size": 2, "sha256": "0" * 64}, "entry '..': expected a plain file name inside the folder"),
    ("", {"size": 2, "sha256": "0" * 64}, "entry '': expected a plain file name inside the folder"),
    ("sub/config.json", {"size": 2, "sha256": "0" * 64}, "entry 'sub/config.json': expected a plain file name"),
    (MANIFEST, {"size": 2, "sha256": "0" * 64}, "entry 'manifest.json': expected a file other than the manifest"),
])
def test_a_malformed_entry_is_one_damaged_line_naming_it(own_cache, capsys, entry, record, expected):
    """Before: a traceback (KeyError, TypeError, IsADirectoryError) or a verdict on the wrong file."""
    folder = cached_model(own_cache)
    files = read_manifest(folder)
    files[entry] = record
    rewrite_manifest(folder, files)
    code, out = verify_output(capsys)
    assert code == 1 and out.count("\n") == 1
    assert out.startswith(f"m: DAMAGED: {own_cache / 'models' / 'm' / MANIFEST}: ") and expected in out


@pytest.mark.parametrize("manifest", ['{"files": []}', '[]', '{"entries": {}}', '{"files": {"a": 1'])
def test_a_manifest_of_the_wrong_shape_is_one_damaged_line(own_cache, capsys, manifest):
    folder = cached_model(own_cache)
    (folder / MANIFEST).write_text(manifest)
    code, out = verify_output(capsys)
    assert code == 1 and out.count("\n") == 1 and out.startswith("m: DAMAGED: ")
    assert "manifest" in out


def test_an_empty_manifest_beside_weights_is_not_sound(own_cache, capsys):
    """Before: ``{"files": {}}`` was ``sound (0 files)`` while the folder held the weights."""
    folder = cached_model(own_cache)
    rewrite_manifest(folder, {})
    code, out = verify_output(capsys)
    assert code == 1 and out.startswith("m: DAMAGED: ") and "records no file" in out
    assert "'config.json', 'model.safetensors'" in out


def test_an_unlisted_file_is_reported(own_cache, capsys):
    """Before: a file the manifest does not record was ignored (a loader may read it)."""
    folder = cached_model(own_cache)
    extra = folder / "model.safetensors.index.json"
    extra.write_text("{}")
    code, out = verify_output(capsys)
    assert code == 1 and out.count("\n") == 1
    assert "1 file the manifest does not record" in out and "'model.safetensors.index.json'" in out
    assert "was written minutes ago: if a load is recording it, verify again" in out  # a live load's new file
    os.utime(extra, (1e9, 1e9))
    code, out = verify_output(capsys)
    assert code == 1 and "1 file the manifest does not record" in out and "minutes ago" not in out
    (folder / "sub").mkdir()
    code, out = verify_output(capsys)
    assert code == 1 and "2 files the manifest does not record" in out and "'sub'" in out


def test_a_temporary_file_of_a_write_is_named_but_not_damage(own_cache, capsys):
    folder = cached_model(own_cache)
    (folder / ".processed-x.safetensors.ab12cd_9").write_bytes(b"half")  # atomic_path's name before its rename
    code, out = verify_output(capsys)
    assert code == 0 and out.startswith("m: sound (2 files") and ".processed-x.safetensors.ab12cd_9" in out


def test_the_library_refuses_what_the_command_refuses(tmp_path):
    (tmp_path / "w.txt").write_text("hi")
    record_files(tmp_path, ["w.txt"])
    assert check_listing(tmp_path) == []
    with pytest.raises(ValueError, match=r"record_files: '\.\./w\.txt': expected a plain file name"):
        record_files(tmp_path, ["../w.txt"])
    rewrite_manifest(tmp_path, {"../w.txt": _record(tmp_path / "w.txt")})
    with pytest.raises(CacheDamaged, match=r"entry '\.\./w\.txt': expected a plain file name inside the folder"):
        read_manifest(tmp_path)


def test_a_load_converts_a_model_with_a_malformed_manifest_again(own_cache, tmp_path, monkeypatch, caplog, capsys):
    """What the command's "the next load converts it again" promises, for an entry leading out."""
    import logging

    import interp.models.loading as loading
    from interp.models import load_model, tiny_hf_model
    from interp.models.converted import ensure_converted

    conversions = []

    def convert(staging):
        conversions.append(staging)
        model, tokenizer = tiny_hf_model("tiny-llama")
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)

    folder = own_cache / "models" / "tiny-llama"
    monkeypatch.setattr(loading, "own_model", lambda name: (ensure_converted(folder, convert, name), convert))
    load_model("tiny-llama", device="cpu")
    assert verify_output(capsys)[0] == 0  # every file a load writes is in the manifest
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    files = read_manifest(folder)
    files["../../../outside.txt"] = _record(outside)
    rewrite_manifest(folder, files)
    with caplog.at_level(logging.WARNING):
        load_model("tiny-llama", device="cpu")
    assert len(conversions) == 2 and "../../../outside.txt" in caplog.text
    assert verify_output(capsys)[0] == 0
