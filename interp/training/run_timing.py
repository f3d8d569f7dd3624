"""Wall and CPU time of a training run across kills and resumes.

A resumed run only sees its own part; the time the killed run spent reaching the checkpoint it
resumes from is kept beside that checkpoint (``timing.json``, written atomically whenever a
checkpoint is), so the totals count every step once, whichever process trained it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.tables import atomic_write_text

TIMING_NAME = "timing.json"


@dataclass
class RunTimer:
    """Totals for a run whose checkpoints go to ``run_dir`` (None: nothing kept, one process only).

    >>> timer = RunTimer(run_dir)  # doctest: +SKIP
    >>> result = train(..., on_step=timer.on_step(checkpoint_every=500, last_step=2000))  # doctest: +SKIP
    >>> timer.finish(result.final_step)  # doctest: +SKIP
    {'seconds': ..., 'cpu_seconds': ..., 'timed_from_step': 0}
    """

    run_dir: Path | None
    started: float = field(init=False)
    cpu_started: float = field(init=False)
    base: tuple[float, float] | None = None  # (wall, cpu) of earlier processes, once known
    timed_from: int = 0

    def __post_init__(self) -> None:
        self.started, self.cpu_started = time.time(), time.process_time()

    def _stored(self) -> dict:
        try:
            stored = json.loads((Path(self.run_dir) / TIMING_NAME).read_text())
            return stored if isinstance(stored, dict) else {}
        except (OSError, ValueError, TypeError):
            return {}

    def _resume_from(self, step: int) -> None:
        """Take over the earlier processes' time when they stopped exactly at ``step``."""
        stored = self._stored() if self.run_dir is not None else {}
        if step == 0:
            self.base = (0.0, 0.0)
        elif stored.get("step") == step and isinstance(stored.get("seconds"), (int, float)):
            self.base = (float(stored["seconds"]), float(stored["cpu_seconds"]))
            self.timed_from = int(stored["timed_from_step"])
        else:  # no record of the earlier part: say from which step the totals count
            self.base, self.timed_from = (0.0, 0.0), step

    def totals(self) -> dict:
        wall, cpu = self.base or (0.0, 0.0)
        return {"seconds": round(wall + time.time() - self.started, 1),
                "cpu_seconds": round(cpu + time.process_time() - self.cpu_started, 1),
                "timed_from_step": self.timed_from}

    def _save(self, step: int) -> None:
        if self.run_dir is not None:
            atomic_write_text(Path(self.run_dir) / TIMING_NAME, json.dumps({"step": step, **self.totals()}))

    def on_step(self, checkpoint_every: int, last_step: int):
        """A ``train(on_step=...)`` callback saving the totals whenever a checkpoint was saved."""

        def record(step: int, loss: float) -> None:
            if self.base is None:
                self._resume_from(step - 1)
            if step % checkpoint_every == 0 or step == last_step:
                self._save(step)

        return record

    def finish(self, final_step: int) -> dict:
        """The totals once training returned (a run found already finished keeps its record)."""
        if self.base is None:  # no step trained here: the run was finished before
            stored = self._stored() if self.run_dir is not None else {}
            if stored.get("step") == final_step and {"seconds", "cpu_seconds", "timed_from_step"} <= set(stored):
                return {k: stored[k] for k in ("seconds", "cpu_seconds", "timed_from_step")}
            self._resume_from(final_step)
        self._save(final_step)
        return self.totals()
