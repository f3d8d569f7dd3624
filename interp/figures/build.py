"""Every figure the tables in a results folder allow, drawn in one go (``make figures``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go

from interp.core.naming import result_files, slug, split_result_stem
from interp.data.tasks import TASK_NAMES, get_task
from interp.figures.ablation import ablation_figure
from interp.figures.circuit_figure import save_circuit_figure
from interp.figures.circuit_files import PublishedCircuit, published_circuits
from interp.figures.circuit_view import save_circuit_view
from interp.figures.edges import edge_figures
from interp.figures.accuracy import accuracy_length_figure
from interp.figures.export import STATIC_FORMATS, StaticExporter, save_figure
from interp.figures.heads import head_scores_figure, head_sweep_figure
from interp.figures.realistic import realistic_figures
from interp.figures.routes import route_figures  # the route tables (circuit_routes_*): one figure each
from interp.figures.rows import BAD_TABLE_ERRORS, Rows, load_results, models_in, table_error
from interp.figures.training import finetune_figure, finetune_summary_figure, from_scratch_figure

RESULT_FILES = {  # kind -> (file name, figure name prefix, the analysis that writes it)
    "head_scores": ("head_scores.csv", "head_scores", "head scoring (analyses/score_heads.py, analyses/ablate_heads.py)"),
    "directional_bias": ("directional_bias.csv", "accuracy_vs_length", "analyses/directional_bias.py"),
    "ablation": ("ablation.csv", "ablation", "head ablation (analyses/ablate_heads.py)"),
    "head_sweep": ("head_sweep.csv", "head_sweep", "the single-head sweep (analyses/head_sweep.py)"),
}
PER_MODEL_FIGURES = {"head_scores": head_scores_figure, "directional_bias": accuracy_length_figure,
                     "ablation": ablation_figure, "head_sweep": head_sweep_figure}


def _finetune_key(path: Path, rows: Rows) -> tuple[str, str]:
    """(model, task) of a ``finetune_<model>_<task>[_tag].csv`` file, from its columns if present."""
    model = str(rows[0].get("model") or "") if rows else ""
    task = str(rows[0].get("task") or "") if rows else ""
    parts = path.stem[len("finetune_"):].split("_")
    if not task:
        found = [i for i, p in enumerate(parts) if p.lower() in {t.lower() for t in TASK_NAMES}]
        if not found:
            raise ValueError(f"results file {path}: cannot tell the task from the name (expected "
                             f"finetune_<model>_<task>.csv with a task in {', '.join(TASK_NAMES)}) and it has no task column")
        task = parts[found[-1]]
        model = model or "_".join(parts[: found[-1]])
    try:
        task = get_task(task).name
    except ValueError as err:
        raise ValueError(f"results file {path}: {err}") from None
    return model or "_".join(parts[:-1]) or "model", task


def build_figures(results_dir: str | Path, model: str | None = None,
                  log=print) -> tuple[list[tuple[str, go.Figure]], list[str]]:
    """Every figure the files in ``results_dir`` allow, as ``(file stem, figure)``; missing files are
    skipped with a note through ``log``. Returns the figures and the errors (bad files).

    >>> figures, errors = build_figures("results", "smollm2-135m", log=lambda line: None)
    >>> ("ablation_smollm2-135m" in dict(figures), errors)  # run from the repository's root
    (True, [])
    """
    results_dir = Path(results_dir)
    figures: list[tuple[str, go.Figure]] = []
    errors: list[str] = []
    for make in (_per_model_figures, _from_scratch_figures, _finetune_figures, realistic_figures, route_figures):
        made, failed = make(results_dir, model, log)
        figures += made
        errors += failed
    found, edge_errors = edge_figures(results_dir, model)
    if not found and not edge_errors:
        log(f"note: skipping edge-patching figures: no {results_dir}/edge_patching_*.csv (written by analyses/patch_edges.py)")
    return figures + found, errors + edge_errors


Built = tuple[list[tuple[str, go.Figure]], list[str]]


def _per_model_figures(results_dir: Path, model: str | None, log) -> Built:
    """One figure per model (``model`` only, when given) of every [`RESULT_FILES`][interp.figures.build.RESULT_FILES] table."""
    figures: list[tuple[str, go.Figure]] = []
    errors: list[str] = []
    used: set[str] = set()
    for kind, (name, prefix, writer) in RESULT_FILES.items():
        paths = result_files(results_dir, kind)
        if not paths:
            log(f"note: skipping {kind} figures: {results_dir / name} not found (written by {writer})")
        for path in paths:
            try:
                rows = load_results(path, kind)
                made = []
                for m in [m for m in models_in(rows) if model is None or m == model]:
                    stem = f"{prefix}_{slug(m)}"
                    if stem in used:  # the same model in another run's file: tell them apart by the file
                        rest = split_result_stem(path.stem)[1]  # model label and variants, as the file names them
                        stem = f"{prefix}_{rest}" if rest.startswith(slug(m)) else f"{stem}_{rest}"
                    used.add(stem)
                    made.append((stem, PER_MODEL_FIGURES[kind](rows, m, source=str(path))))
            except BAD_TABLE_ERRORS as err:
                errors.append(table_error(path, err))
                continue
            if not made:
                log(f"note: {path} has no rows for model {model!r}")
            figures += made
    return figures, errors


def _from_scratch_figures(results_dir: Path, model: str | None, log) -> Built:
    """One from-scratch figure per from-scratch table (``from_scratch.csv``, and ``from_scratch_<preset>.csv``
    for another preset); each spans its own models."""
    tables = result_files(results_dir, "from_scratch")
    if not tables:
        log(f"note: skipping from_scratch figures: no {results_dir}/from_scratch*.csv (written by analyses/train_from_scratch.py)")
        return [], []
    figures, errors = [], []
    for table in tables:
        try:
            figures.append((table.stem, from_scratch_figure(load_results(table, "from_scratch"), source=str(table))))
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(table, err))
    return figures, errors


def _finetune_figures(results_dir: Path, model: str | None, log) -> Built:
    """One figure per fine-tuning run, and per model with several runs a summary across its tasks."""
    figures: list[tuple[str, go.Figure]] = []
    errors: list[str] = []
    finetune_files = result_files(results_dir, "finetune")
    if not finetune_files:
        log(f"note: skipping fine-tuning figures: no {results_dir}/finetune_<model>_<task>.csv (written by fine-tuning)")
    runs: dict[tuple[str, str], Rows] = {}
    for path in finetune_files:
        try:
            rows = load_results(path, "finetune")
            key = _finetune_key(path, rows)
            if model is not None and key[0] != model:
                continue
            figures.append((path.stem, finetune_figure(rows, *key, source=str(path))))
            runs[key] = rows
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    for m in sorted({m for m, _ in runs}):
        mine = {k: v for k, v in runs.items() if k[0] == m}
        if len(mine) > 1:
            figures.append((f"finetune_summary_{slug(m)}", finetune_summary_figure(mine)))
    return figures, errors


def write_circuit_figures(published: PublishedCircuit, out_dir: str | Path, formats: Sequence[str] = ("html",),
                          exporter=None) -> list[Path]:
    """One published circuit (`interp.figures.circuit_files.published_circuits`) as ``out_dir/<stem>.<format>``: the
    interactive view as HTML (inline SVG, no plotly.js), the static figure in each static format.

    >>> import tempfile
    >>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
    >>> c = Circuit("m", "UF", "top-k", "roles", (CircuitEdge("residual", "logits", "a1.0", "c", score=2.0),), 0.9, 1.0,
    ...             1.0, 2.0, 0.0, 4, 10)
    >>> [p.name for p in write_circuit_figures(PublishedCircuit("circuit_m_UF_top-k", c, (), "c.json"), tempfile.mkdtemp())]
    ['circuit_m_UF_top-k.html']
    """
    stem = Path(out_dir) / published.stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = [save_circuit_view(published, stem)] if "html" in formats else []
    return written + save_circuit_figure(published.circuit, stem, [f for f in formats if f in STATIC_FORMATS], exporter)


def make_figures(results_dir: str | Path = "results", out_dir: str | Path = "figures",
                 formats: Sequence[str] = ("html", "pdf", "png"), model: str | None = None, inline_js: bool = False,
                 log=print) -> tuple[list[Path], list[str]]:
    """Draw every figure ``results_dir`` allows into ``out_dir``; returns (paths written, errors).

    Static formats (``pdf``, ``png``, ``svg``) need a local Chromium (``make chromium``); ``html`` does not.

    Examples:
        >>> import tempfile
        >>> written, errors = make_figures("results", tempfile.mkdtemp(), formats=("html",), log=lambda line: None)
        >>> sorted({path.suffix for path in written})                 # run from the repository's root
        ['.html']
    """
    figures, errors = build_figures(results_dir, model, log)
    circuits, circuit_errors = published_circuits(results_dir, model, log)
    errors += circuit_errors
    out_dir = Path(out_dir)
    written: list[Path] = []
    if not figures and not circuits:
        return written, errors
    static = [f for f in formats if f in STATIC_FORMATS]
    exporter = StaticExporter() if static else None
    if exporter is not None:
        exporter.__enter__()
    try:
        for stem, fig in figures:
            paths = save_figure(fig, out_dir / stem, formats, exporter=exporter, inline_js=inline_js)
            log(f"wrote {', '.join(str(p) for p in paths)}")
            written += paths
        for published in circuits:
            paths = write_circuit_figures(published, out_dir, formats, exporter=exporter)
            log(f"wrote {', '.join(str(p) for p in paths)}")
            written += paths
    finally:
        if exporter is not None:
            exporter.__exit__(None, None, None)
    return written, errors
