"""What an attention entry is patched to: every layer's keys and values on some tokens, and the counterfactual
runs of `interp.interventions.circuits.attention` -- the corrupt prompts', zeros, the means over the corrupt
prompts, or the paper's run of the clean prompts with every previous-token edge cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.interventions.circuits.scores import PassCount, _chunks, check_method
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout  # noqa: F401 (the examples use it)
from interp.interventions.edges.patching import Edges, cut, edge_patch_hooks
from interp.measure.batching import Hook
from interp.models.bridge import TransformerBridge

ATTENTION_COUNTERFACTUALS: tuple[str, ...] = (*COUNTERFACTUALS, "previous_token_cut")


@dataclass(frozen=True)
class KeysValues:
    """Keys (as scored: after RoPE where the model has it) and values of every position, per layer,
    ``[batch, pos, kv_head, d_head]``."""

    keys: dict[int, Tensor]
    values: dict[int, Tensor]

    def table(self, kind: str) -> dict[int, Tensor]:
        return self.keys if kind == "key" else self.values



def check_counterfactual(method: str, counterfactual: str, steps: int = 1) -> None:
    """`scores.check_method`, with the paper's counterfactual allowed where no input is interpolated.

    >>> check_counterfactual("exact", "previous_token_cut") is None
    True
    >>> check_counterfactual("eap-ig", "previous_token_cut")
    Traceback (most recent call last):
    ...
    ValueError: counterfactual='previous_token_cut'; expected one of corrupt, zero, mean
    """
    if counterfactual not in ATTENTION_COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(ATTENTION_COUNTERFACTUALS)}")
    # a run of the clean prompt, like zero and mean: it has no input to interpolate toward
    check_method(method, "zero" if counterfactual == "previous_token_cut" and method != "eap-ig" else counterfactual, steps)


def _attention_names(layout: AttentionLayout) -> dict[str, list[str]]:
    layers = range(layout.n_layers)
    return {"query": [layout.query_hook(layer) for layer in layers], "key": [layout.key_hook(layer) for layer in layers],
            "value": [get_act_name("v", layer) for layer in layers]}


def _capture(model: TransformerBridge, tokens: Tensor, names: Sequence[str], fwd_hooks: Sequence[Hook] = ()) -> dict[str, Tensor]:
    kept: dict[str, Tensor] = {}

    def keep(x, hook):
        kept[hook.name] = x.detach().float().cpu()

    with torch.no_grad():
        model.run_with_hooks(tokens.to(model.cfg.device), fwd_hooks=[*fwd_hooks, *((name, keep) for name in names)])
    return kept


def keys_values(model: TransformerBridge, layout: AttentionLayout, tokens: Int[Tensor, "batch pos"],
                fwd_hooks: Sequence[Hook] = ()) -> KeysValues:
    """Every layer's keys and values on ``tokens`` (under ``fwd_hooks``), one forward pass without gradients.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> kv = keys_values(model, attention_layout(model), torch.arange(5)[None])
    >>> tuple(kv.keys[1].shape), tuple(kv.values[0].shape)   # [batch, pos, kv_head, d_head]
    ((1, 5, 4, 16), (1, 5, 4, 16))
    """
    names = _attention_names(layout)
    kept = _capture(model, tokens, names["key"] + names["value"], fwd_hooks)
    return KeysValues({layer: kept[name] for layer, name in enumerate(names["key"])},
                      {layer: kept[name] for layer, name in enumerate(names["value"])})


def previous_token_cut_hooks(layout: AttentionLayout, batch: int, first_answer: int) -> list[Hook]:
    """The paper's counterfactual run: every previous-token edge ``i - 1 -> i``, ``i = 1 .. first_answer - 1``,
    cut in every layer and head (value zeroed, no renormalisation).

    >>> from interp.models import load_model
    >>> len(previous_token_cut_hooks(attention_layout(load_model("tiny-gpt2", device="cpu")), 1, 4))  # v, pattern, z per layer
    6
    """
    queries = torch.arange(1, first_answer)
    return edge_patch_hooks(layout, [cut(Edges.shared(queries, queries - 1, batch))])


def mean_keys_values(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask, batch_size: int = 8,
                     passes: PassCount | None = None) -> KeysValues:
    """Keys and values per position averaged over the corrupt prompts, ``[1, pos, kv_head, d_head]``.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> means = mean_keys_values(model, attention_layout(model), copying_task(model.tokenizer, "UF", 3, 4), batch_size=3)
    >>> tuple(means.values[1].shape)
    (1, 13, 4, 16)
    """
    total: KeysValues | None = None
    for rows in _chunks(task.n, batch_size):
        kv = keys_values(model, layout, task.corrupt[rows])
        if passes is not None:
            passes.forward += 1
        sums = KeysValues({l: t.sum(0, keepdim=True) for l, t in kv.keys.items()},
                          {l: t.sum(0, keepdim=True) for l, t in kv.values.items()})
        total = sums if total is None else KeysValues({l: total.keys[l] + t for l, t in sums.keys.items()},
                                                      {l: total.values[l] + t for l, t in sums.values.items()})
    return KeysValues({l: t / task.n for l, t in total.keys.items()}, {l: t / task.n for l, t in total.values.items()})


def counterfactual_keys_values(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask, counterfactual: str,
                               means: KeysValues | None = None, passes: PassCount | None = None) -> KeysValues:
    """What an attention entry is patched to, for the prompts of ``task``: the corrupt run's keys and values,
    zeros, the means over the corrupt prompts, or the paper's previous-token-cut run of the clean prompts.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> task = copying_task(model.tokenizer, "UF", 3, 2)
    >>> cut_run = counterfactual_keys_values(model, attention_layout(model), task, "previous_token_cut")
    >>> clean = keys_values(model, attention_layout(model), task.clean)
    >>> bool(cut_run.keys[0].equal(clean.keys[0])), bool(cut_run.keys[1].equal(clean.keys[1]))  # layer 0's cut moves layer 1
    (True, False)
    """
    if counterfactual not in ATTENTION_COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(ATTENTION_COUNTERFACTUALS)}")
    shape = (task.n, task.clean.shape[1], layout.n_kv_heads, layout.d_head)
    if counterfactual == "zero":
        zeros = {layer: torch.zeros(shape) for layer in range(layout.n_layers)}
        return KeysValues(zeros, zeros)
    if counterfactual == "mean":
        if means is None:
            raise ValueError("counterfactual='mean' needs the means (mean_keys_values)")
        return KeysValues({l: t.expand(shape) for l, t in means.keys.items()}, {l: t.expand(shape) for l, t in means.values.items()})
    if passes is not None:
        passes.forward += 1
    if counterfactual == "corrupt":
        return keys_values(model, layout, task.corrupt)
    first_answer = int(task.positions.min()) + 1
    return keys_values(model, layout, task.clean, previous_token_cut_hooks(layout, task.n, first_answer))

