"""Paper figures from the results tables: plotly figures, one style, HTML + static export.

Every ``*_figure`` function takes rows (``interp.core.tables.read_csv``) and returns a plotly
``Figure``; no model is needed to redraw. ``save_figure(fig, stem)`` writes ``stem.html``
(interactive) and static files (PDF/SVG/PNG) through kaleido and a local Chromium; pass one
``StaticExporter`` to many calls to start the browser once. ``load_results(path, kind)`` reads a
results file and checks it has the columns that figure needs, naming the file otherwise.

Modules: ``style`` (the look), ``rows`` (reading results rows), ``heads``, ``accuracy``,
``ablation``, ``training`` (the figures), ``circuit_figure`` (a published circuit as a static figure for papers),
``circuit_view`` (the same as an offline HTML page with a slider over its curve's grid), ``circuit_files``
(reading published circuits), ``export`` (saving), ``build`` (all of them from a results folder).
"""

from interp.figures.browser import BROWSER_HINT, BrowserNotFoundError, find_browser
from interp.data.tasks import DIRECTIONAL_PAIRS, TASK_NAMES
from interp.figures.ablation import ablation_figure
from interp.figures.accuracy import accuracy_length_figure
from interp.figures.build import RESULT_FILES, build_figures, make_figures, write_circuit_figures
from interp.figures.circuit_figure import circuit_figure, save_circuit_figure
from interp.figures.circuit_files import PublishedCircuit, published_circuits
from interp.figures.circuit_view import circuit_page, save_circuit_view
from interp.figures.export import HTML_FORMATS, PLOTLY_JS, STATIC_FORMATS, StaticExporter, figure_html, save_figure
from interp.figures.heads import SCORE_TITLES, head_scores_figure, head_sweep_figure
from interp.figures.rows import ABLATION_CONDITIONS, REQUIRED_COLUMNS, Rows, load_results, models_in, select_model
from interp.figures.style import CONDITION_STYLE, DELTA_SCALE, FONT, OKABE_ITO, PALETTE, SCORE_SCALE, SPLIT_STYLE, TEMPLATE, style
from interp.figures.training import finetune_figure, finetune_summary_figure, from_scratch_figure

__all__ = [
    "ABLATION_CONDITIONS", "BROWSER_HINT", "PublishedCircuit", "circuit_figure", "circuit_page", "published_circuits",
    "save_circuit_figure", "save_circuit_view", "write_circuit_figures", "CONDITION_STYLE", "DELTA_SCALE", "DIRECTIONAL_PAIRS", "FONT", "HTML_FORMATS",
    "OKABE_ITO", "PALETTE", "PLOTLY_JS", "REQUIRED_COLUMNS", "RESULT_FILES", "SCORE_SCALE", "SCORE_TITLES", "SPLIT_STYLE",
    "STATIC_FORMATS", "TASK_NAMES", "TEMPLATE", "BrowserNotFoundError", "Rows", "StaticExporter", "ablation_figure",
    "accuracy_length_figure", "build_figures", "figure_html", "find_browser", "finetune_figure", "finetune_summary_figure",
    "from_scratch_figure", "head_scores_figure", "head_sweep_figure", "load_results", "make_figures", "models_in",
    "save_figure", "select_model", "style",
]
