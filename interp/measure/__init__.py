"""Measuring a model without changing it: batching, teacher-forced exact match, generation,
in-context accuracy (``evaluate``), and per-head attention scores (``head_scores``)."""
