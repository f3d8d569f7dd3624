"""One writer per results table: a lock file held for the whole run.

The lock is an ``flock`` on ``<stem>.lock``, so the kernel drops it when its process dies (even
under ``kill -9``): the lock file a dead run leaves behind is taken over by the next run, and a
live holder is refused with one line naming it. The file records the holder (pid, host, start
time, command) only so that the refusal can say who it is."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from interp.core.tables import stem_file

logger = logging.getLogger(__name__)


class TableInUseError(RuntimeError):
    """Another live process holds the lock of a results table."""


def _holder_text(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        holder = json.loads(os.read(fd, 65536).decode() or "{}")
    except (OSError, ValueError):
        holder = {}
    if not holder:
        return "another run"
    argv = [str(a) for a in holder.get("argv", [])]
    command = " ".join([Path(argv[0]).name, *argv[1:]] if argv else [])
    command = command if len(command) <= 240 else command[:237] + "..."
    return f"another run (pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: {command})"


class TableLock:
    """Exclusive lock of the results table ``stem`` (``<stem>.lock``); a context manager.

    >>> import tempfile
    >>> stem = Path(tempfile.mkdtemp()) / "ablation_tiny-llama"
    >>> with TableLock(stem):
    ...     pass  # compute and write the table; a second run on the same stem is refused meanwhile
    """

    def __init__(self, stem: str | Path, wait: bool = False):
        self.stem, self.wait = Path(stem), wait  # wait: block until the holder is done, instead of refusing
        self.path = stem_file(self.stem, "lock")
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "TableLock":
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder_text(fd)
                if self.wait:
                    logger.info("%s: waiting for %s to finish", self.stem, holder)
                    fcntl.flock(fd, fcntl.LOCK_EX)
                else:
                    os.close(fd)
                    raise TableInUseError(f"{self.stem} is being written by {holder}; wait for it to finish "
                                          f"or write elsewhere with --out") from None
            # A holder that finished unlinks the file after we opened it: then we hold a lock on a
            # file nobody else will see, and must lock the new one instead.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        stale = _holder_text(fd)
        if stale != "another run":
            logger.warning("%s: taking over the lock left by %s, which is no longer running", self.path, stale)
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv}
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, json.dumps(record).encode())
        except OSError:  # a full disk: leave no empty lock file behind
            self.path.unlink(missing_ok=True)
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still held, so no one locks a file about to vanish
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "TableLock":
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __del__(self) -> None:
        self.release()
