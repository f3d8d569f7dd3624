"""The static circuit figure (interp.figures.circuit_figure): the most important edges only, every node named by its
head and role, key and value reads told apart and labelled, a title naming the model by name, and a PNG at most
1600 px tall."""

from __future__ import annotations

import html
import re
import struct

import pytest
from circuit_samples import sample_circuit

from interp.figures.browser import find_browser
from interp.figures.circuit_figure import MAX_DRAWN, MAX_PX, circuit_figure, save_circuit_figure
from interp.figures.circuit_layout import importance_order, node_label
from interp.interventions.circuits.circuit import Circuit, CircuitEdge

NODE = re.compile(r"(key |value )?\d+\.\d+ @ \w+|MLP \d+ @ \w+|embed @ \w+|logits @ \w+")


def edge_traces(fig):
    return [t for t in fig.data if t.mode == "lines+markers"]


def edge_label(trace) -> str:
    return html.unescape(trace.hovertext.split("<br>")[0])


def node_texts(fig) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.name == "node"]


@pytest.fixture(scope="module")
def big():
    return sample_circuit(200, seed=0)[0]


def test_a_200_edge_circuit_draws_its_40_most_important_edges(big):
    fig = circuit_figure(big)
    drawn = {edge_label(t) for t in edge_traces(fig)}
    expected = [big.edges[i].label for i in importance_order(big.edges)[:MAX_DRAWN]]
    assert drawn == set(expected) and len(drawn) == MAX_DRAWN
    assert expected[0] == big.edges[0].label  # the largest loss first
    note = " ".join(a.text for a in fig.layout.annotations if a.name != "node").replace("<br>", " ")
    assert "The 40 most important of its 200 edges" in note and "And 160 more edges" in note
    rest = [e.loss for i, e in enumerate(big.edges) if i not in importance_order(big.edges)[:MAX_DRAWN]]
    assert f"({sum(rest):.3f} summed)" in note


def test_every_node_is_named_by_its_head_and_role(big):
    fig = circuit_figure(big)
    names = node_texts(fig)
    assert names and all(NODE.fullmatch(n) for n in names), [n for n in names if not NODE.fullmatch(n)]
    heads = {f"{big.edges[i].reader[1:]} @ {big.edges[i].role}" for i in importance_order(big.edges)[:MAX_DRAWN]
             if big.edges[i].kind != "residual"}  # the heads of the attention reads drawn
    assert heads and heads <= set(names)
    assert fig.layout.height <= MAX_PX


def test_key_and_value_reads_are_told_apart_and_labelled_by_key_role():
    edges = (CircuitEdge("value", "a18.6", "a18.2.v", "c", "o+1", score=-3.0, loss=0.8, sources="s"),
             CircuitEdge("key", "a18.6", "a18.2.k", "c", "o+1", score=-2.0, loss=0.5, sources="s"),
             CircuitEdge("residual", "a18.2.k", "a3.4", "s", score=1.0, loss=0.4),
             CircuitEdge("residual", "logits", "a18.6", "c", score=4.0, loss=0.9))
    c = Circuit("smollm2-135m", "UF", "masks", "roles", edges, 0.9, 0.75, 1.0, 5.0, 0.0, 16, 100_000)
    fig = circuit_figure(c)
    dash = {edge_label(t): t.line.dash for t in edge_traces(fig)}
    assert dash["a18.6 @ c reads o+1 by key"] == "dash" and dash["a18.6 @ c reads o+1 by value"] == "solid"
    colour = {edge_label(t): t.line.color for t in edge_traces(fig)}
    assert colour["a18.6 @ c reads o+1 by key"] != colour["a18.6 @ c reads o+1 by value"]
    assert [a.text for a in fig.layout.annotations if a.name != "node" and a.text == "o+1"] == ["o+1", "o+1"]
    assert sorted(node_texts(fig)) == sorted(["18.6 @ c", "value 18.2 @ s", "key 18.2 @ s", "3.4 @ s", "logits @ c"])
    assert "Every edge" in fig.layout.annotations[-1].text


def test_the_title_names_a_model_folder_by_its_name_and_the_circuit_numbers():
    edges = (CircuitEdge("residual", "logits", "m5", "c", score=1.0),)
    c = Circuit("/home/someone/runs/ckpt-500/", "UB", "greedy", "roles", edges, 0.83, 0.5, 1.0, 2.0, 0.0, 8, 1234)
    title = circuit_figure(c).layout.title.text
    assert title.startswith("Circuit of ckpt-500 on UB (greedy)") and "/home" not in title
    for words in ("1 of 1,234 role edges", "recovers 0.83 of the gap", "accuracy 0.50 (clean 1.00)", "n = 8"):
        assert words in title
    assert sorted(node_texts(circuit_figure(c))) == ["MLP 5 @ c", "logits @ c"]
    assert node_label("pos_embed@s") == "pos embed @ s"


def test_text_of_a_circuit_is_shown_as_text_not_read_as_plotly_markup():
    link = "<a href='javascript:alert(1)'>x</a>"
    edges = (CircuitEdge("value", "a1.1", "a1.1.v", link, link, score=1.0, sources=link),)
    c = Circuit(f"<b>{link}</b>", link, "top-k", "roles", edges, 0.9, 1.0, 1.0, 2.0, 0.0, 4, 10, notes=(link,))
    fig = circuit_figure(c)
    texts = [fig.layout.title.text, *(a.text for a in fig.layout.annotations), *fig.layout.xaxis.ticktext,
             *(t.hovertext for t in edge_traces(fig))]
    assert not any("<a" in text or "<b>" in text for text in texts), texts
    assert f"1.1 @ {html.escape(link, quote=False)}" in texts


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs headless Chromium: run scripts/install_chromium.sh or set BROWSER_PATH")
def test_static_files_of_a_tall_circuit_stay_within_1600_px(tmp_path):
    from interp.figures.export import StaticExporter

    tall = sample_circuit(200, seed=1, layers=60)[0]  # 40 edges over 60 layers: more rows than fit at full height
    with StaticExporter() as exporter:
        paths = save_circuit_figure(tall, tmp_path / "tall", ("png", "svg", "pdf"), exporter)
    assert [p.name for p in paths] == ["tall.png", "tall.svg", "tall.pdf"]
    width, height = png_size(tmp_path / "tall.png")
    assert height <= MAX_PX and width > 800
    assert (tmp_path / "tall.pdf").read_bytes()[:4] == b"%PDF" and b"<svg" in (tmp_path / "tall.svg").read_bytes()[:200]
    assert re.search(r">\d+\.\d+ @ (bos|prompt|s|sep|c)<", (tmp_path / "tall.svg").read_text()), "no head named in the SVG"
