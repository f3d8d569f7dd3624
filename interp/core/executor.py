"""Where a study's cells run: one after the other in this process (``serial``, the default) or as
tasks on a pool of Ray actors (``ray``: the cores of a machine, the GPUs of a node, a cluster).

A study hands the executor a *cell function* ``cell(model, shared, item) -> result`` and its items.
``model`` is built once per worker from a `ModelSource` (kept by the worker across cells and
studies, keyed by ``ModelSource.key``); ``shared`` is the study's read-only data, shipped once per
worker (a cell may memoise per-worker work on it, such as clean runs). Results come back to the
driver as they finish; the driver alone writes journals and tables, so locking and resuming work
as in a serial run. A cell must depend only on its item and ``shared`` (seeds per cell, never per
worker) so that every executor gives the same table.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from interp.core.ray_connect import auth_error, check_address, is_auth_failure, without_token_notice

logger = logging.getLogger(__name__)

EXECUTORS = ("serial", "ray")
INSTALL_HINT = "pip install -e '.[cluster]'"
# An actor whose process dies is restarted and its unfinished cells are run again this many times.
RETRIES = 3


@dataclass(frozen=True)
class ModelSource:
    """How a worker loads the model its cells run on: ``load()`` once per worker, cached by ``key``.

    ``load`` must pickle (a module-level function or a ``functools.partial`` of one).

    >>> source = ModelSource("tiny-llama/cpu", lambda: "a model")
    >>> source.load()
    'a model'
    """

    key: str
    load: Callable[[], Any]


NO_MODEL = ModelSource("none", lambda: None)

Cell = Callable[[Any, Any, Any], Any]


@runtime_checkable
class Executor(Protocol):
    """Runs ``cell(model, shared, item)`` for every item; yields ``(index, result)`` as cells finish."""

    name: str
    workers: int

    def map(self, cell: Cell, items: Sequence[Any], model: ModelSource = NO_MODEL, shared: Any = None,
            local_model: Any = None) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...


@dataclass
class SerialExecutor:
    """Every cell in this process, in order: the toolkit's default.

    ``local_model`` (the model the driver already holds) is used as is; otherwise the source is
    loaded once and kept.

    >>> executor = SerialExecutor()
    >>> list(executor.map(lambda model, shared, item: shared * item, [1, 2, 3], shared=10))
    [(0, 10), (1, 20), (2, 30)]
    """

    name: str = "serial"
    workers: int = 1
    _models: dict[str, Any] = field(default_factory=dict, repr=False)

    def map(self, cell: Cell, items: Sequence[Any], model: ModelSource = NO_MODEL, shared: Any = None,
            local_model: Any = None) -> Iterator[tuple[int, Any]]:
        if local_model is None and items:
            local_model = self._models.get(model.key)
            if local_model is None:
                local_model = self._models[model.key] = model.load()
        for index, item in enumerate(items):
            yield index, cell(local_model, shared, item)

    def close(self) -> None:
        self._models.clear()

    def __enter__(self) -> "SerialExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



class _Worker:
    """A Ray actor: its models by key, the studies' shared data by object id, torch pinned to its
    share of the cores."""

    def __init__(self, threads: int):
        import torch

        # Without this every worker starts as many threads as the machine has cores: N workers on
        # N cores would run N x N threads and lose to the serial run.
        torch.set_num_threads(threads)
        self.models: dict[str, Any] = {}
        self.shared: dict[str, Any] = {}

    def run(self, cell: Cell, model: ModelSource, shared_ref: list, item: Any) -> Any:
        import ray

        if model.key not in self.models:
            self.models[model.key] = model.load()
        ref = shared_ref[0]  # wrapped in a list so that Ray hands over the reference, not a fresh copy per cell
        key = ref.hex()
        if key not in self.shared:
            self.shared = {key: ray.get(ref)}  # one study's data at a time
        return cell(self.models[model.key], self.shared[key], item)

    def pid(self) -> int:
        return os.getpid()


def import_ray():
    """The ``ray`` module, or a ValueError saying how to install it (one line).

    >>> import_ray().__name__
    'ray'
    """
    try:
        import ray
    except ImportError:
        raise ValueError(f"--executor: ray is not installed; install it with {INSTALL_HINT}") from None
    return ray


@dataclass
class RayExecutor:
    """Cells as tasks on ``workers`` Ray actors, each holding its own model.

    ``address``: None starts a local instance of its own (or uses the one this process already
    started); ``"auto"`` or ``"host:port"`` / ``"ray://host:port"`` joins a running cluster (a
    cluster that refuses this process's authentication token is one line saying so, with the fix).
    [`describe`][interp.core.executor.RayExecutor.describe] says where the actors run and how to watch them. Each actor asks
    for ``cpus_per_worker`` CPUs (default: this machine's cores / workers, at least 1) and pins
    torch to as many threads; with CUDA, for ``gpus_per_worker`` of a GPU (fractions let several
    small models share one). A worker that dies mid-cell is restarted and its cell run again.

    >>> with RayExecutor(workers=2) as executor:                            # doctest: +SKIP
    ...     sorted(executor.map(lambda model, shared, item: item * item, [1, 2, 3]))
    [(0, 1), (1, 4), (2, 9)]
    """

    workers: int = 2
    address: str | None = None
    cpus_per_worker: int | None = None
    gpus_per_worker: float | None = None
    name: str = "ray"
    _ray: Any = field(default=None, repr=False)
    _actors: list = field(default_factory=list, repr=False)
    _started: bool = field(default=False, repr=False)
    _dashboard: str | None = field(default=None, repr=False)
    _threads: int = field(default=1, repr=False)
    _gpus: float = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"--workers: expected an integer >= 1, got {self.workers}")
        if self.gpus_per_worker is not None and not 0 < self.gpus_per_worker <= 1:
            raise ValueError(f"gpus_per_worker: expected a fraction in (0, 1], got {self.gpus_per_worker}")

    def start(self) -> "RayExecutor":
        """Connect to (or start) Ray and create the actors; idempotent."""
        if self._actors:
            return self
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            if self.address is not None:
                check_address(self.address)
            try:
                with without_token_notice():
                    # "local": a new instance of our own, never a cluster that RAY_ADDRESS or a
                    # `ray start` on this machine points at
                    context = ray.init(address=self.address or "local", include_dashboard=False, log_to_driver=False,
                                       logging_level=logging.WARNING,
                                       **({} if self.address else {"num_cpus": max(os.cpu_count() or 1, self.workers)}))
            except (ConnectionError, RuntimeError, ValueError) as err:
                if self.address is None:
                    raise
                if is_auth_failure(err):
                    raise auth_error(self.address) from None
                raise ValueError(f"--ray-address: could not join the Ray cluster at {self.address}: "
                                 f"{(str(err).strip().splitlines() or [type(err).__name__])[0]}") from None
            self._started = True
            self._dashboard = getattr(context, "dashboard_url", None) or None
        self._threads = self.cpus_per_worker or max(1, int(ray.cluster_resources().get("CPU", 1)) // self.workers)
        self._gpus = self.gpus_per_worker if self.gpus_per_worker is not None else self._default_gpus()
        actor = ray.remote(num_cpus=self._threads, num_gpus=self._gpus, max_restarts=RETRIES,
                           max_task_retries=RETRIES)(_Worker)
        self._actors = [actor.remote(self._threads) for _ in range(self.workers)]
        logger.info(self.describe())
        return self

    def describe(self) -> str:
        """One line: where the actors run (a local instance or the cluster joined: nodes, CPUs,
        GPUs), how many, and how to watch them (``ray status``, the dashboard when one runs).

        >>> RayExecutor(workers=2).start().describe()  # doctest: +SKIP
        'ray: 2 workers of 1 CPU each on a local Ray instance started here (1 node, 2 CPUs; it stops when ...'
        """
        ray = self._ray
        resources = ray.cluster_resources()
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        gpus = int(resources.get("GPU", 0))
        size = (f"{nodes} node{'s' * (nodes != 1)}, {int(resources.get('CPU', 0))} CPUs"
                + (f", {gpus} GPU{'s' * (gpus != 1)}" if gpus else ""))
        gcs = None
        with contextlib.suppress(Exception):  # a Ray Client connection has no GCS address to give
            gcs = ray.get_runtime_context().gcs_address
        if not self._started:
            where = f"the Ray instance this process had joined ({size})"
        elif self.address is None:
            where = f"a local Ray instance started here ({size}; it stops when the study ends)"
        else:
            where = f"the Ray cluster at {gcs if self.address == 'auto' and gcs else self.address} ({size})"
        each = f"{self._threads} CPU{'s' * (self._threads != 1)}" + (f" and {self._gpus:g} GPU" if self._gpus else "")
        watch = []
        if gcs:
            token = "RAY_AUTH_MODE=token " if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else ""
            watch.append(f"`{token}ray status --address {gcs}`")
        if self._dashboard:
            watch.append(f"the dashboard at {self._dashboard}")
        workers = f"{self.workers} workers of {each} each" if self.workers > 1 else f"1 worker of {each}"
        return (f"ray: {workers} on {where}"
                + (f"; watch it with {' or '.join(watch)}" if watch else ""))

    def _default_gpus(self) -> float:
        # One GPU shared by the actors of this machine when the cluster has GPUs; none otherwise.
        total = self._ray.cluster_resources().get("GPU", 0)
        return 0 if not total else min(1.0, total / self.workers)

    def map(self, cell: Cell, items: Sequence[Any], model: ModelSource = NO_MODEL, shared: Any = None,
            local_model: Any = None) -> Iterator[tuple[int, Any]]:
        """Every item on some actor; results as they finish. ``local_model`` is not used: the
        workers load their own from ``model``."""
        if not items:
            return
        self.start()
        ray = self._ray
        shared_ref = [ray.put(shared)]
        pending = list(enumerate(items))[::-1]
        running: dict[Any, tuple[int, Any]] = {}  # object ref -> (index, actor)

        def submit(actor) -> None:
            index, item = pending.pop()
            running[actor.run.remote(cell, model, shared_ref, item)] = (index, actor)

        # Two cells in flight per actor: the next one is already there when a cell finishes.
        for _ in range(2):
            for actor in self._actors:
                if pending:
                    submit(actor)
        while running:
            [ready], _ = ray.wait(list(running), num_returns=1)
            index, actor = running.pop(ready)
            try:
                result = ray.get(ready)
            except ray.exceptions.RayTaskError as err:
                raise err.as_instanceof_cause() from None
            if pending:
                submit(actor)
            yield index, result

    def worker_pids(self) -> list[int]:
        """The process id of each actor (for tests and memory measurements)."""
        self.start()
        return self._ray.get([actor.pid.remote() for actor in self._actors])

    def close(self) -> None:
        """Stop the actors (and the local Ray instance, when this executor started it)."""
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors = []
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> "RayExecutor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(name: str = "serial", workers: int = 1, address: str | None = None,
                  gpus_per_worker: float | None = None) -> Executor:
    """The executor a script's ``--executor`` / ``--workers`` / ``--ray-address`` name.

    >>> make_executor("serial").name
    'serial'
    >>> make_executor("dask")
    Traceback (most recent call last):
    ValueError: --executor: expected one of serial, ray, got 'dask'
    """
    if name == "serial":
        return SerialExecutor()
    if name == "ray":
        import_ray()
        return RayExecutor(workers=workers, address=address, gpus_per_worker=gpus_per_worker)
    raise ValueError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {name!r}")
