"""How well a score ranks a known circuit: ROC AUC, as auto-circuit and ACDC report it. (Circuits themselves are
selected in `interp.interventions.circuits.find`.)"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float
from torch import Tensor


def roc_auc(scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"]) -> float:
    """Probability that a true edge outranks a false one by ``|score|`` (ties count half).

    >>> roc_auc(torch.tensor([3.0, -2.0, 0.5, 0.0]), torch.tensor([True, True, False, False]))
    1.0
    """
    s = scores.abs().double()
    pos, neg = s[truth], s[~truth]
    if not len(pos) or not len(neg):
        raise ValueError("ROC AUC needs at least one true and one false edge")
    greater = (pos[:, None] > neg[None, :]).double().sum()
    ties = (pos[:, None] == neg[None, :]).double().sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))
