"""Figures from the fixture results files (tests/fixtures/results), and their error messages."""

from __future__ import annotations

import csv
import re
import shutil
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

from interp import figures as F
from interp.core.tables import read_csv

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "results"
sys.path.insert(0, str(ROOT / "analyses"))

needs_browser = pytest.mark.skipif(
    F.find_browser() is None,
    reason="static export needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")

EXPECTED_STEMS = {"head_scores_tiny-model", "accuracy_vs_length_tiny-model", "ablation_tiny-model",
                  "head_sweep_tiny-model", "from_scratch", "finetune_tiny-model_UB"}


def rows(kind: str, name: str | None = None) -> list[dict]:
    return F.load_results(FIXTURES / (name or f"{kind}.csv"), kind)


def write_csv(path: Path, table: list[dict], drop: str | None = None) -> Path:
    columns = [c for c in table[0] if c != drop]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    return path


# --------------------------------------------------------------------------- each figure


def test_head_scores_figure():
    fig = F.head_scores_figure(rows("head_scores"))
    assert isinstance(fig, go.Figure) and len(fig.data) == 2
    assert fig.data[0].type == "heatmap" and len(fig.data[0].z) == 4 and len(fig.data[0].z[0]) == 3
    ranks = [t for line in fig.data[0].text for t in line if t]
    assert sorted(map(int, ranks)) == list(range(1, 11))  # top 10 numbered
    assert fig.layout.coloraxis.colorscale  # one colour bar for every score (they share a meaning)
    assert "tiny-model" in fig.layout.title.text


def test_accuracy_length_figure_pairs_in_panels():
    fig = F.accuracy_length_figure(rows("directional_bias"))
    assert {t.name for t in fig.data} == set(F.TASK_NAMES)
    titles = [a.text for a in fig.layout.annotations]
    for a, b in F.DIRECTIONAL_PAIRS:
        assert any(t.startswith(f"{a} vs {b}") for t in titles)
    uf = next(t for t in fig.data if t.name == "UF")
    assert max(uf.y) <= 100 and min(uf.y) >= 0  # percent
    assert uf.customdata[0][0].startswith("s.d. over 2")  # two templates -> spread over variants
    ur = next(t for t in fig.data if t.name == "UR")
    assert ur.customdata[0][0] == "binomial s.e."
    assert uf.xaxis == next(t for t in fig.data if t.name == "UB").xaxis  # same panel


def test_ablation_figure_random_spread():
    fig = F.ablation_figure(rows("ablation"))
    bars = [t for t in fig.data if t.type == "bar"]
    assert {t.legendgroup for t in bars} == set(F.ABLATION_CONDITIONS)
    random_bar = next(t for t in bars if t.legendgroup == "random")
    assert random_bar.error_y.visible and all(v > 0 for v in random_bar.error_y.array)
    seeds = [t for t in fig.data if t.type == "scatter"]
    assert seeds and len(seeds[0].y) == 3 * 3  # 3 tasks x 3 seeds
    assert [a.text for a in fig.layout.annotations][:2] == ["zero ablation", "mean ablation"]


def test_head_sweep_figure():
    fig = F.head_sweep_figure(rows("head_sweep"))
    assert len(fig.data) == 2 and fig.layout.coloraxis.cmid == 0
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax
    fig = F.head_sweep_figure(rows("head_sweep"), metric="delta_logprob")
    with pytest.raises(ValueError, match="metric="):
        F.head_sweep_figure(rows("head_sweep"), metric="loss")


def test_finetune_figures():
    table = rows("finetune", "finetune_tiny-model_UB.csv")
    fig = F.finetune_figure(table, "tiny-model", "UB")
    names = {t.name for t in fig.data if t.showlegend is not False}
    assert names == {"in distribution", "out of distribution"}
    summary = F.finetune_summary_figure({("tiny-model", "UB"): table, ("tiny-model", "UF"): table})
    assert len(summary.data) == 2 and list(summary.data[0].x) == ["UF", "UB"]


def test_from_scratch_figure():
    fig = F.from_scratch_figure(rows("from_scratch"))
    assert len(fig.data) == 6  # 3 length bins x 2 positional encodings
    assert "NF ✗" in fig.layout.xaxis.ticktext and "UF ✓" in fig.layout.xaxis.ticktext


def test_style_is_consistent():
    for fig in (F.head_scores_figure(rows("head_scores")), F.ablation_figure(rows("ablation"))):
        assert fig.layout.template.layout.font.family == F.FONT
        assert fig.layout.width and fig.layout.height
    # the figures draw with the colour-blind-safe choices, not merely define them
    heat = F.head_scores_figure(rows("head_scores"))
    import plotly.colors
    cividis = [colour for _, colour in plotly.colors.get_colorscale("Cividis")]
    assert [colour for _, colour in heat.layout.coloraxis.colorscale] == cividis
    bar_colours = {t.marker.color for t in F.ablation_figure(rows("ablation")).data if t.type == "bar"}
    assert bar_colours and bar_colours <= set(F.OKABE_ITO.values())


# --------------------------------------------------------------------------- saving


def test_save_html_only(tmp_path):
    fig = F.ablation_figure(rows("ablation"))
    paths = F.save_figure(fig, tmp_path / "ablation", formats=("html",))
    assert paths == [tmp_path / "ablation.html"]
    text = paths[0].read_text()
    assert re.search(r'<script[^>]*src="plotly.min.js"', text) and "cdn.plot.ly" not in text
    assert not re.search(r"<script[^>]+src=[\"']?https?:", text)
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000
    inline = F.save_figure(fig, tmp_path / "inline" / "ablation", formats=("html",), inline_js=True)[0]
    assert inline.stat().st_size > 1_000_000 and not (tmp_path / "inline" / "plotly.min.js").exists()
    with pytest.raises(ValueError, match="formats"):
        F.save_figure(fig, tmp_path / "x", formats=("jpeg",))


def test_make_figures_html_from_fixtures(tmp_path, capsys):
    import make_figures

    assert make_figures.main(["--results", str(FIXTURES), "--out", str(tmp_path), "--formats", "html"]) == 0
    for stem in EXPECTED_STEMS:
        assert (tmp_path / f"{stem}.html").stat().st_size > 0
    assert "6 files written" in capsys.readouterr().out


@pytest.mark.browser
@needs_browser
def test_every_figure_static_from_fixtures(tmp_path):
    written, errors = F.make_figures(FIXTURES, tmp_path, formats=("html", "pdf", "svg", "png"), log=lambda _: None)
    assert errors == []
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<svg"}
    for stem in EXPECTED_STEMS:
        for fmt in ("html", "pdf", "svg", "png"):
            path = tmp_path / f"{stem}.{fmt}"
            assert path.exists() and path.stat().st_size > 1000, path
            if fmt in magic:
                assert path.read_bytes()[:4] == magic[fmt], path
    assert len(written) == 4 * len(EXPECTED_STEMS)


# --------------------------------------------------------------------------- missing and bad input


def test_missing_optional_files_are_noted(tmp_path, capsys):
    import make_figures

    shutil.copy(FIXTURES / "head_scores.csv", tmp_path / "head_scores.csv")
    out = tmp_path / "figs"
    assert make_figures.main(["--results", str(tmp_path), "--out", str(out), "--formats", "html"]) == 0
    printed = capsys.readouterr().out
    assert "skipping ablation figures" in printed and "ablation.csv not found" in printed
    assert "skipping fine-tuning figures" in printed
    assert sorted(p.name for p in out.iterdir()) == ["head_scores_tiny-model.html", "plotly.min.js"]
    with pytest.raises(SystemExit) as exit_info:  # a folder that is not there is a mistake, not "nothing to draw"
        make_figures.main(["--results", str(tmp_path / "nowhere"), "--out", str(out)])
    assert exit_info.value.code == 2 and "nowhere' is not a folder" in capsys.readouterr().err


def test_missing_column_names_the_file(tmp_path, capsys):
    import make_figures

    bad = write_csv(tmp_path / "ablation.csv", rows("ablation"), drop="condition")
    with pytest.raises(ValueError, match=r"ablation\.csv lacks column\(s\) \['condition'\]"):
        F.load_results(bad, "ablation")
    shutil.copy(FIXTURES / "head_scores.csv", tmp_path / "head_scores.csv")
    code = make_figures.main(["--results", str(tmp_path), "--out", str(tmp_path / "figs"), "--formats", "html"])
    captured = capsys.readouterr()
    assert code == 1 and str(bad) in captured.err and "'condition'" in captured.err
    assert (tmp_path / "figs" / "head_scores_tiny-model.html").exists()  # the good file was still drawn


def test_bad_values_are_named(tmp_path):
    table = rows("directional_bias")
    table[0] = dict(table[0], task="XY")
    with pytest.raises(ValueError, match=r"db\.csv: unknown task 'XY'"):
        F.accuracy_length_figure(table, source="db.csv")
    table = rows("directional_bias")
    table[0] = dict(table[0], accuracy=87.0)
    with pytest.raises(ValueError, match=r"db\.csv: accuracy must be a fraction in \[0, 1\], got 87"):
        F.accuracy_length_figure(table, source="db.csv")
    table = rows("ablation")
    table[0] = dict(table[0], condition="induction_heads")
    with pytest.raises(ValueError, match="unknown condition 'induction_heads'"):
        F.ablation_figure(table, source="ablation.csv")
    table = rows("head_scores")
    table[0] = dict(table[0], layer=-1)
    with pytest.raises(ValueError, match="layer must be a non-negative integer"):
        F.head_scores_figure(table, source="head_scores.csv")
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['anti_induction'\]"):
        F.head_scores_figure([{k: v for k, v in r.items() if k != "anti_induction"} for r in rows("head_scores")],
                             source="head_scores.csv")
    with pytest.raises(FileNotFoundError, match="nothing.csv does not exist"):
        F.load_results(tmp_path / "nothing.csv", "ablation")
    with pytest.raises(ValueError, match="kind="):
        F.load_results(FIXTURES / "ablation.csv", "ablations")


def test_several_models_one_figure_each(tmp_path):
    table = rows("head_scores")
    other = [dict(r, model="org/other") for r in table]
    write_csv(tmp_path / "head_scores.csv", table + other)
    with pytest.raises(ValueError, match="several models"):
        F.head_scores_figure(table + other)
    figures, errors = F.build_figures(tmp_path, log=lambda _: None)
    assert errors == [] and [s for s, _ in figures] == ["head_scores_tiny-model", "head_scores_org_other"]
    figures, _ = F.build_figures(tmp_path, model="org/other", log=lambda _: None)
    assert [s for s, _ in figures] == ["head_scores_org_other"]


def test_finetune_file_names(tmp_path):
    table = rows("finetune", "finetune_tiny-model_UB.csv")
    write_csv(tmp_path / "finetune_gpt2-xl_NRLast_lr5.csv", table)
    write_csv(tmp_path / "finetune_gpt2-xl_UF.csv", table)
    figures, errors = F.build_figures(tmp_path, log=lambda _: None)
    assert errors == []
    assert [s for s, _ in figures] == ["finetune_gpt2-xl_NRLast_lr5", "finetune_gpt2-xl_UF", "finetune_summary_gpt2-xl"]
    write_csv(tmp_path / "finetune_gpt2-xl_copy.csv", table)
    _, errors = F.build_figures(tmp_path, log=lambda _: None)
    assert len(errors) == 1 and "finetune_gpt2-xl_copy.csv" in errors[0] and "cannot tell the task" in errors[0]


# --------------------------------------------------------------------------- one quantity, one scale


def y_scales_by_row(fig: go.Figure) -> dict[tuple, set]:
    """Per row of panels (y axes with the same vertical domain), the scales of its y axes: the axis a
    panel's axis follows (``matches``) or is followed by, else its fixed range, else its own name."""
    drawn = {trace.yaxis or "y" for trace in fig.data}  # an empty panel of a grid has no scale to share
    axes = {"y" + name[len("yaxis"):]: axis for name, axis in fig.layout.to_plotly_json().items()
            if name.startswith("yaxis") and axis.get("domain") is not None and "y" + name[len("yaxis"):] in drawn}
    followed = {axis.get("matches") for axis in axes.values()}
    rows_: dict[tuple, set] = {}
    for own, axis in axes.items():
        scale = axis.get("matches") or (own if own in followed else tuple(axis.get("range") or ()) or own)
        rows_.setdefault(tuple(axis["domain"]), set()).add(scale)
    return rows_


def test_head_score_panels_share_one_attention_scale():
    """Both scores are shares of attention: one 0-1 colour axis, so a near-zero anti-induction score
    never looks as bright as the strongest induction head."""
    fig = F.head_scores_figure(rows("head_scores"))
    assert {t.coloraxis for t in fig.data} == {"coloraxis"}
    assert not any(k.startswith("coloraxis") and k != "coloraxis" for k in fig.layout.to_plotly_json())
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    table = [dict(r, induction=1.2) if i == 0 else r for i, r in enumerate(rows("head_scores"))]
    assert F.head_scores_figure(table).layout.coloraxis.cmax == 1.2  # widened, never clipped


def test_every_multi_panel_figure_shares_its_scales():
    from interp.core.tables import read_csv
    from interp.figures.edges import edge_figures
    from interp.figures.planted import planted_sensitivity_figure

    figures, errors = F.build_figures(FIXTURES, log=lambda _: None)
    edge, edge_errors = edge_figures(ROOT / "results", model="smollm2-135m")
    figures += edge + [("planted", planted_sensitivity_figure(read_csv(ROOT / "results" / "planted_sensitivity_summary.csv")))]
    assert errors == edge_errors == [] and len(figures) >= 9
    for stem, fig in figures:
        heatmaps = [t for t in fig.data if t.type == "heatmap"]
        assert len({t.coloraxis for t in heatmaps}) <= 1, f"{stem}: heatmaps on several colour scales"
        if heatmaps or stem.startswith("finetune_") and "summary" not in stem:
            continue  # a heatmap's y axis is the layer; accuracy beside loss: two quantities, two scales
        for scales in y_scales_by_row(fig).values():
            assert len(scales) == 1, f"{stem}: the panels of one row have different y scales {scales}"


# --------------------------------------------------------------------------- study rows and notebooks


def test_study_rows_feed_the_figures_directly():
    """``ablation_figure(ablation_study(...))``: a study's dataclass rows draw the same figure as the table read back."""
    from interp.experiments.head_ablation import AblationRow

    table = rows("ablation")
    study = [AblationRow(model=r["model"], condition=r["condition"], ablation=r["ablation"],
                         seed=int(r["seed"]) if r["seed"] not in ("", None) else None, task=r["task"],
                         length=int(r["length"]), n_examples=int(r["n_examples"]), accuracy=float(r["accuracy"]),
                         ci_low=0.0, ci_high=1.0, delta_accuracy=float(r["delta_accuracy"]),
                         mean_logprob=float(r["mean_logprob"]), heads=r["heads"] or "", selected_by="")
             for r in table]
    from_study, from_table = F.ablation_figure(study), F.ablation_figure(table)
    assert [list(t.y) for t in from_study.data] == [list(t.y) for t in from_table.data]


def test_figures_display_themselves_in_a_notebook():
    fig = F.head_scores_figure(rows("head_scores"))
    assert hasattr(fig, "_repr_html_") or hasattr(fig, "_repr_mimebundle_")


# --------------------------------------------------------------------------- HTML figures in a browser


def open_figure(fig: go.Figure, tmp_path: Path, window: tuple[int, int]) -> str:
    from interp.figures.browser import headless_chromium

    (path,) = F.save_figure(fig, tmp_path / "figure", formats=("html",))
    return headless_chromium(path, window=window)


def legend_box(dom: str) -> tuple[float, float]:
    """(left edge, width) of the rendered legend, from its transform and background rectangle."""
    found = re.search(r'<g class="legend"[^>]*transform="translate\(([\d.]+),[\d.]+\)"><rect class="bg"[^>]*?width="([\d.]+)"',
                      dom)
    assert found, "no legend in the rendered figure"
    return float(found[1]), float(found[2])


@pytest.mark.browser
@needs_browser
def test_html_figure_fits_the_window_and_has_a_title(tmp_path):
    fig = F.ablation_figure(rows("ablation"))
    fig.layout.width = 1440  # a figure wider than the window below
    dom = open_figure(fig, tmp_path, window=(1000, 700))
    width = float(re.search(r'<svg class="main-svg"[^>]*width="([\d.]+)"', dom)[1])
    left, legend = legend_box(dom)
    assert width <= 1000, f"the figure is {width} px wide in a 1000 px window"
    assert left + legend <= width, f"the legend ({left} + {legend} px) is cut off at {width} px"
    assert re.search(r"<title>Head ablations \(tiny-model\)</title>", dom)
    assert not re.search(r'(src|href)="https?:', (tmp_path / "figure.html").read_text())  # nothing from the network
    assert fig.layout.width == 1440  # the static export's size is the figure's own


@pytest.mark.browser
@needs_browser
def test_head_scores_page_shows_one_colour_scale(tmp_path):
    dom = open_figure(F.head_scores_figure(rows("head_scores")), tmp_path, window=(1200, 800))
    assert len(re.findall(r'<g class="[^"]*\bcolorbar\b', dom)) == 1, "one colour bar for every panel's attention scores"
    ticks = [float(t) for t in re.findall(r'class="ycbcoloraxistick"><text[^>]*data-unformatted="([\d.]+)"', dom)]
    assert min(ticks) == 0.0 and max(ticks) == 1.0, f"the scale reads {ticks}, not shares of attention from 0 to 1"


def test_a_variant_table_of_the_same_model_names_its_figure_once(tmp_path):
    """A second table of one model (e.g. heads chosen by another score) gets the table's own name
    after the figure prefix, not the model label twice."""
    import shutil

    from interp.figures.build import build_figures

    for name in ("ablation_planted-ub", "ablation_planted-ub_anti-by-duplicate_v_composition"):
        shutil.copy(f"results/{name}.csv", tmp_path / f"{name}.csv")
    names = [stem for stem, _ in build_figures(tmp_path, log=lambda line: None)[0]]
    assert sorted(names) == ["ablation_planted-ub", "ablation_planted-ub_anti-by-duplicate_v_composition"]


@pytest.mark.browser
@needs_browser
def test_edge_patching_loss_axis_reaches_a_model_that_never_copies(tmp_path):
    """planted-ub never copies forwards (UF loss ~30); plotly.js would leave the loss row at its empty
    default range [-1, 4], drawing those points off the chart, unless the row asks for autorange."""
    table = read_csv(ROOT / "results" / "edge_patching_planted-ub_single-shot.csv")
    from interp.figures.edges import edge_patching_figure

    dom = open_figure(edge_patching_figure(table), tmp_path, window=(1400, 800))
    ticks = [float(t.replace("\u2212", "-")) for t in re.findall(r'<g class="y3tick"><text[^>]*>([^<]*)</text>', dom)]
    largest_loss = max(-float(r["mean_logprob"]) for r in table)
    assert largest_loss > 29 and ticks and max(ticks) >= 30, f"loss axis ticks {ticks}"


class _TabNotLoadedYet:
    """A stand-in for kaleido whose first ``unloaded`` renders meet a tab still on its blank page."""

    def __init__(self, unloaded: int, message: str = "ReferenceError: kaleido_scopes is not defined"):
        self.unloaded, self.message, self.calls = unloaded, message, 0

    async def calc_fig(self, fig, opts):
        from kaleido._kaleido_tab._errors import JavascriptError

        self.calls += 1
        if self.calls <= self.unloaded:
            raise JavascriptError("{'description': '%s'}" % self.message)
        return b"%PDF-rendered"


@pytest.fixture
def exporter_over():
    """A StaticExporter whose event loop runs and whose kaleido is the given stand-in."""
    import asyncio
    import threading

    from interp.figures.export import StaticExporter

    exporter = StaticExporter(browser="chromium")
    exporter._loop = asyncio.new_event_loop()
    exporter._thread = threading.Thread(target=exporter._loop.run_forever, daemon=True)
    exporter._thread.start()

    def over(fake):
        exporter._kaleido = fake
        return exporter

    yield over
    exporter._kaleido = None
    exporter.__exit__(None, None, None)


@pytest.mark.parametrize("unloaded, renders", [(0, True), (2, True), (3, False)])
def test_a_tab_caught_before_its_page_loaded_is_rendered_again(exporter_over, unloaded, renders):
    from kaleido._kaleido_tab._errors import JavascriptError

    from interp.figures.export import RENDER_TRIES

    fake = _TabNotLoadedYet(unloaded)
    exporter = exporter_over(fake)
    if renders:
        assert exporter.render(go.Figure(), "pdf") == b"%PDF-rendered"
        assert fake.calls == unloaded + 1
    else:
        with pytest.raises(JavascriptError, match="kaleido_scopes"):
            exporter.render(go.Figure(), "pdf")
        assert fake.calls == RENDER_TRIES


def test_other_render_errors_are_not_retried(exporter_over):
    from kaleido._kaleido_tab._errors import JavascriptError

    fake = _TabNotLoadedYet(1, message="Error 525: plotly.js failed")
    with pytest.raises(JavascriptError, match="525"):
        exporter_over(fake).render(go.Figure(), "png")
    assert fake.calls == 1
