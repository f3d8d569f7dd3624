"""The manifest of a cache folder: each file's SHA-256 and stat, written beside the files.

``manifest.json`` records each file's SHA-256 and its stat (size, modification and change
times, inode) when it is written. [`verify`][interp.models.manifest.verify] re-hashes small files (config, tokenizer)
always and a large one only when its stat differs from the record, then records the new stat
once the checksum matches (``full=True`` re-hashes everything, ``python -m interp.cli.models
verify`` does so for the whole cache). Trusting an unchanged stat is sound against any change
made through the file system: every write, and every ``utime`` that puts a modification time
back, sets the change time (``ctime``) to now, and no system call sets it back; a copy or
restore of the cache is a new inode. What a stat cannot see (bits rotting on the disk, a device
written underneath the file system) is what the full check is for. Processes that add, drop or
refresh manifest entries at once take turns under an ``flock`` on the folder, so none loses
another's entry.

The manifest itself is checked before anything it names is read: every entry is a plain file
name inside the folder (no ``/``, not ``.`` or ``..``) with an integer size and a 64-digit
checksum, and a listed file that is a link (which could point anywhere) is refused, so a
manifest can only ever lead to the folder's own files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import stat as stat_mode
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from interp.core.tables import atomic_write_text

MANIFEST = "manifest.json"
_CHUNK = 1 << 22
ALWAYS_HASHED_BYTES = 64 << 20  # config and tokenizer files: hashing them costs milliseconds
_SHA256 = re.compile(r"[0-9a-f]{64}")
_STAT_KEYS = ("mtime_ns", "ctime_ns", "inode")
RECENT_S = 600.0  # an unlisted file younger than this may be one a live load is still hashing
# What `interp.core.tables.atomic_path` writes before its rename: ``.<name>.`` and mkstemp's 8 characters.
_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}")

logger = logging.getLogger(__name__)


class CacheDamaged(ValueError):
    """A cached file is missing, truncated or changed since it was written (a ``ValueError``, so
    that a script reports it in one line when converting again cannot heal it)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read in chunks (hex).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "w.txt"
    >>> _ = path.write_text("hi")
    >>> sha256_of(path)[:12]
    '8f434346648f'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stat_record(stat: os.stat_result) -> dict:
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns, "inode": stat.st_ino}


def _record(path: Path) -> dict:
    before = path.stat()
    digest = sha256_of(path)
    after = path.stat()
    record = {**_stat_record(before), "sha256": digest}
    if _stat_record(after) != _stat_record(before):  # written while hashing: never trust its stat
        record.pop("ctime_ns")
    return record


def _write_manifest(folder: Path, files: dict[str, dict]) -> None:
    atomic_write_text(folder / MANIFEST, json.dumps({"files": files}, indent=1, sort_keys=True))


@contextlib.contextmanager
def _manifest_update(folder: Path) -> Iterator[dict[str, dict]]:
    """The manifest's entries to change in place, read and written back under an ``flock`` on the
    folder itself: two processes that record, forget or refresh files at once (a load processing
    weights while another verifies) each keep the other's entries. The folder is locked rather than
    a lock file so that the version folder holds nothing unrecorded and a read-only cache still
    locks. Where the file system cannot lock a folder (NFS emulates ``flock`` with POSIX locks, which
    refuse a write lock on a read-only descriptor) the update goes on unlocked, as a single writer's would."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:
            logger.debug("%s: cannot lock the folder (%s); updating its manifest unlocked", folder, err)
        before = None  # no manifest yet (or an unreadable one): written whatever the change
        try:
            files = read_manifest(folder)
            before = json.dumps(files, sort_keys=True)
        except CacheDamaged:
            files = {}
        yield files
        if before is None or json.dumps(files, sort_keys=True) != before:
            _write_manifest(folder, files)
    finally:
        os.close(fd)  # drops the lock


def _shown(value: object, limit: int = 160) -> str:
    text = repr(value)  # one line, whatever the value holds
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def _plain_name_problem(name: str) -> str | None:
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return "expected a plain file name inside the folder (no '/', not '.' or '..')"
    if name == MANIFEST:
        return "expected a file other than the manifest itself"
    return None


def _entry_problem(name: str, record: object) -> str | None:
    """What is wrong with one manifest entry (None when it is well-formed)."""
    if problem := _plain_name_problem(name):
        return problem
    if not isinstance(record, dict):
        return f"expected an object with size and sha256, got {_shown(record)}"
    size, checksum = record.get("size"), record.get("sha256")
    if type(size) is not int or size < 0:
        return f"expected size, an integer >= 0, {_got(record, 'size')}"
    if not isinstance(checksum, str) or not _SHA256.fullmatch(checksum):
        return f"expected sha256, 64 lower-case hexadecimal digits, {_got(record, 'sha256')}"
    for key in _STAT_KEYS:
        if key in record and type(record[key]) is not int:
            return f"expected {key}, an integer, {_got(record, key)}"
    return None


def _got(record: dict, key: str) -> str:
    return f"got {_shown(record[key])}" if key in record else "but it is missing"


def read_manifest(folder: Path) -> dict[str, dict]:
    """The manifest of ``folder`` (file name -> size, time, checksum); [`CacheDamaged`][interp.models.manifest.CacheDamaged] when
    there is none, or when it is malformed (naming the first bad entry and what was expected).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> read_manifest(folder)["w.txt"]["size"]
    2
    >>> _ = (folder / MANIFEST).write_text('{"files": {"../w.txt": {"size": 2}}}')
    >>> read_manifest(folder)
    Traceback (most recent call last):
    ...
    interp.models.manifest.CacheDamaged: ...manifest.json: entry '../w.txt': expected a plain file name inside the folder ...
    """
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise CacheDamaged(path, "no manifest (the folder was not written by this version of interp)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise CacheDamaged(path, f"unreadable manifest ({err})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise CacheDamaged(path, 'malformed manifest: expected {"files": {file name: entry}}')
    for name, record in files.items():
        if problem := _entry_problem(name, record):
            raise CacheDamaged(path, f"entry {_shown(name)}: {problem}")
    return files


def record_files(folder: Path, names: Iterable[str]) -> None:
    """Add (or refresh) the manifest entries of ``names`` in ``folder``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> sorted(read_manifest(folder))
    ['w.txt']
    """
    folder, names = Path(folder), list(names)
    for name in names:
        if problem := _plain_name_problem(name):
            raise ValueError(f"record_files: {name!r}: {problem}")
    records = {name: _record(folder / name) for name in names}  # hashed before locking: hashing takes seconds
    with _manifest_update(folder) as files:
        files.update(records)


def forget_file(folder: Path, name: str) -> None:
    """Delete a cached file and its manifest entry (a damaged speed-up file, say).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> forget_file(folder, "w.txt")
    >>> read_manifest(folder), (folder / "w.txt").exists()
    ({}, False)
    """
    folder = Path(folder)
    (folder / name).unlink(missing_ok=True)
    try:
        read_manifest(folder)
    except CacheDamaged:  # none, or unreadable: left as it is for the next load to judge
        return
    with _manifest_update(folder) as files:
        files.pop(name, None)


def _listed_file_stat(path: Path) -> os.stat_result:
    """The stat of a listed file, which must be a regular file in the folder (not a link)."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        raise CacheDamaged(path, "missing") from None
    if stat_mode.S_ISLNK(found.st_mode):
        raise CacheDamaged(path, "a link where the cache wrote a file (it may point outside the folder)")
    if not stat_mode.S_ISREG(found.st_mode):
        raise CacheDamaged(path, "not a regular file, where the cache wrote one")
    return found


def verify(folder: Path, names: Iterable[str] | None = None, full: bool = False) -> None:
    """Raise [`CacheDamaged`][interp.models.manifest.CacheDamaged] naming the first file of ``names`` (default: all recorded)
    that is missing or differs from its manifest entry. A large file whose stat (size, times,
    inode) is as recorded is trusted without hashing unless ``full``; one whose stat changed is
    hashed, and its new stat recorded when the checksum still matches.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> _ = (folder / "w.txt").write_text("ho")
    >>> verify(folder, full=True)
    Traceback (most recent call last):
    ...
    interp.models.manifest.CacheDamaged: ...w.txt: contents changed since it was written...
    """
    folder = Path(folder)
    files = read_manifest(folder)
    refreshed: dict[str, dict] = {}
    for name in list(files) if names is None else names:
        path = folder / name
        if name not in files:
            raise CacheDamaged(path, "not recorded in the manifest")
        record = files[name]
        stat = _listed_file_stat(path)
        if stat.st_size != record["size"]:
            raise CacheDamaged(path, f"size {stat.st_size} bytes, {record['size']} when written (truncated or rewritten)")
        unchanged = {key: record.get(key) for key in ("size", *_STAT_KEYS)} == _stat_record(stat)
        if full or not unchanged or stat.st_size <= ALWAYS_HASHED_BYTES:
            fresh = _record(path)
            if fresh["sha256"] != record["sha256"]:
                raise CacheDamaged(path, "contents changed since it was written (checksum mismatch)")
            if fresh != record:
                refreshed[name] = fresh
    if refreshed:  # the same bytes under a new stat (a copied cache, an older manifest): trusted from now on
        try:
            with _manifest_update(folder) as latest:
                # only entries nobody rewrote meanwhile: a newer record of the same name wins
                latest.update({name: fresh for name, fresh in refreshed.items()
                               if latest.get(name, {}).get("sha256") == fresh["sha256"]})
        except OSError:  # a read-only cache is checked in full each time instead
            pass


def check_listing(folder: Path) -> list[str]:
    """Raise [`CacheDamaged`][interp.models.manifest.CacheDamaged] when ``folder`` holds a file its manifest does not
    record (nothing the cache writes is left out of it, and a loader may read any file there) or
    the manifest records nothing; return the temporary files of writes in progress or killed
    (``.<name>.<random>``), which nothing reads.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> check_listing(folder)
    []
    >>> _ = (folder / "extra.txt").write_text("?")
    >>> check_listing(folder)
    Traceback (most recent call last):
    ...
    interp.models.manifest.CacheDamaged: ...: 1 file the manifest does not record (the cache did not write it): 'extra.txt'...
    """
    folder = Path(folder)
    files = read_manifest(folder)
    unlisted, temporaries = [], []
    for entry in sorted(os.listdir(folder)):
        if entry != MANIFEST and entry not in files:
            (temporaries if _TEMPORARY.fullmatch(entry) else unlisted).append(entry)
    shown = ", ".join(_shown(name) for name in unlisted[:5]) + (f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else "")
    if not files:
        raise CacheDamaged(folder / MANIFEST, "records no file, where a model folder holds at least its config and "
                                              "weights" + (f" (the folder holds {shown})" if unlisted else ""))
    if unlisted:
        many = len(unlisted) > 1
        # A load records a new processed file only after hashing it, seconds after writing it.
        recent = [name for name in unlisted if time.time() - (folder / name).lstat().st_mtime < RECENT_S]
        raise CacheDamaged(folder, f"{len(unlisted)} file{'s' * many} the manifest does not record "
                                   f"(the cache did not write {'them' if many else 'it'}): {shown}"
                                   + (f"; {_shown(recent[0])} was written minutes ago: if a load is recording it, "
                                      f"verify again once the load ends" if recent else ""))
    return temporaries
