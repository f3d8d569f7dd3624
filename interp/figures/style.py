"""The look every figure shares: Okabe-Ito colours (colour-blind safe), Cividis / RdBu colour
scales, DejaVu Sans, accuracy in percent, and a note under each figure saying what the error
bars are."""

from __future__ import annotations

import textwrap

import plotly.graph_objects as go
import plotly.io as pio

from interp.core.naming import model_label

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "grey": "#999999",
}
PALETTE = [OKABE_ITO[c] for c in ("blue", "vermillion", "green", "orange", "sky_blue", "purple", "yellow", "black")]
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"
SCORE_SCALE = "Cividis"  # sequential, designed for colour-vision deficiency
DELTA_SCALE = "RdBu"  # diverging (ColorBrewer, colour-blind safe); red = accuracy lost
FIRST_OF_PAIR, SECOND_OF_PAIR = OKABE_ITO["blue"], OKABE_ITO["vermillion"]  # right/forward vs left/backward
CONDITION_STYLE = {  # ablation condition -> (legend name, colour)
    "baseline": ("no ablation", OKABE_ITO["grey"]),
    "induction": ("induction heads", OKABE_ITO["blue"]),
    "anti_induction": ("anti-induction heads", OKABE_ITO["vermillion"]),
    "random": ("random heads (control)", OKABE_ITO["orange"]),
}
SPLIT_STYLE = {"id": ("in distribution", OKABE_ITO["blue"], "solid"),
               "ood": ("out of distribution", OKABE_ITO["vermillion"], "dash")}

TEMPLATE = go.layout.Template(pio.templates["simple_white"])
TEMPLATE.layout.update(
    font=dict(family=FONT, size=14, color="#222222"),
    colorway=PALETTE,
    title=dict(font=dict(size=18), x=0.0, xanchor="left", xref="paper"),
    legend=dict(bgcolor="rgba(255,255,255,0.8)", font=dict(size=13)),
    hoverlabel=dict(font=dict(family=FONT)),
    margin=dict(l=80, r=30, t=90, b=110),
)
TEMPLATE.layout.xaxis.update(ticks="outside", showline=True, linecolor="#444", zeroline=False, title=dict(standoff=8))
TEMPLATE.layout.yaxis.update(ticks="outside", showline=True, linecolor="#444", zeroline=False, showgrid=True,
                             gridcolor="#e6e6e6", title=dict(standoff=8))
pio.templates["interp"] = TEMPLATE

def style(fig: go.Figure, title: str, width: int, height: int, note: str | None = None) -> go.Figure:
    """The common look: template, title, size, and an optional note under the plot.

    >>> fig = style(go.Figure(), "Head ablations", 600, 400, note="Exact-match accuracy.")
    >>> fig.layout.width, fig.layout.height
    (600, 400)
    """
    fig.update_layout(template=TEMPLATE, title_text=title, width=width, height=height)
    # A group of shared axes without a range must say autorange on its first axis (the one the others
    # match): plotly.js leaves it at its empty default [-1, 4] once another group has a range, drawing the
    # data off the chart. An axis that matches another takes that one's range, set or not.
    for axes in (fig.for_each_xaxis, fig.for_each_yaxis):
        axes(lambda axis: axis.update(autorange=True),
             selector=lambda axis: axis.range is None and axis.autorange is None and axis.matches is None)
    if note:
        chars = max(40, int((width - 100) / 7.0))  # ~7 px per character at 12 px
        note = "<br>".join(textwrap.wrap(note, chars))
        fig.add_annotation(text=note, xref="paper", yref="paper", x=0, y=0, xanchor="left", yanchor="top",
                           yshift=-62, showarrow=False, align="left", font=dict(size=12, color="#555555"))
    return fig


def model_title(name: str) -> str:
    """A model as a figure's title names it: a model loaded from a folder (or a hub repository) by its own name,
    not the full path.

    >>> model_title("/home/me/runs/ckpt-500/"), model_title("smollm2-135m+ub")
    ('ckpt-500', 'smollm2-135m+ub')
    """
    text = str(name)
    return model_label(text) if "/" in text else text
