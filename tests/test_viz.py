"""Attention views (interp.figures.attention), head specs (interp.core.heads) and analyses/show_heads.py, on tiny-llama."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from interp.core.heads import Head, format_heads, parse_heads, validate_heads
from interp.figures.attention import attention_view, head_patterns, headless_chromium, save_attention_view

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))


def chromium_path() -> str | None:
    from interp.figures import find_browser

    return find_browser()


# --------------------------------------------------------------------------- heads


def test_parse_heads_spellings():
    assert parse_heads("18.6,17.3", 30, 9) == [Head(18, 6), Head(17, 3)]
    assert parse_heads("18.6;17.3") == [Head(18, 6), Head(17, 3)]
    assert parse_heads(" L18H6 17:3, 18.6 ") == [Head(18, 6), Head(17, 3)]  # duplicates dropped, order kept
    assert parse_heads([(1, 2), "0.1"]) == [Head(1, 2), Head(0, 1)]
    assert parse_heads("") == [] and parse_heads(None) == []
    assert str(Head(18, 6)) == "18.6" and Head(18, 6).label == "L18H6"
    assert format_heads([Head(18, 6), (17, 3)]) == "18.6;17.3"
    assert parse_heads(format_heads(parse_heads("18.6,17.3"))) == [Head(18, 6), Head(17, 3)]
    assert validate_heads([(1, 2), (1, 2)], 2, 4) == [Head(1, 2), Head(1, 2)]


@pytest.mark.parametrize("spec, fragment", [
    ("30.1", "layer 30"), ("1.9", "head 9"), ("abc", "cannot read head 'abc'"), ("18", "cannot read head '18'"),
])
def test_parse_heads_errors_name_the_argument_and_shape(spec, fragment):
    with pytest.raises(ValueError) as err:
        parse_heads(spec, 30, 9, name="--heads")
    message = str(err.value)
    assert message.startswith("--heads") and fragment in message
    if "out of range" in message:
        assert "n_layers=30" in message and "n_heads=9" in message


# --------------------------------------------------------------------------- views on tiny-llama


@pytest.fixture(scope="module")
def tiny():
    from interp.models import load_model

    return load_model("tiny-llama", device="cpu")


def test_copying_view_positions_and_patterns(tiny):
    view = attention_view(tiny, "UB", "1.2,0.3", length=8, example=1)
    lay, ex = view.layout, view.example
    decoded = [tiny.tokenizer.decode([i]).strip() for i in lay.ids]
    assert [decoded[p] for p in lay.context_positions] == list(ex.context)
    assert decoded[lay.query_position] == ":"
    assert [decoded[p] for p in lay.answer_positions] == list(ex.target)
    # the source of answer item i holds that item in the test input
    assert [decoded[p] for p in lay.source_positions] == list(ex.target)
    assert lay.source_positions[0] == lay.context_positions[-1]  # UB starts with the last item
    assert view.patterns.shape == (2, len(lay.ids), len(lay.ids))
    np.testing.assert_allclose(view.patterns.sum(-1), 1.0, atol=1e-4)  # softmax rows
    assert np.allclose(np.triu(view.patterns, 1), 0.0)  # causal
    assert view.tokens[lay.query_position].startswith("[Q]") and view.tokens[lay.source_positions[0]].startswith("[A]")
    assert view.tokens[lay.answer_positions[0]].startswith("[a1]")
    assert view.heads == [Head(1, 2), Head(0, 3)]


def test_retrieval_view_marks_query_occurrences(tiny):
    view = attention_view(tiny, "UR", [(0, 0)], length=10)
    lay, ex = view.layout, view.example
    decoded = [tiny.tokenizer.decode([i]).strip() for i in lay.ids]
    assert [decoded[p] for p in lay.query_item_positions] == [ex.query] * len(lay.query_item_positions)
    assert len(lay.query_item_positions) == 2  # the occurrence and the query after '|'
    assert lay.source_positions[0] == lay.context_positions[ex.query_positions[0] + 1]  # right neighbour
    assert decoded[lay.source_positions[0]] == ex.target[0]
    assert all(view.tokens[p].startswith("[q]") for p in lay.query_item_positions)


def test_head_patterns_match_the_full_cache(tiny):
    tokens = torch.tensor([[5, 80, 81, 82, 5, 80, 81, 82]])
    _, cache = tiny.run_with_cache(tokens)
    got = head_patterns(tiny, tokens[0], [(1, 2), (0, 1)])
    torch.testing.assert_close(got[0], cache["blocks.1.attn.hook_pattern"][0, 2])
    torch.testing.assert_close(got[1], cache["blocks.0.attn.hook_pattern"][0, 1])


def test_saved_page_is_self_contained(tiny, tmp_path):
    view = attention_view(tiny, "UF", "1.0,0.2", length=6, model_name="tiny-llama")
    path = save_attention_view(view, tmp_path / "view.html", kind="both")
    text = path.read_text()
    assert path.stat().st_size > 100_000  # the circuitsvis bundle is inlined
    assert "CircuitsVis.render" in text and "AttentionHeads" in text and "AttentionPatterns" in text
    assert "tiny-llama · task UF" in text and "heads 1.0, 0.2" in text
    assert "[Q]" in text and "[A]" in text
    for cdn in ("unpkg.com", "jsdelivr", "cdn.plot.ly", "cdnjs"):
        assert cdn not in text
    assert not re.search(r"<script[^>]+src=[\"']?https?:", text)
    assert not re.search(r"import[^;]*from\s*[\"']https?:", text)
    assert not re.search(r"<link[^>]+href=[\"']?https?:", text)


def test_both_views_name_heads_and_ship_one_bundle(tiny, tmp_path):
    view = attention_view(tiny, "UF", "1.0,0.2", length=6, model_name="tiny-llama")
    text = save_attention_view(view, tmp_path / "view.html", kind="both").read_text()
    assert text.count("var CircuitsVis=") == 1  # one copy of the 1.3 MB bundle for both elements
    assert text.count("CircuitsVis.render(") == 2
    patterns_props = text[text.index("CircuitsVis.AttentionPatterns"):]
    assert '"headLabels": ["head 1.0", "head 0.2"]' in patterns_props  # not circuitsvis' default "Head 0"


def test_summary_is_said_in_words(tiny):
    view = attention_view(tiny, "UB", "1.2", length=6)
    (line,) = view.summary_lines()
    row = view.source_attention()[0]
    assert line.startswith("head 1.2: from the query position [Q] it puts")
    assert f"{row['q_to_source']:.3f} of its attention on the first answer item's source [A]" in line
    assert f"strongest key there is position {row['top_key']}" in line
    assert f"over all 6 answer steps, each predicting position puts on average {row['mean_to_source']:.3f}" in line


def test_view_displays_itself_in_a_notebook(tiny):
    view = attention_view(tiny, "UB", "1.2,0.3", length=6, model_name="tiny-llama")
    shown = view._repr_html_()
    assert "CircuitsVis.render(" in shown and "var CircuitsVis=" in shown  # offline: the bundle is inlined
    assert "<html" not in shown and "<body" not in shown and "unpkg.com" not in shown
    assert "body {" not in shown and "body{" not in shown  # the notebook's own page keeps its style
    assert "tiny-llama · task UB" in shown


def test_bad_view_arguments(tiny):
    with pytest.raises(ValueError, match="unknown task 'XY'"):
        attention_view(tiny, "XY", "0.1")
    with pytest.raises(ValueError, match=r"heads: head 2\.1 is out of range .*n_layers=2 .*n_heads=4"):
        attention_view(tiny, "UB", "2.1")
    with pytest.raises(ValueError, match="no heads"):
        attention_view(tiny, "UB", "")


def test_show_heads_cli(tmp_path, capsys):
    import show_heads

    out = tmp_path / "ub.html"
    assert show_heads.main(["--model", "tiny-llama", "--device", "cpu", "--task", "UB", "--heads", "1.2,0.3",
                            "--length", "6", "--out", str(out)]) == 0
    assert out.exists() and out.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "head 1.2: from the query position [Q] it puts" in printed and "mean to answer source" not in printed
    for argv, fragment in ((["--task", "XY", "--heads", "0.1"], "--task: unknown task 'XY'"),
                           (["--task", "UB", "--heads", "0.9"], "--heads: head 0.9 is out of range"),
                           (["--task", "UB", "--heads", "zz"], "--heads: cannot read head 'zz'")):
        with pytest.raises(SystemExit) as exit_info:
            show_heads.main(["--model", "tiny-llama", "--device", "cpu", *argv, "--out", str(tmp_path / "x.html")])
        assert exit_info.value.code == 2
        assert fragment in capsys.readouterr().err


# --------------------------------------------------------------------------- in a real browser


def circuitsvis_mount(dom: str):
    """(tag counts, text) inside the ``<div id="circuits-vis-...">`` mount point, or None."""
    from collections import Counter
    from html.parser import HTMLParser

    class Mount(HTMLParser):
        def __init__(self):
            super().__init__()
            self.depth, self.found, self.tags, self.text = 0, False, Counter(), []

        def handle_starttag(self, tag, attrs):
            if self.depth:
                self.tags[tag] += 1
                if tag == "div":
                    self.depth += 1
            elif tag == "div" and (dict(attrs).get("id") or "").startswith("circuits-vis-"):
                self.found, self.depth = True, 1

        def handle_endtag(self, tag):
            if self.depth and tag == "div":
                self.depth -= 1

        def handle_data(self, data):
            if self.depth:
                self.text.append(data)

    parser = Mount()
    parser.feed(dom)
    return (parser.tags, " ".join(parser.text)) if parser.found else None


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None,
                    reason="needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
def test_page_renders_offline_in_headless_chromium(tiny, tmp_path):
    view = attention_view(tiny, "UB", "1.2,0.3", length=6, model_name="tiny-llama")
    page = save_attention_view(view, tmp_path / "view.html")
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    dom = headless_chromium(page, screenshot=tmp_path / "view.png", window=(1200, 1400))
    # React replaced the empty mount point with the attention-heads widget
    mount = circuitsvis_mount(dom)
    assert mount is not None, "circuitsvis mount point missing from the rendered DOM"
    tags, text = mount
    assert tags["div"] > 20, f"the circuitsvis element did not render (tags inside: {dict(tags)})"
    assert "Head Selector" in text and "head 1.2" in text and "head 0.3" in text
    assert tags["canvas"] >= 1, f"no heatmap canvas in the widget (tags inside: {dict(tags)})"
    headless_chromium(blank, screenshot=tmp_path / "blank.png", window=(1200, 1400))
    shot, empty = (tmp_path / "view.png").stat().st_size, (tmp_path / "blank.png").stat().st_size
    assert shot > 5 * empty, f"screenshot looks blank ({shot} bytes vs {empty} for an empty page)"


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None,
                    reason="needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
def test_second_view_names_heads_in_headless_chromium(tiny, tmp_path):
    view = attention_view(tiny, "UB", "1.2,0.3", length=6, model_name="tiny-llama")
    dom = headless_chromium(save_attention_view(view, tmp_path / "view.html", kind="both"), window=(1200, 1400))
    mounts = dom.split('id="circuits-vis-')[1:]
    assert len(mounts) == 2, "expected two circuitsvis elements"
    patterns_text = re.sub(r"<[^>]+>", " ", mounts[1])
    assert "head 1.2" in patterns_text and "head 0.3" in patterns_text
    assert not re.search(r"Head \d", patterns_text), "the second view labels heads by index, not by name"


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None,
                    reason="needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
def test_wide_score_table_scrolls_in_headless_chromium(tiny, tmp_path):
    from types import SimpleNamespace

    scores = SimpleNamespace(scores={f"a_long_score_name_{i}": torch.rand(2, 4) for i in range(30)})
    view = attention_view(tiny, "UB", "1.2,0.3", length=6, model_name="tiny-llama", scores=scores)
    page = save_attention_view(view, tmp_path / "view.html")
    probe = """<script>window.addEventListener('load', () => {
      const table = document.querySelector('table.scores'), box = table.parentElement;
      document.body.setAttribute('data-probe', JSON.stringify({table: table.getBoundingClientRect().right,
        box: box.getBoundingClientRect().right, overflow: getComputedStyle(box).overflowX, window: innerWidth}));
    });</script></body>"""
    page.write_text(page.read_text().replace("</body>", probe))
    found = re.search(r'data-probe="([^"]*)"', headless_chromium(page, window=(1000, 900)))
    measured = __import__("json").loads(found[1].replace("&quot;", '"'))
    assert measured["table"] > measured["window"]  # wider than the window: the case to handle
    assert measured["box"] <= measured["window"] and measured["overflow"] in ("auto", "scroll"), measured
