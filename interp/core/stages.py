"""Finished stages of one long computation, kept on disk so a stopped run resumes from them.

``<stem>.stages.pt`` holds the digest of the computation's configuration and one entry per finished stage
(tensors, numbers, strings, lists and dicts of them: loaded with ``weights_only=True``, so the file can hold no
code). A run with another configuration starts afresh. Each ``put`` rewrites the file atomically, so a kill
loses at most the stage in progress.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from interp.core.journal import config_digest
from interp.core.tables import atomic_write_bytes

logger = logging.getLogger(__name__)


class StageStore:
    """The stages of the computation configured by ``config``, in ``path``.

    >>> import tempfile, torch
    >>> path = Path(tempfile.mkdtemp()) / "circuit.stages.pt"
    >>> StageStore(path, {"n": 8}).put("scores", torch.ones(3))
    >>> StageStore(path, {"n": 8}).get("scores").tolist(), StageStore(path, {"n": 16}).get("scores")
    ([1.0, 1.0, 1.0], None)
    """

    def __init__(self, path: str | Path, config: Mapping) -> None:
        self.path = Path(path)
        self.digest = config_digest(dict(config))
        self.stages: dict[str, Any] = {}
        if self.path.exists():
            try:
                saved = torch.load(self.path, weights_only=True)
            except Exception as err:  # a cut or foreign file: start afresh, said once
                logger.warning("%s: unreadable stages (%s); starting afresh", self.path, err)
                saved = {}
            if isinstance(saved, dict) and saved.get("digest") == self.digest and isinstance(saved.get("stages"), dict):
                self.stages = saved["stages"]
            elif saved:
                logger.warning("%s: stages of another configuration; starting afresh", self.path)

    def get(self, name: str) -> Any | None:
        return self.stages.get(name)

    def put(self, name: str, value: Any) -> None:
        self.stages[name] = value
        buffer = io.BytesIO()
        torch.save({"digest": self.digest, "stages": self.stages}, buffer)
        atomic_write_bytes(self.path, buffer.getvalue())

    def remove(self) -> None:
        """Forget the stages (the computation finished and its results are written)."""
        self.path.unlink(missing_ok=True)
