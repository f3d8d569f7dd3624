"""The benchmarks stay runnable (their imports follow the library, one way among themselves), parse
their arguments with ``interp.cli`` (bad arguments: tests/test_cli.py), and the A/B harness reports what it claims: alternated rounds, medians,
ratios against the last side. No test here runs a benchmark's timed work."""

from __future__ import annotations

import ast
import doctest
import importlib
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import _harness  # noqa: E402

SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))
LOCAL = {p.stem for p in BENCHMARKS.glob("*.py")}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_every_benchmark_imports_and_says_what_it_prints(path, capsys):
    module = importlib.import_module(path.stem)
    assert callable(module.main)
    assert "Prints" in module.__doc__ and f"python benchmarks/{path.name}" in module.__doc__
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert f"python benchmarks/{path.name}" in capsys.readouterr().out  # the docstring, layout kept


def local_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return names & LOCAL


def test_the_benchmarks_import_each_other_one_way():
    graph = {p.stem: local_imports(p) for p in BENCHMARKS.glob("*.py")}
    assert graph["_machine"] == set() and graph["_harness"] == {"_machine"}
    assert "_harness" not in graph["bench_peak"]  # the cycle that was: _harness <-> bench_peak
    for name, imported in graph.items():  # only the shared modules are imported, never a script
        assert all(other.startswith("_") for other in imported), (name, imported)


def test_the_parsed_arguments_are_typed():
    attribution = importlib.import_module("bench_attribution").parse_args(
        ["--task", "uf", "--kinds", "mean,zero", "--variants", "ig2,recheck10"])
    assert (attribution.task, attribution.kinds, attribution.time_kinds) == ("UF", ["mean", "zero"], ["mean"])
    assert attribution.variants == ["ig2", "recheck10"] and attribution.repeats == 3
    assert importlib.import_module("bench_attribution").parse_args(["--time-kinds", ""]).time_kinds == []
    forcing = importlib.import_module("bench_teacher_forcing").build_parser().parse_args([])
    assert forcing.cases == [("UF", 20, 4), ("NF", 50, 2)]
    assert importlib.import_module("bench_evaluate").build_parser().parse_args([]).forward_shape == (8, 100)
    checksum = importlib.import_module("bench_checksum").build_parser()
    assert checksum.parse_args(["--model", "SmolLM2"]).model == "smollm2-135m"  # aliases resolved
    assert checksum.parse_args([]).repeats == 5


@pytest.mark.parametrize("name", ["_machine", "_harness", "bench_attribution", "bench_evaluate",
                                  "bench_teacher_forcing"])
def test_docstring_examples_of_the_benchmarks_run(name):
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(module, name) if t.examples]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert tests and runner.summarize(verbose=False).failed == 0


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
