"""Saving figures: interactive HTML (plotly.js written once beside the pages) and static
PDF/SVG/PNG rendered by a local headless Chromium through kaleido, all written atomically."""

from __future__ import annotations

import asyncio
import html
import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go

from interp.figures.browser import BROWSER_HINT, BrowserNotFoundError, find_browser, isolated_launcher
from interp.core.tables import atomic_write_bytes, atomic_write_text, stem_file
from interp.figures.style import FONT

STATIC_FORMATS = ("pdf", "svg", "png")
HTML_FORMATS = ("html",)
# A loaded machine can hand kaleido's tab the blank page's JavaScript context before its own page
# has loaded; the render then fails with this error, and kaleido reloads the tab before the next.
UNLOADED_TAB = "kaleido_scopes is not defined"
RENDER_TRIES = 3


class StaticExporter:
    """One headless Chromium (through kaleido) that renders many figures to PDF/SVG/PNG.

    Use as a context manager so the browser starts once; ``export`` also works without (then
    each call starts and stops a browser). MathJax is disabled and plotly.js comes from the
    installed plotly package, so nothing is fetched from the network."""

    def __init__(self, browser: str | None = None, timeout: float = 120, png_scale: float = 2.0):
        self.browser = browser or find_browser()
        if self.browser is None:
            raise BrowserNotFoundError(BROWSER_HINT)
        self.timeout = timeout
        self.png_scale = png_scale
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kaleido = None
        self._home: tempfile.TemporaryDirectory | None = None

    # The browser lives in an event loop on its own thread, so callers need not be async (and
    # may themselves run inside an event loop, e.g. Jupyter).
    def __enter__(self) -> "StaticExporter":
        import kaleido

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="interp-kaleido")
        self._thread.start()
        self._home = tempfile.TemporaryDirectory(prefix="interp-kaleido-")  # the browser's $HOME, not the user's
        k = kaleido.Kaleido(path=str(isolated_launcher(self.browser, self._home.name)), mathjax=False,
                            timeout=self.timeout)
        try:
            self._run(k.open())
        except Exception as err:
            self.__exit__(None, None, None)
            raise BrowserNotFoundError(f"could not start {self.browser} for static export: {err}. {BROWSER_HINT}") from err
        self._kaleido = k
        return self

    def __exit__(self, *exc) -> None:
        if self._kaleido is not None:
            try:
                self._run(self._kaleido.close())
            finally:
                self._kaleido = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
            self._loop, self._thread = None, None
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def render(self, fig: go.Figure, fmt: str, png_scale: float | None = None) -> bytes:
        """The figure as ``fmt`` bytes, at the figure's own width and height (a PNG ``png_scale`` times that,
        the exporter's own scale when None)."""
        if fmt not in STATIC_FORMATS:
            raise ValueError(f"format {fmt!r}; expected one of {STATIC_FORMATS}")
        if self._kaleido is None:
            with self:
                return self.render(fig, fmt, png_scale)
        opts = dict(format=fmt, width=fig.layout.width or 800, height=fig.layout.height or 500,
                    scale=(self.png_scale if png_scale is None else png_scale) if fmt == "png" else 1)
        for attempt in range(1, RENDER_TRIES + 1):
            try:
                data = self._run(self._kaleido.calc_fig(fig, opts=opts))
                break
            except RuntimeError as err:
                if UNLOADED_TAB not in str(err) or attempt == RENDER_TRIES:
                    raise
        if not data:
            raise RuntimeError(f"kaleido returned an empty {fmt} image")
        return data

    def export(self, fig: go.Figure, path: str | Path, fmt: str | None = None, png_scale: float | None = None) -> Path:
        path = Path(path)
        return atomic_write_bytes(path, self.render(fig, fmt or path.suffix.lstrip("."), png_scale))


PLOTLY_JS = "plotly.min.js"
MIN_PAGE_WIDTH = 640  # narrower windows scroll rather than squeeze the panels


def _write_plotlyjs(directory: Path) -> None:
    """plotly.js next to the HTML files (once), so each page works offline without a 4.7 MB copy."""
    from plotly.offline import get_plotlyjs

    target = directory / PLOTLY_JS
    script = get_plotlyjs()
    if not target.exists() or target.stat().st_size != len(script.encode()):
        atomic_write_text(target, script)


def figure_title(fig: go.Figure) -> str:
    """The figure's title as plain text (its HTML tags dropped), for a page's ``<title>``.

    >>> figure_title(go.Figure(layout_title_text="Head ablations<br><sup>SmolLM2</sup>"))
    'Head ablations SmolLM2'
    """
    text = fig.layout.title.text or "figure"
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def figure_html(fig: go.Figure, inline_js: bool = False) -> str:
    """``fig`` as a complete HTML page (plotly.js from ``plotly.min.js`` beside it, or inlined),
    titled by the figure's title, as wide as the window (never narrower than ``MIN_PAGE_WIDTH``;
    the figure's own width is what static export uses).

    >>> page = figure_html(go.Figure(layout_title_text="Head ablations", layout_width=1440))
    >>> page.startswith("<!doctype html>"), "<title>Head ablations</title>" in page, '"width":1440' in page
    (True, True, False)
    """
    config = {"displaylogo": False, "responsive": True,
              "toImageButtonOptions": {"format": "svg", "filename": "figure"}}
    page = go.Figure(fig)  # a copy: the caller's figure keeps its width for static export
    page.update_layout(width=None, autosize=True)
    height = fig.layout.height or 500
    text = page.to_html(full_html=True, include_plotlyjs=True if inline_js else PLOTLY_JS, include_mathjax=False,
                        config=config, default_width="100%", default_height=f"{height}px")
    head = (f"<title>{html.escape(figure_title(fig))}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<style>body {{ margin: 0; font-family: {FONT}; }} body > div {{ min-width: {MIN_PAGE_WIDTH}px; }}</style>\n")
    return text.replace("<head>", "<head>\n" + head, 1)


def save_figure(fig: go.Figure, stem: str | Path, formats: Sequence[str] = ("html", "pdf", "png"),
                exporter: StaticExporter | None = None, inline_js: bool = False) -> list[Path]:
    """Write ``fig`` as ``stem.<fmt>`` for each format, atomically; returns the paths.

    ``html`` is interactive (plotly.js written once as ``plotly.min.js`` beside it, or inlined
    with ``inline_js=True``); ``pdf`` / ``svg`` / ``png`` are static, rendered by a local
    Chromium (``exporter``, or one started for this call).

    >>> import tempfile
    >>> from pathlib import Path
    >>> [path.name for path in save_figure(go.Figure(), Path(tempfile.mkdtemp()) / "empty", formats=("html",))]
    ['empty.html']
    """
    stem = Path(stem)
    unknown = [f for f in formats if f not in HTML_FORMATS + STATIC_FORMATS]
    if unknown:
        raise ValueError(f"formats {unknown} unknown; expected some of {HTML_FORMATS + STATIC_FORMATS}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    static = [f for f in formats if f in STATIC_FORMATS]
    if "html" in formats:
        if not inline_js:
            _write_plotlyjs(stem.parent)
        written.append(atomic_write_text(stem_file(stem, "html"), figure_html(fig, inline_js)))
    if static:
        if exporter is None:
            with StaticExporter() as own:
                return written + [own.export(fig, stem_file(stem, f), f) for f in static]
        written += [exporter.export(fig, stem_file(stem, f), f) for f in static]
    return written
