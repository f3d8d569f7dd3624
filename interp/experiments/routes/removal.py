"""What a removed read becomes: the counterfactual keys and values, and the edge patches that put them in.

Counterfactuals (`ROUTE_COUNTERFACTUALS`), each the key or value the read sees instead of the clean one:

* ``previous_token_cut`` -- the paper's: from a run of the clean prompt with every previous-token edge
  ``i - 1 -> i`` before the copy cut in every layer and head. It takes away only what previous-token
  heads wrote (at ``o``: the previous token, the anti-induction route's cargo; at ``o + 1``: the
  induction head's key), and leaves a read's token;
* ``mean`` -- the mean over the counterfactual prompts at that position (same layout, other letters);
* ``zero`` -- zero (a value read then adds nothing; a key read scores 0, which can pull attention toward
  the entry where the other scores are negative: a zero key is not a removal);
* ``corrupt`` -- the counterfactual prompt's, the circuit study's patch. It brings the corrupt prompt's
  token in: a model that follows it copies a competitor, which only a metric that sees every other
  token (``margin``, ``logprob``, exact copies) notices.

The previous-token cut and the mean only take information away, and zero does for values
(`removal_only`, `REMOVAL_ONLY`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from interp.experiments.routes.reads import Entries
from interp.interventions.circuits.attention import KeysValues, counterfactual_keys_values, mean_keys_values
from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.layout import AttentionLayout, check_layers
from interp.interventions.edges.patching import EdgePatch, Edges
from interp.models.bridge import TransformerBridge

ROUTE_COUNTERFACTUALS: tuple[str, ...] = ("previous_token_cut", "mean", "zero", "corrupt")
REMOVAL_ONLY: tuple[str, ...] = ("previous_token_cut", "mean", "zero")


def removal_only(counterfactual: str, kind: str) -> bool:
    """Whether ``counterfactual`` takes a ``kind`` read's information away without bringing any in.

    >>> removal_only("zero", "value"), removal_only("zero", "key"), removal_only("corrupt", "value")
    (True, False, False)
    """
    return counterfactual in REMOVAL_ONLY and not (counterfactual == "zero" and kind == "key")
Heads = Mapping[int, Sequence[int]]  # layer -> query heads


def check_counterfactuals(counterfactuals: Sequence[str]) -> tuple[str, ...]:
    """``counterfactuals`` as a tuple, each one of `ROUTE_COUNTERFACTUALS`.

    >>> check_counterfactuals(["zero"])
    ('zero',)
    >>> check_counterfactuals(["noise"])
    Traceback (most recent call last):
    ValueError: counterfactual 'noise'; expected one of previous_token_cut, mean, zero, corrupt
    """
    for name in counterfactuals:
        if name not in ROUTE_COUNTERFACTUALS:
            raise ValueError(f"counterfactual {name!r}; expected one of {', '.join(ROUTE_COUNTERFACTUALS)}")
    if not counterfactuals:
        raise ValueError(f"no counterfactual given; expected some of {', '.join(ROUTE_COUNTERFACTUALS)}")
    return tuple(counterfactuals)


def task_means(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask, counterfactuals: Sequence[str],
               batch_size: int = 8) -> KeysValues | None:
    """The per-position means of keys and values over ``task``'s counterfactual prompts, when
    ``counterfactuals`` asks for ``mean`` (one set for every chunk of the task), else None."""
    return mean_keys_values(model, layout, task, batch_size) if "mean" in counterfactuals else None


def chunk_counterfactual(model: TransformerBridge, layout: AttentionLayout, chunk: CircuitTask, counterfactual: str,
                         means: KeysValues | None = None) -> KeysValues:
    """Keys and values of every position that a removed read sees under ``counterfactual``, for the rows
    of ``chunk`` (whose positions must include the first answer: the previous-token cut stops there).

    >>> from interp.models import load_model
    >>> from interp.interventions.edges.layout import attention_layout
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> layout, task = attention_layout(model), copying_task(model.tokenizer, "UB", 3, 2)
    >>> tuple(chunk_counterfactual(model, layout, task, "zero").values[1].shape)   # [batch, pos, kv_head, d_head]
    (2, 11, 4, 180)
    """
    return counterfactual_keys_values(model, layout, chunk, counterfactual, means)


def removal_patches(kind: str, entries: Entries, counter: KeysValues, heads: Heads | None, batch: int,
                    layout: AttentionLayout) -> list[EdgePatch]:
    """Edge patches giving each entry's query ``counter``'s key or value of its source, in every layer and
    head (``heads`` None) or in ``heads`` only; no patch for no entries.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.edges.layout import attention_layout
    >>> from interp.experiments.routes.reads import Entries
    >>> model = load_model("planted-ub", device="cpu")
    >>> layout = attention_layout(model)
    >>> zero = KeysValues({l: torch.zeros(1, 6, 4, 180) for l in (0, 1)}, {l: torch.zeros(1, 6, 4, 180) for l in (0, 1)})
    >>> [(p.layers, p.heads) for p in removal_patches("value", Entries(torch.tensor([5]), torch.tensor([2])), zero,
    ...                                                {1: [1, 0]}, 1, layout)]
    [((1,), (0, 1))]
    """
    if not len(entries):
        return []
    edges = Edges.shared(entries.query, entries.source, batch)
    table = counter.table(kind)
    groups = [(None, None)] if heads is None else [((layer,), tuple(sorted(hs))) for layer, hs in sorted(heads.items()) if hs]
    patches = []
    for layers, group in groups:
        acting = check_layers(layers, layout.n_layers)
        replacement = {layer: table[layer][:, entries.source] for layer in acting}
        patches.append(EdgePatch(kind, edges, replacement, None if layers is None else tuple(layers), group))
    return patches


def heads_label(heads: Heads | None) -> str:
    """``all``, or the heads as ``layer.head;layer.head``.

    >>> heads_label(None), heads_label({1: [2, 0], 0: [3]})
    ('all', '0.3;1.0;1.2')
    """
    if heads is None:
        return "all"
    return ";".join(f"{layer}.{h}" for layer in sorted(heads) for h in sorted(heads[layer]))

