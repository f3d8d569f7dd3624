"""Attention views: circuitsvis pages for chosen heads on one task example, viewable offline.

``attention_view(model, "UB", "18.6,17.3")`` runs the model once on a prompt of the task with
its answer appended (teacher forcing, as ``interp.measure.evaluate`` scores) and keeps the attention
patterns (``blocks.{L}.attn.hook_pattern``) of the chosen query heads. ``save_attention_view``
writes one self-contained HTML page: circuitsvis' JavaScript bundle is inlined from the installed
wheel (``RenderedHTML.local_src``; ``str(view)`` / ``show_code()`` would import it from a CDN), so
the page renders with no network.

Positions are marked in the token labels:

* ``[Q]`` the query position: the prompt's last token, whose next-token prediction is the first
  answer item (the attention row to look at);
* ``[A]`` the answer's source: where the first answer item sits in the test input (the key a
  head that solves the task attends to from ``[Q]``);
* ``[q]`` retrieval only: the occurrences of the query item in the test input;
* ``[a1]``, ``[a2]``, ... the teacher-forced answer tokens.

A table on the page gives, for each head, the attention from ``[Q]`` to ``[A]`` and, averaged
over all answer steps, the attention from each predicting position to the source of the item it
must produce (for UB that is the anti-induction edge, for UF the induction edge).
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch

from interp.core.heads import Head, HeadLike, parse_heads
from interp.core.lm import HookedModel, context_length
from interp.core.tables import atomic_write_text
from interp.data.tasks import TaskExample, get_task
from interp.figures.browser import headless_chromium  # noqa: F401 - re-exported: checks of attention pages use it
from interp.models.bridge import act_name
from interp.prompts import PromptConfig, PromptLayout, prompt_layout

ViewKind = Literal["heads", "patterns", "both"]
VIEW_KINDS: tuple[str, ...] = get_args(ViewKind)
MARK_QUERY, MARK_SOURCE, MARK_QUERY_ITEM = "[Q]", "[A]", "[q]"


# --------------------------------------------------------------------------- patterns


def pattern_hook_name(layer: int) -> str:
    """The hook whose value [`head_patterns`][interp.figures.attention.head_patterns] reads: ``hook_pattern`` of ``layer``.

    >>> pattern_hook_name(3)
    'blocks.3.attn.hook_pattern'
    """
    return act_name("pattern", layer)


def head_patterns(model: HookedModel, tokens: torch.Tensor | Sequence[int], heads: Sequence[HeadLike]) -> torch.Tensor:
    """Attention patterns ``[len(heads), query_pos, key_pos]`` of one sequence, caching only the
    layers the heads live in.

    >>> from interp.models import load_model
    >>> head_patterns(load_model("tiny-llama", device="cpu"), [1, 2, 3], ["1.2", "0.1"]).shape  # head, query, key
    torch.Size([2, 3, 3])
    """
    heads = parse_heads(list(heads), model.cfg.n_layers, model.cfg.n_heads)
    if not heads:
        raise ValueError("heads: no heads given")
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.shape[0] != 1:
        raise ValueError(f"tokens: expected one sequence, got a batch of {tokens.shape[0]}")
    wanted = {pattern_hook_name(h.layer) for h in heads}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens.to(model.cfg.device), names_filter=lambda name: name in wanted)
    return torch.stack([cache[pattern_hook_name(h.layer)][0, h.head].float().cpu() for h in heads])


def token_label(tokenizer, token_id: int) -> str:
    """A readable label for one token: newlines and tabs shown as symbols, never empty.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer()
    >>> token_label(tokenizer, tokenizer.encode("\\n", add_special_tokens=False)[0])
    '↵'
    """
    text = tokenizer.decode([token_id])
    text = text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")
    # keep the label from ending the inline <script> it is embedded in
    text = text.replace("</", "<\u200b/").replace("<!--", "<\u200b!--")
    return text if text else "∅"


# --------------------------------------------------------------------------- the view


@dataclass
class AttentionView:
    """Everything an attention page shows; ``patterns`` is ``[head, query_pos, key_pos]``."""

    model_name: str
    task: str
    length: int
    example_index: int
    seed: int
    heads: list[Head]
    tokens: list[str]  # labels, with position marks
    raw_tokens: list[str]
    patterns: np.ndarray
    layout: PromptLayout
    example: TaskExample
    prompt_text: str
    n_layers: int
    n_heads: int
    marks: dict[int, str] = field(default_factory=dict)
    head_scores: dict[str, dict[str, float]] = field(default_factory=dict)  # head -> score name -> value

    @property
    def title(self) -> str:
        heads = ", ".join(str(h) for h in self.heads)
        return (f"{self.model_name} · task {self.task} (length {self.length}, example {self.example_index}) "
                f"· head{'s' if len(self.heads) > 1 else ''} {heads}")

    def source_attention(self) -> list[dict]:
        """Per head: attention from [Q] to [A], and mean attention from each predicting position to
        the source of the item it must produce."""
        rows = []
        q, sources = self.layout.query_position, self.layout.source_positions
        steps = list(zip(self.layout.predicting_positions, sources))
        for i, head in enumerate(self.heads):
            pattern = self.patterns[i]
            top_key = int(pattern[q].argmax())
            rows.append({
                "head": str(head),
                "q_to_source": float(pattern[q, sources[0]]),
                "mean_to_source": float(np.mean([pattern[p, s] for p, s in steps])),
                "n_steps": len(steps),
                "top_key": top_key,
                "top_key_token": self.raw_tokens[top_key],
                "top_key_weight": float(pattern[q, top_key]),
            })
        return rows

    def summary_lines(self) -> list[str]:
        """Per head, its attention to the answer's source said in words: from [Q] alone, and
        averaged over every answer step (a head can miss [A] from [Q] yet follow the sources later)."""
        return [_summary_line(row) for row in self.source_attention()]

    def _repr_html_(self) -> str:
        """The page's content, so a notebook cell that ends with a view shows it (offline: the
        JavaScript is inlined)."""
        return f"<style>{_CSS}</style>" + attention_fragment(self, "heads")


def _summary_line(row: dict) -> str:
    steps = f"{row['n_steps']} answer step{'s' if row['n_steps'] != 1 else ''}"
    return (f"head {row['head']}: from the query position [Q] it puts {row['q_to_source']:.3f} of its attention on "
            f"the first answer item's source [A] (its strongest key there is position {row['top_key']} "
            f"'{row['top_key_token']}', {row['top_key_weight']:.3f}); over all {steps}, each predicting position "
            f"puts on average {row['mean_to_source']:.3f} on the source of the item it must produce.")


def attention_view(model: HookedModel, task: str, heads: str | Sequence[HeadLike], *, length: int = 10, example: int = 0,
                   seed: int = 0, prompt_config: PromptConfig = PromptConfig(), append_answer: bool = True,
                   model_name: str | None = None, source=None, scores=None) -> AttentionView:
    """Attention of ``heads`` (``"18.6,17.3"`` or ``[(18, 6), ...]``) on example ``example`` of
    ``task`` at ``length``, with the same prompts as ``interp.measure.evaluate.task_prompts``. ``scores``
    (a [`interp.measure.head_scores.HeadScores`][interp.measure.head_scores.HeadScores], e.g. ``interp.measure.mechanism_scores.all_head_scores``) are
    shown beside each head.

    >>> view = attention_view(load_model("planted-ub"), "UB", "1.1,1.2", prompt_config=PromptConfig(n_shots=0))  # doctest: +SKIP
    """
    from interp.measure.encoding import resolve_prepend_bos
    from interp.measure.evaluate import task_prompts

    spec = get_task(task)
    parsed = parse_heads(heads, model.cfg.n_layers, model.cfg.n_heads, name="heads")
    if not parsed:
        raise ValueError("heads: no heads given (expected e.g. '18.6,17.3')")
    if example < 0:
        raise ValueError(f"example={example} must be >= 0")
    prompt = task_prompts(model, spec, length, example + 1, seed, prompt_config, source=source)[example]
    layout = prompt_layout(model.tokenizer, prompt, resolve_prepend_bos(model, prompt_config), append_answer)
    n_ctx = context_length(model)
    if n_ctx is not None and len(layout.ids) > n_ctx:
        raise ValueError(f"length={length}: the prompt{' + answer' if append_answer else ''} has {len(layout.ids)} "
                         f"tokens but the model's context (cfg.n_ctx) is {n_ctx}; use a shorter length or fewer shots")
    patterns = head_patterns(model, layout.ids, parsed).numpy()
    raw = [token_label(model.tokenizer, i) for i in layout.ids]
    marks: dict[int, str] = {}
    for p in layout.query_item_positions:
        marks[p] = MARK_QUERY_ITEM
    for i, p in enumerate(layout.answer_positions):
        marks[p] = f"[a{i + 1}]"
    marks[layout.source_positions[0]] = marks.get(layout.source_positions[0], "") + MARK_SOURCE
    marks[layout.query_position] = marks.get(layout.query_position, "") + MARK_QUERY
    labels = [marks.get(i, "") + t for i, t in enumerate(raw)]
    name = model_name or str(getattr(model.cfg, "model_name", None) or "model")
    per_head = {str(h): {k: float(v[h]) for k, v in scores.scores.items()} for h in parsed} if scores is not None else {}
    return AttentionView(name, spec.name, length, example, seed, parsed, labels, raw, patterns, layout,
                         prompt.example, prompt.text, int(model.cfg.n_layers), int(model.cfg.n_heads), marks, per_head)


# --------------------------------------------------------------------------- HTML


def circuitsvis_bundle() -> str:
    """circuitsvis' JavaScript bundle from the installed wheel, safe to inline in one ``<script>``
    (what its ``local_src`` inlines per element; a page with several elements needs it once).

    >>> "CircuitsVis" in circuitsvis_bundle()
    True
    """
    import circuitsvis

    bundle = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    return bundle.read_text(encoding="utf-8").replace("</script>", "")


def circuitsvis_html(view: AttentionView, kind: ViewKind = "heads") -> str:
    """The circuitsvis element(s) of ``view``, each labelling heads by name (``18.6``), with one
    inlined copy of the JavaScript bundle (no CDN).

    >>> html_text = circuitsvis_html(attention_view(load_model("planted-ub"), "UB", "1.1"))  # doctest: +SKIP
    """
    from circuitsvis.utils.convert_props import convert_props

    if kind not in VIEW_KINDS:
        raise ValueError(f"kind={kind!r}; expected one of {VIEW_KINDS}")
    attention = np.round(view.patterns.astype(np.float64), 4)
    names = [f"head {h}" for h in view.heads]
    elements = []  # (React element, its props), as circuitsvis' attention_heads / attention_patterns pass them
    if kind in ("heads", "both"):
        elements.append(("AttentionHeads", dict(attention=attention, tokens=view.tokens, attentionHeadNames=names,
                                                maxValue=1.0, minValue=0.0, maskUpperTri=True)))
    if kind in ("patterns", "both"):
        # the Python wrapper of AttentionPatterns has no head names; its React element takes them as headLabels
        elements.append(("AttentionPatterns", dict(tokens=view.tokens, attention=attention, headLabels=names)))
    ids = [f"circuits-vis-{uuid.uuid4().hex[:13]}" for _ in elements]
    mounts = "\n".join(f'<div id="{i}" class="circuitsvis-element" style="margin: 15px 0;"></div>' for i in ids)
    calls = "\n".join(f'CircuitsVis.render("{i}", CircuitsVis.{name}, {convert_props(props)});'
                      for i, (name, props) in zip(ids, elements))
    return f'{mounts}\n<script crossorigin type="module">\n{circuitsvis_bundle()}\n{calls}\n</script>'


# Every rule is scoped to the view's own element, so a notebook showing it keeps its own look.
_CSS = """
.interp-attention { font-family: "DejaVu Sans", Arial, Helvetica, sans-serif; color: #222; max-width: 1400px; }
.interp-attention h1 { font-size: 20px; margin: 0 0 6px 0; }
.interp-attention p, .interp-attention li, .interp-attention td, .interp-attention th { font-size: 14px; }
.interp-attention code, .interp-attention .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.interp-attention table { border-collapse: collapse; margin: 8px 0 16px 0; }
.interp-attention .scroll { max-width: 100%; overflow-x: auto; }
.interp-attention td, .interp-attention th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
.interp-attention th { background: #f2f2f2; }
.interp-attention .mark { font-weight: bold; font-family: "DejaVu Sans Mono", monospace; }
.interp-attention .q { color: #D55E00; } .interp-attention .a { color: #0072B2; }
.interp-attention .qi { color: #009E73; } .interp-attention .ans { color: #CC79A7; }
.interp-attention .prompt { white-space: pre-wrap; background: #f7f7f7; padding: 8px; border: 1px solid #ddd;
                            max-height: 220px; overflow: auto; font-size: 12px; }
.interp-attention .circuitsvis-view { border-top: 1px solid #ddd; margin-top: 12px; overflow-x: auto; }
.interp-attention footer { color: #777; font-size: 12px; margin-top: 24px; }
"""


def attention_fragment(view: AttentionView, kind: ViewKind = "heads") -> str:
    """The page's content without the document around it: what a notebook shows for ``view``.

    >>> "circuitsvis-view" in attention_fragment(attention_view(load_model("planted-ub"), "UB", "1.1"))  # doctest: +SKIP
    True
    """
    import circuitsvis

    esc = html.escape
    ex = view.example
    spec = get_task(view.task)
    context = " ".join(ex.context)
    test_input = f"{context} | {ex.query}" if ex.query is not None else context
    return f"""<div class="interp-attention">
<header>
<h1 id="title">{esc(view.title)}</h1>
<p>Model <b>{esc(view.model_name)}</b> ({view.n_layers} layers × {view.n_heads} query heads) ·
task <b>{esc(view.task)}</b>: {esc(spec.description)} · heads (layer.head):
<b>{esc(", ".join(str(h) for h in view.heads))}</b> · {len(view.tokens)} tokens.</p>
<p>Test input <code>{esc(test_input)}</code> → answer <code>{esc(" ".join(ex.target))}</code>
(example {view.example_index}, seed {view.seed}).</p>
</header>
<section id="legend"><ul>{"".join(_legend_items(view))}</ul></section>
<section id="summary">
<ul class="in-words">{"".join(f"<li>{esc(line)}</li>" for line in view.summary_lines())}</ul>
<div class="scroll"><table><tr><th>head</th><th>attention [Q] → [A]</th>
<th>mean attention to the answer source, all answer steps</th><th>top key from [Q] (weight)</th></tr>
{_source_attention_rows(view)}</table></div>
{_score_table(view)}
</section>
<details><summary>prompt text</summary><div class="prompt mono">{esc(view.prompt_text)}</div></details>
<p>Attention patterns (rows: query / destination position, columns: key / source position; causal). Hover or click a
head to enlarge it; hover tokens to see where they attend.</p>
<div class="circuitsvis-view" data-heads="{esc(";".join(str(h) for h in view.heads))}">
{circuitsvis_html(view, kind)}
</div>
<footer>Made by interp.figures.attention with circuitsvis {esc(getattr(circuitsvis, "__version__", "?"))}
(JavaScript bundled inline; no network needed).</footer>
</div>"""


def attention_page(view: AttentionView, kind: ViewKind = "heads") -> str:
    """A complete, self-contained HTML page for ``view``.

    >>> page = attention_page(attention_view(load_model("planted-ub"), "UB", "1.1"))  # doctest: +SKIP
    >>> page.startswith("<!DOCTYPE html>")  # doctest: +SKIP
    True
    """
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(view.title)}</title>
<style>body {{ margin: 24px; }}
{_CSS}</style>
</head>
<body>
{attention_fragment(view, kind)}
</body>
</html>
"""


def _legend_items(view: AttentionView) -> list[str]:
    """The page's legend: one ``<li>`` per kind of position mark the view's tokens carry."""
    esc = html.escape
    lay, ex, tok = view.layout, view.example, view.raw_tokens
    q, src = lay.query_position, lay.source_positions[0]
    legend = [
        f'<li><span class="mark q">{MARK_QUERY}</span> query position {q} (token <code>{esc(tok[q])}</code>): '
        f"its prediction is the first answer item <code>{esc(ex.target[0])}</code>.</li>",
        f'<li><span class="mark a">{MARK_SOURCE}</span> answer source position {src} (token <code>{esc(tok[src])}</code>): '
        f"where that item sits in the test input; a head solving {esc(view.task)} attends here from {MARK_QUERY}.</li>",
    ]
    if lay.query_item_positions:
        positions = ", ".join(map(str, lay.query_item_positions))
        legend.append(f'<li><span class="mark qi">{MARK_QUERY_ITEM}</span> occurrences of the query item '
                      f"<code>{esc(ex.query or '')}</code> at positions {positions} (the last one is the query after '|').</li>")
    if len(lay.answer_positions) == 1:
        legend.append(f'<li><span class="mark ans">[a1]</span> the teacher-forced answer token, position '
                      f"{lay.answer_positions[0]}.</li>")
    elif lay.answer_positions:
        legend.append(f'<li><span class="mark ans">[a1]</span>…<span class="mark ans">[a{len(lay.answer_positions)}]</span> '
                      f"the teacher-forced answer tokens, positions {lay.answer_positions[0]}–{lay.answer_positions[-1]}.</li>")
    return legend


def _source_attention_rows(view: AttentionView) -> str:
    """The summary table's rows: per head, attention to the answer source and the top key from [Q]."""
    esc = html.escape
    return "".join(
        f"<tr><td>{esc(r['head'])}</td><td>{r['q_to_source']:.3f}</td><td>{r['mean_to_source']:.3f} "
        f"({r['n_steps']} step{'s' if r['n_steps'] != 1 else ''})</td>"
        f"<td>{r['top_key']} <code>{esc(r['top_key_token'])}</code> ({r['top_key_weight']:.3f})</td></tr>"
        for r in view.source_attention()
    )


def _score_table(view: AttentionView) -> str:
    """Each shown head's scores (paper's and mechanism), one row per head; empty without scores."""
    if not view.head_scores:
        return ""
    names = list(next(iter(view.head_scores.values())))
    header = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join(f"<tr><td>{html.escape(head)}</td>" + "".join(f"<td>{values[n]:.3f}</td>" for n in names) + "</tr>"
                   for head, values in view.head_scores.items())
    return f'<div class="scroll"><table class="scores"><tr><th>head</th>{header}</tr>{body}</table></div>'


def save_attention_view(view: AttentionView, path: str | Path, kind: ViewKind = "heads") -> Path:
    """Write the page for ``view`` to ``path`` (atomically) and return the path.

    >>> save_attention_view(attention_view(load_model("planted-ub"), "UB", "1.1"), "ub.html")  # doctest: +SKIP
    PosixPath('ub.html')
    """
    return atomic_write_text(path, attention_page(view, kind))
