"""interp: a mechanistic-interpretability toolkit for the experiments of
*Born a Transformer -- Always a Transformer?* (Veitsman et al., 2025).

The public API (``dir(interp)`` lists it; each name's module is given in ``_EXPORTS``):

* models: ``load_model``;
* tasks: ``TASKS``, ``TASK_NAMES``, ``TaskSpec``, ``TaskExample``,
  ``get_task``, ``generate_examples``, ``PromptConfig``, ``task_prompts``,
  ``encode_for``;
* measuring: ``evaluate_task`` (an ``Accuracy``), ``score_heads`` (a ``HeadScores``);
* heads: ``Head``, ``HeadLike``, ``parse_heads``;
* interventions: ``ablated``, ``ablation_hooks``, ``compute_head_means``,
  ``head_sweep`` (a ``SweepResult``), ``attribution_sweep`` (an ``AttributionResult``);
* circuits: ``find_circuit`` (a ``Circuit``: ``Circuit.load`` reads a saved one).

Library functions draw no progress bar unless asked (``progress=True``); the scripts in
``analyses/`` ask, unless given ``--quiet``.

The packages follow the flow of data, each importing only those before it: ``core`` ->
``data`` -> ``crasp`` (the theory) -> ``prompts`` -> ``models`` -> ``measure`` ->
``interventions`` -> ``training`` -> ``experiments`` -> ``figures`` -> ``cli``.

``interp.__version__`` is the installed package's version (its metadata; the source tree's ``pyproject.toml``
when the package is not installed).

Names are imported on first use, so that light tools (figures from results files) do not pay for
importing torch and transformers (``python -c "import interp"``: 0.14 s this way against 25 s with
every name's module imported, on a busy 2-core machine; docs/benchmarks.md)."""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING

# Intel MKL picks its matrix-product kernels by thread count: a product of a few rows (the answer
# positions' unembedding) then differs in its last bits between a 2-thread run and a 1-thread
# worker, and a study on Ray would not write the serial table byte for byte. Strict conditional
# numerical reproducibility makes MKL's results independent of the thread count. A value the user
# set is kept; Ray workers inherit it from the driver's environment.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from interp.core.heads import Head, HeadLike, parse_heads
    from interp.data.tasks import TASK_NAMES, TASKS, TaskExample, TaskSpec, generate_examples, get_task
    from interp.interventions.ablation import ablated, ablation_hooks, compute_head_means
    from interp.interventions.attribution import AttributionResult, attribution_sweep
    from interp.interventions.circuits.circuit import Circuit
    from interp.interventions.circuits.find import find_circuit
    from interp.interventions.sweep import SweepResult, head_sweep
    from interp.measure.encoding import encode_for
    from interp.measure.evaluate import evaluate_task, task_prompts
    from interp.measure.head_scores import HeadScores, score_heads
    from interp.measure.teacher_forcing import Accuracy
    from interp.models import load_model
    from interp.prompts import PromptConfig

_EXPORTS = {
    "load_model": "models",
    "TASKS": "data.tasks", "TASK_NAMES": "data.tasks", "TaskExample": "data.tasks", "TaskSpec": "data.tasks",
    "generate_examples": "data.tasks", "get_task": "data.tasks",
    "PromptConfig": "prompts", "task_prompts": "measure.evaluate", "encode_for": "measure.encoding",
    "evaluate_task": "measure.evaluate", "Accuracy": "measure.teacher_forcing",
    "score_heads": "measure.head_scores", "HeadScores": "measure.head_scores",
    "Head": "core.heads", "HeadLike": "core.heads", "parse_heads": "core.heads",
    "ablated": "interventions.ablation", "ablation_hooks": "interventions.ablation",
    "compute_head_means": "interventions.ablation",
    "head_sweep": "interventions.sweep", "SweepResult": "interventions.sweep",
    "attribution_sweep": "interventions.attribution", "AttributionResult": "interventions.attribution",
    "find_circuit": "interventions.circuits.find", "Circuit": "interventions.circuits.circuit",
}

__all__ = sorted(_EXPORTS)


def _version(source_root: str | os.PathLike | None = None) -> str:
    """The version of the installed package, else the one ``pyproject.toml`` in ``source_root`` (the checkout
    this module lies in) gives, else ``0+unknown``: a checkout run without ``pip install`` still says what it is.

    >>> import interp
    >>> _version() == interp.__version__
    True
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("interp")
    except PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    pyproject = Path(source_root if source_root is not None else Path(__file__).resolve().parents[1]) / "pyproject.toml"
    try:
        found = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
        return "0+unknown"
    return str(found)


def __getattr__(name: str):
    if name == "__version__":  # read on first use: importing interp reads no package metadata
        value = globals()["__version__"] = _version()
        return value
    if name in _EXPORTS:
        value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value  # the next access is a plain attribute lookup
        return value
    raise AttributeError(f"module 'interp' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API and the subpackages, without the lazy-import machinery."""
    packages = ["cli", "core", "crasp", "data", "experiments", "figures", "interventions", "measure", "models",
                "prompts", "training"]
    return sorted([*__all__, *packages])
