"""The benchmarks stay runnable (their imports follow the library) and the A/B harness reports
what it claims: alternated rounds, medians, ratios against the last side."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _harness  # noqa: E402


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("bench_*.py")), ids=lambda p: p.stem)
def test_every_benchmark_imports(path):
    module = importlib.import_module(path.stem)
    assert callable(module.main)


def test_compare_alternates_and_reports_ratios(capsys):
    calls: list[str] = []

    def side(name: str, seconds: float):
        def run():
            calls.append(name)
            time.sleep(seconds)
            return name
        return run

    result = _harness.compare("fast", side("a", 0.01), "slow", side("b", 0.03), repeats=3, warmup=1, flops=False,
                              peak=False)
    assert calls == ["a", "b"] + ["a", "b"] * 3  # warm-up, then strictly alternating
    assert len(result.ratios) == 3 and 1.5 < result.ratio < 6
    assert result.a.output == "a" and result.b.output == "b"
    printed = capsys.readouterr().out
    assert "time(B) / time(A): median" in printed and "load average" in printed


def test_compare_refuses_too_few_rounds():
    with pytest.raises(ValueError, match="at least 3"):
        _harness.compare("a", lambda: None, "b", lambda: None, repeats=2, flops=False, peak=False)


def test_flop_counter_counts_a_matmul():
    import torch

    a = torch.ones(8, 16)
    flops, value = _harness.count_flops(lambda: a @ a.T)
    assert flops == 2 * 8 * 16 * 8 and value.shape == (8, 8)
