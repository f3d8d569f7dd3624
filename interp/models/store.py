"""The model cache: converted models stored once, replaced atomically, checked before use.

Layout under [`cache_dir`][interp.models.store.cache_dir] (``$INTERP_CACHE``, default ``~/.cache/interp``)::

    models/<name>              a symbolic link to the current version folder
    models/.<name>.<random>/   config.json, model.safetensors, tokenizer files,
                               processed-*.safetensors, manifest.json

A new conversion is written into a fresh version folder and the link is switched with one
``rename``: a reader sees the old model or the new one, never none (so it never starts a second
conversion because the folder vanished for a moment).

``manifest.json`` records each file's size, times and SHA-256 when it is written
([`interp.models.manifest`][interp.models.manifest], re-exported here): loads check a folder against it before use, and
``python -m interp.cli.models verify`` hashes the whole cache.

A process killed mid-write leaves its staging folder or temporary file (``.<name>.<random>``)
beside the target; [`remove_stale_staging`][interp.models.store.remove_stale_staging] removes any process's leftovers once nothing
has written into them for `STALE_AFTER_S` seconds.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from interp.core.locking import TableInUseError, TableLock
# The manifest's names, re-exported: the cache's callers import them from here.
from interp.models.manifest import ALWAYS_HASHED_BYTES, MANIFEST, CacheDamaged, check_listing  # noqa: F401
from interp.models.manifest import forget_file, read_manifest, record_files, sha256_of, verify  # noqa: F401

STALE_AFTER_S = 600.0  # a writer that is alive touches its staging files far more often than this
LOCKED_MARK = "locked-"  # in the names of what a writer holding the conversion lock makes

logger = logging.getLogger(__name__)


class CachePathError(ValueError):
    """A cache path is taken by something the cache did not write (a file where a folder belongs)."""


class CacheWriteError(ValueError):
    """The cache's disk is full or read-only: nothing can be converted into it."""


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


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
