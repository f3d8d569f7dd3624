"""Changing a model's computation to see what it depends on: head ablation (zero / mean), the
replay that recomputes only the layers after an ablation, the single-head sweep, the attribution
screen with one head's exact ablation path to check it, and edge-level patching (``edges``)."""
