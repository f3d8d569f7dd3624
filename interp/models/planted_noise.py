"""The noise that turns a planted model part-way into a random one ([`interp.models.planted.PlantedConfig`][interp.models.planted.PlantedConfig]'s
``strength``): ``strength * planted + (1 - strength) * random``, each random tensor seeded and scaled to the
norm of what it replaces."""

from __future__ import annotations

from collections.abc import Sequence

import einops
import torch
from jaxtyping import Float
from torch import Tensor


def einops_heads(per_head: torch.Tensor) -> torch.Tensor:
    """``[head, d_model, d_head]`` -> GPT-2's ``[d_model, head * d_head]`` column layout.

    >>> einops_heads(torch.zeros(2, 8, 4)).shape  # 2 heads of d_head 4 in a d_model of 8
    torch.Size([8, 8])
    """
    return einops.rearrange(per_head, "head d_model d_head -> d_model (head d_head)")


def mix_with_noise(state: dict[str, torch.Tensor], strength: float, seed: int) -> dict[str, torch.Tensor]:
    """``strength * planted + (1 - strength) * random`` for every tensor of ``state``, each random
    tensor seeded and scaled to its planted tensor's norm.

    >>> mix_with_noise({"w": torch.ones(2, 2)}, strength=1.0, seed=0)["w"].tolist()  # strength 1: the planted weights
    [[1.0, 1.0], [1.0, 1.0]]
    """
    if strength == 1.0:
        return state
    generator = torch.Generator().manual_seed(seed)
    return {name: _mixed(planted, planted.norm(), strength, generator) for name, planted in state.items()}


def mix_heads(weights: Sequence[Float[Tensor, "layer head ..."]], strength: float, seed: int) -> None:
    """Mix, in place, each head's slice of every tensor of ``weights`` (``W_Q``, ``W_K``, ``W_V``,
    ``W_O`` and ``b_Q``, in that order) with seeded noise of that head's own norm (so every planted
    head keeps the same signal-to-noise ratio, whatever its margins); a head with nothing planted gets noise of the mean norm of the planted heads of its
    layer, so the empty heads become random heads.

    >>> w_q = torch.zeros(2, 3, 4, 4)
    >>> w_q[0, 0] = 1.0  # one planted head in layer 0
    >>> mix_heads([w_q], strength=0.5, seed=0)
    >>> bool(w_q[0, 1].norm() > 0), bool(w_q[1].norm() == 0)  # layer 0's empty heads get noise; layer 1 has no plant
    (True, True)
    """
    if strength == 1.0:
        return
    generator = torch.Generator().manual_seed(seed + 1)
    for tensor in weights:
        for layer in range(tensor.shape[0]):
            norms = torch.stack([tensor[layer, head].norm() for head in range(tensor.shape[1])])
            typical = norms[norms > 0].mean() if bool((norms > 0).any()) else torch.tensor(0.0)
            for head in range(tensor.shape[1]):
                target = norms[head] if norms[head] > 0 else typical
                tensor[layer, head] = _mixed(tensor[layer, head], target, strength, generator)


def _mixed(planted: torch.Tensor, noise_norm: torch.Tensor, strength: float, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(planted.shape, generator=generator)
    return strength * planted + (1.0 - strength) * noise * noise_norm / noise.norm().clamp_min(1e-12)
