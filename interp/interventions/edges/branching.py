"""Several continuations of one shared prefix in one forward pass (a "trunk" and its "branches").

Edge patches at the last copy change nothing before it, so the clean run and every patched run share the
prompt up to the copy. Instead of running each condition on the whole prompt, the prompt is laid out once and
followed by one copy of the continuation per condition::

    [ trunk: positions 0 .. P-1 ][ branch 0: P .. P+S-1 ][ branch 1: P .. P+S-1 ] ...

Each branch token attends to the trunk and causally within its own branch (a 4-D attention mask), and carries
the position ids it would have in the plain sequence, so every branch computes exactly what a separate run on
``trunk + continuation`` would (checked in the tests), at the cost of ``P + n_branches * S`` positions instead
of ``n_branches * (P + S)``. Both the mask and ``position_ids`` are passed through the bridge's public
``forward`` to the Hugging Face model.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import einops
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.measure.batching import Hook
from interp.interventions.edges.patching import Edges
from interp.models.bridge import TransformerBridge


@dataclass(frozen=True)
class BranchedTokens:
    """Trunk and branches laid out in one sequence, with the mask and positions that keep branches apart."""

    tokens: Int[Tensor, "batch packed"]
    position_ids: Int[Tensor, "batch packed"]
    attention_mask: Bool[Tensor, "batch 1 packed packed"]
    trunk_length: int
    branch_length: int
    n_branches: int

    def branch_start(self, branch: int) -> int:
        if not 0 <= branch < self.n_branches:
            raise ValueError(f"branch {branch} out of range (0-{self.n_branches - 1})")
        return self.trunk_length + branch * self.branch_length

    def in_branch(self, edges: Edges, branch: int) -> Edges:
        """``edges`` of the plain sequence, with queries moved into ``branch`` (sources must be in the trunk)."""
        if edges.query.numel() and int(edges.source.max()) >= self.trunk_length:
            raise ValueError("edges moved into a branch must read sources in the shared trunk")
        if edges.query.numel() and (int(edges.query.min()) < self.trunk_length
                                    or int(edges.query.max()) >= self.trunk_length + self.branch_length):
            raise ValueError(f"edge queries must lie in the continuation (positions {self.trunk_length}-"
                             f"{self.trunk_length + self.branch_length - 1} of the plain sequence)")
        return edges.shifted(self.branch_start(branch) - self.trunk_length)


def branch(trunk: Int[Tensor, "batch trunk"], continuation: Int[Tensor, "batch cont"], n_branches: int) -> BranchedTokens:
    """Lay out ``trunk`` followed by ``n_branches`` copies of ``continuation``.

    >>> import torch
    >>> packed = branch(torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9]]), n_branches=2)
    >>> packed.tokens.tolist(), packed.position_ids.tolist()
    ([[5, 6, 7, 8, 9, 8, 9]], [[0, 1, 2, 3, 4, 3, 4]])
    >>> packed.attention_mask[0, 0, 5].int().tolist()   # branch 1's first token: the trunk and itself
    [1, 1, 1, 0, 0, 1, 0]
    """
    if n_branches < 1:
        raise ValueError(f"n_branches={n_branches} must be >= 1")
    batch, trunk_length = trunk.shape
    branch_length = continuation.shape[1]
    tokens = torch.cat([trunk] + [continuation] * n_branches, dim=1)
    within = torch.arange(trunk_length, trunk_length + branch_length)
    positions = torch.cat([torch.arange(trunk_length)] + [within] * n_branches)
    segment = torch.cat([torch.zeros(trunk_length, dtype=torch.long)]
                        + [torch.full((branch_length,), b + 1) for b in range(n_branches)])
    packed = len(positions)
    causal = torch.tril(torch.ones(packed, packed, dtype=torch.bool))
    visible = causal & ((segment[:, None] == segment[None, :]) | (segment[None, :] == 0))
    return BranchedTokens(tokens, einops.repeat(positions, "packed -> batch packed", batch=batch),
                          einops.repeat(visible, "q k -> batch 1 q k", batch=batch),
                          trunk_length, branch_length, n_branches)


def logits_from_hook(start: int) -> Hook:
    """Unembed only positions ``start ..``: the other logits are never scored, and the unembedding of a
    49k-token vocabulary is a fifth of a small model's forward pass.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tuple(model.run_with_hooks(torch.arange(6)[None], fwd_hooks=[logits_from_hook(4)]).shape)
    (1, 2, 354)
    """
    return ("unembed.hook_in", lambda residual, hook: residual[:, start:])


def run_branched(model: TransformerBridge, branched: BranchedTokens, fwd_hooks: Sequence[Hook] = (),
                 logits_start: int | None = None) -> Float[Tensor, "batch scored vocab"]:
    """Logits of a branched sequence from position ``logits_start`` (default: the last trunk position) on.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> trunk, continuation = torch.arange(1, 6)[None], torch.tensor([[7, 8]])
    >>> logits = run_branched(model, branch(trunk, continuation, n_branches=3))
    >>> tuple(logits.shape)   # the last trunk position, then 3 branches of 2
    (1, 7, 354)
    >>> plain = model(torch.cat([trunk, continuation], dim=1))
    >>> bool(torch.allclose(logits[:, 5:], plain[:, 5:], atol=1e-4))   # branch 2 is the plain run's end
    True
    """
    start = branched.trunk_length - 1 if logits_start is None else logits_start
    device = model.cfg.device
    hooks = [*fwd_hooks, logits_from_hook(start)]
    with torch.no_grad():
        return model.run_with_hooks(branched.tokens.to(device), fwd_hooks=hooks,
                                    attention_mask=branched.attention_mask.to(device),
                                    position_ids=branched.position_ids.to(device))
