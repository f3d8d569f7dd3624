"""A circuit in words and as a compact HTML table: what reaches the logits, what each head reads and from whom.

>>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
>>> edges = (CircuitEdge("residual", "logits", "a1.1", "c", loss=0.9), CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", loss=0.8),
...          CircuitEdge("residual", "a1.1.v", "a0.0", "s", loss=0.7), CircuitEdge("value", "a0.0", "a0.0.v", "s", "t-1", loss=0.6))
>>> c = Circuit("planted-ub", "UB", "masks", "roles", edges, recovered=0.98, accuracy=1.0, clean_accuracy=1.0,
...             clean_metric=29.0, empty_metric=-29.0, n_prompts=8, total_edges=1049)
>>> print(describe(c))
UB on planted-ub (masks): 4 of 1,049 role edges keep 0.98 of the gap and copy 8 of 8 prompts exactly (clean 8). Into the logits at c: head 1.1. Head 1.1 at c reads o by value; its value input at s comes from head 0.0. Head 0.0 at s reads t-1 by value.
"""

from __future__ import annotations

import html
import re

COMPONENT = re.compile(r"a(\d+)\.(\d+)")


def name(label: str) -> str:
    """A component label in words: ``a18.6`` -> ``head 18.6``, ``m5`` -> ``MLP 5``, ``embed`` -> ``the token embedding``.

    >>> [name(x) for x in ("a18.6", "m5", "embed", "pos_embed", "logits")]
    ['head 18.6', 'MLP 5', 'the token embedding', 'the position embedding', 'the logits']
    """
    if COMPONENT.fullmatch(label):
        return "head " + label[1:]
    if re.fullmatch(r"m\d+", label):
        return "MLP " + label[1:]
    return {"embed": "the token embedding", "pos_embed": "the position embedding", "logits": "the logits"}.get(label, label)


def _importance(edge) -> float:
    value = edge.loss if edge.loss is not None else edge.score if edge.score is not None else 0.0
    return abs(value)


def _joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _inputs(circuit, head: str, group: str, kind: str) -> dict[str, list[str]]:
    """The writers into one input (``q`` of the head, ``k`` / ``v`` of its key/value group), by role."""
    reader = f"{head}.q" if kind == "q" else f"{group}.{kind}"
    out: dict[str, list[str]] = {}
    for e in sorted(circuit.edges, key=_importance, reverse=True):
        if e.kind == "residual" and e.reader == reader:
            out.setdefault(e.role, []).append(name(e.writer))
    return out


def describe(circuit, limit: int = 6) -> str:
    """The circuit's size and faithfulness, what writes into the logits, and for the ``limit`` most important heads
    what they read (attention reads, by key role) and who writes their inputs."""
    n = circuit.n_prompts
    text = [f"{circuit.task} on {circuit.model} ({circuit.method}): {len(circuit)} of {circuit.total_edges:,} "
            f"{circuit.grain[:-1]} edges keep {circuit.recovered:.2f} of the gap and copy {round(circuit.accuracy * n)} of "
            f"{n} prompts exactly (clean {round(circuit.clean_accuracy * n)})."]
    into_logits: dict[str, list[str]] = {}
    for e in sorted(circuit.edges, key=_importance, reverse=True):
        if e.kind == "residual" and e.reader == "logits":
            into_logits.setdefault(e.role, []).append(name(e.writer))
    for role, writers in into_logits.items():
        text.append(f"Into the logits at {role}: {_joined(writers[:limit])}" + (" and more" if len(writers) > limit else "") + ".")
    heads = [e.writer for e in sorted(circuit.edges, key=_importance, reverse=True)
             if e.kind == "residual" and COMPONENT.fullmatch(e.writer)]
    heads += [e.reader for e in circuit.edges if e.kind != "residual"]
    for head in list(dict.fromkeys(heads))[:limit]:
        reads: dict[tuple[str, str], list[str]] = {}
        for e in circuit.edges:
            if e.kind != "residual" and e.reader == head:
                reads.setdefault((e.role, e.key_role), []).append(e.kind)
        group = next((e.writer.rsplit(".", 1)[0] for e in circuit.edges if e.kind != "residual" and e.reader == head), "")
        phrases = [f"at {q} reads {k} by {' and by '.join(sorted(kinds, reverse=True))}" for (q, k), kinds in reads.items()]
        sentence = f"{name(head).capitalize()} " + ("; ".join(phrases) if phrases else "has no attention read in the circuit")
        if group:
            for kind, word in (("k", "key"), ("v", "value")):
                for role, writers in _inputs(circuit, head, group, kind).items():
                    sentence += f"; its {word} input at {role} comes from {_joined(writers[:3])}"
        for role, writers in _inputs(circuit, head, group, "q").items():
            sentence += f"; its query at {role} comes from {_joined(writers[:3])}"
        text.append(sentence + ".")
    unneeded = circuit.unneeded
    if unneeded:
        text.append(f"{unneeded} of its edges each lose under 1% of the gap when removed alone.")
    for note in circuit.notes:
        text.append(f"Note: {note}")
    return " ".join(text)


def html_summary(circuit, rows: int = 20) -> str:
    """A compact HTML view for notebooks: the summary line and the first ``rows`` edges (text escaped)."""
    head = html.escape(repr(circuit))
    body = "".join(
        f"<tr><td>{i + 1}</td><td>{html.escape(e.label)}</td><td>{'' if e.score is None else f'{e.score:.3g}'}</td>"
        f"<td>{'' if e.loss is None else f'{e.loss:.3f}'}</td></tr>" for i, e in enumerate(circuit.edges[:rows]))
    more = f"<p>... and {len(circuit) - rows} more edges</p>" if len(circuit) > rows else ""
    return (f"<div><p><b>{head}</b></p><table><tr><th>#</th><th>edge</th><th>score</th><th>loss without it</th></tr>"
            f"{body}</table>{more}</div>")
