"""The model cache: converted models stored once, replaced atomically, checked before use.

Layout under [`cache_dir`][interp.models.store.cache_dir] (``$INTERP_CACHE``, default ``~/.cache/interp``)::

    models/<name>              a symbolic link to the current version folder
    models/.<name>.<random>/   config.json, model.safetensors, tokenizer files,
                               processed-*.safetensors, manifest.json

A new conversion is written into a fresh version folder and the link is switched with one
``rename``: a reader sees the old model or the new one, never none (so it never starts a second
conversion because the folder vanished for a moment).

``manifest.json`` records each file's SHA-256 and its stat (size, modification and change
times, inode) when it is written. [`verify`][interp.models.store.verify] re-hashes small files (config, tokenizer)
always and a large one only when its stat differs from the record, then records the new stat
once the checksum matches (``full=True`` re-hashes everything, ``python -m interp.cli.models
verify`` does so for the whole cache). Trusting an unchanged stat is sound against any change
made through the file system: every write, and every ``utime`` that puts a modification time
back, sets the change time (``ctime``) to now, and no system call sets it back; a copy or
restore of the cache is a new inode. What a stat cannot see (bits rotting on the disk, a device
written underneath the file system) is what the full check is for. Processes that add, drop or
refresh manifest entries at once take turns under an ``flock`` on the version folder, so none loses
another's entry.

A process killed mid-write leaves its staging folder or temporary file (``.<name>.<random>``)
beside the target; [`remove_stale_staging`][interp.models.store.remove_stale_staging] removes any process's leftovers once nothing
has written into them for `STALE_AFTER_S` seconds.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from interp.core.locking import TableInUseError, TableLock
from interp.core.tables import atomic_write_text

MANIFEST = "manifest.json"
_CHUNK = 1 << 22
ALWAYS_HASHED_BYTES = 64 << 20  # config and tokenizer files: hashing them costs milliseconds
STALE_AFTER_S = 600.0  # a writer that is alive touches its staging files far more often than this
LOCKED_MARK = "locked-"  # in the names of what a writer holding the conversion lock makes

logger = logging.getLogger(__name__)


class CachePathError(ValueError):
    """A cache path is taken by something the cache did not write (a file where a folder belongs)."""


class CacheWriteError(ValueError):
    """The cache's disk is full or read-only: nothing can be converted into it."""


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


class CacheDamaged(ValueError):
    """A cached file is missing, truncated or changed since it was written (a ``ValueError``, so
    that a script reports it in one line when converting again cannot heal it)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


def cache_dir() -> Path:
    """Where converted models are stored; ``$INTERP_CACHE`` overrides the default.

    >>> cache_dir().name in ("interp", Path(os.environ.get("INTERP_CACHE", "interp")).name)
    True
    """
    path = Path(os.environ.get("INTERP_CACHE", Path.home() / ".cache" / "interp")).expanduser()
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                setting = "INTERP_CACHE" if "INTERP_CACHE" in os.environ else "the cache folder"
                raise CachePathError(f"{setting}={path} cannot be used: {folder} is a file, not a folder")
            break
    return path


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


def read_manifest(folder: Path) -> dict[str, dict]:
    """The manifest of ``folder`` (file name -> size, time, checksum); [`CacheDamaged`][interp.models.store.CacheDamaged] when
    there is none.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> read_manifest(folder)["w.txt"]["size"]
    2
    """
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise CacheDamaged(path, "no manifest (the folder was not written by this version of interp)")
    try:
        return json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CacheDamaged(path, f"unreadable manifest ({err})") from None


def record_files(folder: Path, names: Iterable[str]) -> None:
    """Add (or refresh) the manifest entries of ``names`` in ``folder``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "w.txt").write_text("hi")
    >>> record_files(folder, ["w.txt"])
    >>> sorted(read_manifest(folder))
    ['w.txt']
    """
    folder = Path(folder)
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


def verify(folder: Path, names: Iterable[str] | None = None, full: bool = False) -> None:
    """Raise [`CacheDamaged`][interp.models.store.CacheDamaged] naming the first file of ``names`` (default: all recorded)
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
    interp.models.store.CacheDamaged: ...w.txt: contents changed since it was written...
    """
    folder = Path(folder)
    files = read_manifest(folder)
    refreshed: dict[str, dict] = {}
    for name in list(files) if names is None else names:
        path = folder / name
        if name not in files:
            raise CacheDamaged(path, "not recorded in the manifest")
        record = files[name]
        if not path.exists():
            raise CacheDamaged(path, "missing")
        stat = path.stat()
        if stat.st_size != record["size"]:
            raise CacheDamaged(path, f"size {stat.st_size} bytes, {record['size']} when written (truncated or rewritten)")
        unchanged = {key: record.get(key) for key in ("size", "mtime_ns", "ctime_ns", "inode")} == _stat_record(stat)
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


def is_version_folder(path: Path, target: Path) -> bool:
    """Whether ``path`` resolves to one of the cache's own version folders of ``target``
    (``.<name>.<random>`` beside the link): the only folders the cache ever deletes.

    >>> is_version_folder(Path("/c/models/.m.x1y2"), Path("/c/models/m")), is_version_folder(Path("/home/me"), Path("/c/models/m"))
    (True, False)
    """
    resolved, target = Path(path).resolve(), Path(target)
    return resolved.parent == target.parent.resolve() and resolved.name.startswith(f".{target.name}.")


def check_cache_entry(target: Path) -> None:
    """Refuse a cache entry that is not what the cache writes there: a file, a link to anything
    but one of its own version folders, or a folder without a manifest. The cache never
    follows, replaces or deletes such an entry.

    >>> check_cache_entry(Path("/nonexistent/models/smollm2-135m"))
    """
    target = Path(target)
    if target.is_symlink():
        if not is_version_folder(target, target):
            raise CachePathError(f"{target} is a link to {target.resolve()}, which is not a folder of the model cache; "
                                 f"interp neither uses nor deletes it: remove the link (rm {target}), then load again")
    elif target.exists() and not target.is_dir():
        raise CachePathError(f"{target} is a file where the cache keeps a model folder; "
                             f"move it away or delete it, then load again")
    elif target.is_dir() and not (target / MANIFEST).is_file():
        raise CachePathError(f"{target} is a folder the model cache did not write (it has no {MANIFEST}); "
                             f"interp neither uses nor deletes it: move it away, then load again")


def _newest_change(path: Path) -> float:
    """The last time anything in ``path`` was written (a folder's files included)."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, folders, files in os.walk(path):
            for name in (*folders, *files):
                try:
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
                except FileNotFoundError:
                    pass
    return newest


def remove_stale_staging(folder: Path, names: Iterable[str], min_age_s: float = STALE_AFTER_S,
                         keep: Path | None = None, owner_gone: bool = False) -> list[Path]:
    """Remove what killed writers left beside ``names`` in ``folder`` (``.<name>.<random>``:
    staging folders, temporary files, links), once untouched for ``min_age_s``; ``keep`` (the
    version folder a link points to) is never removed. With ``owner_gone`` (the caller holds the
    `conversion_lock`) what a locking writer made (``.<name>.locked-*``) goes at once.
    Returns what was removed.

    >>> remove_stale_staging(Path("/nonexistent"), ["model"])
    []
    """
    now, removed = time.time(), []
    keep = Path(keep).resolve() if keep is not None else None
    for name in names:
        for stale in Path(folder).glob(f".{name}.*"):
            try:
                age_needed = 0.0 if owner_gone and LOCKED_MARK in stale.name else min_age_s
                if (keep is not None and stale.resolve() == keep) or now - _newest_change(stale) < age_needed:
                    continue
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale)
                else:
                    stale.unlink()
                removed.append(stale)
            except FileNotFoundError:  # another process cleaned it first
                pass
    if removed:
        logger.info("removed %d stale leftover(s) of killed or concurrent writers in %s: %s", len(removed), folder,
                    ", ".join(p.name for p in removed))
    return removed


def conversion_lock(target: Path, wait: bool = True) -> TableLock:
    """The lock every writer of ``target`` holds from its staging folder's creation to its
    publication (``models/<name>.lock``, there only while held; the kernel drops the lock when
    its writer dies): a second writer waits for the first instead of converting beside it, and a
    free lock means that no staging folder beside ``target`` belongs to a live writer.

    >>> conversion_lock(Path("/c/models/smollm2-135m")).path.as_posix()
    '/c/models/smollm2-135m.lock'
    """
    return TableLock(Path(target), wait=wait)


def clear_leftovers(target: Path) -> list[Path]:
    """Remove the leftovers beside ``target`` (staging folders, orphaned versions, temporary links)
    at once when no writer holds its `conversion_lock` (what a writer that takes no lock,
    an older interp, left waits for `STALE_AFTER_S` of quiet). Returns what went.

    >>> clear_leftovers(Path("/nonexistent/models/m"))
    []
    """
    target = Path(target)
    if not target.parent.is_dir():
        return []
    lock = conversion_lock(target, wait=False)
    try:
        lock.acquire()
    except (TableInUseError, OSError):  # a live conversion, or a cache we may not write: leave it
        return []
    try:
        return remove_stale_staging(target.parent, [target.name], keep=target if target.exists() else None,
                                    owner_gone=True)
    finally:
        lock.release()


def publish_folder(target: Path, write: Callable[[Path], None], locked: bool = False) -> Path:
    """Fill a fresh version folder with ``write(folder)``, record every file in its manifest,
    then point the link ``target`` at it in one rename, holding `conversion_lock` (taken
    here unless ``locked``: the caller holds it). Returns ``target``.

    >>> import tempfile
    >>> target = publish_folder(Path(tempfile.mkdtemp()) / "model", lambda folder: (folder / "a.txt").write_text("x"))
    >>> (target / "a.txt").read_text(), sorted(read_manifest(target))
    ('x', ['a.txt'])
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not locked:
        with conversion_lock(target):
            return publish_folder(target, write, locked=True)
    check_cache_entry(target)
    # We hold the lock: what other locking writers left is a dead writer's.
    remove_stale_staging(target.parent, [target.name], keep=target if target.exists() else None, owner_gone=True)
    version = Path(tempfile.mkdtemp(prefix=f".{target.name}.{LOCKED_MARK}", dir=target.parent))
    link = target.parent / f".{target.name}.link-{version.name.rsplit('.', 1)[-1]}"
    previous = target.resolve() if target.is_symlink() else None
    try:
        write(version)
        record_files(version, sorted(p.name for p in version.iterdir() if p.is_file() and p.name != MANIFEST))
        os.chmod(version, 0o755)  # mkdtemp makes folders private; the cache is meant to be shared
        link.symlink_to(version.name)
        check_cache_entry(target)  # again: the entry may have changed while ``write`` ran
        if target.is_dir() and not target.is_symlink():  # a folder with a manifest: an older interp's
            shutil.rmtree(target)
        os.replace(link, target)
    except BaseException as err:
        shutil.rmtree(version, ignore_errors=True)
        link.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in _FULL:
            raise CacheWriteError(f"cannot write {target} into the cache ({os.strerror(err.errno)}): free space "
                                  f"under {target.parent} or point INTERP_CACHE at another disk") from None
        raise
    # Only ever one of our own version folders: a link swapped in meanwhile can point anywhere.
    if previous is not None and previous != version.resolve() and is_version_folder(previous, target):
        shutil.rmtree(previous, ignore_errors=True)
    return target
