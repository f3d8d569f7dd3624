"""The executor without a Ray instance: the serial default, the scripts' options, Ray missing, an
address that does not answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from interp.cli import Parser, run
from interp.cli.args import add_executor_args, executor_from_args
from interp.core.executor import ModelSource, RayExecutor, SerialExecutor, import_ray, make_executor


def _cell(model, shared, item):
    return (model, shared, item)


def test_serial_runs_every_cell_in_order_on_the_local_model():
    loads = []
    source = ModelSource("m", lambda: loads.append(1) or "loaded")
    executor = SerialExecutor()
    assert list(executor.map(_cell, ["a", "b"], source, shared=7, local_model="here")) == [
        (0, ("here", 7, "a")), (1, ("here", 7, "b"))]
    assert loads == []  # the driver's own model is used as is
    list(executor.map(_cell, ["a"], source))
    list(executor.map(_cell, ["b"], source))
    assert loads == [1]  # loaded once, kept by key


def test_serial_default_refuses_ray_only_options(capsys):
    parser = Parser(prog="demo")
    add_executor_args(parser)
    with pytest.raises(SystemExit) as exit_:
        executor_from_args(parser, parser.parse_args(["--workers", "2"]))
    assert exit_.value.code == 2
    assert "argument --workers: only applies with --executor ray" in capsys.readouterr().err


def test_ray_missing_is_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ValueError, match=r"^--executor: ray is not installed; install it with pip install -e '\.\[cluster\]'$"):
        import_ray()
    sys.path.insert(0, "analyses")
    try:
        import ablate_heads
    finally:
        sys.path.remove("analyses")
    with pytest.raises(SystemExit) as exit_:
        run(ablate_heads.main, ["--model", "tiny-llama", "--k", "2", "--executor", "ray", "--workers", "2"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(
        "error: argument --executor: ray is not installed; install it with pip install -e '.[cluster]'")


def test_an_address_that_does_not_answer_is_one_line(capsys):
    pytest.importorskip("ray")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    parser = Parser(prog="demo")
    add_executor_args(parser)
    with pytest.raises(SystemExit):
        executor_from_args(parser, parser.parse_args(["--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"demo: error: argument --ray-address: no Ray cluster answers at 127.0.0.1:{port}")
    with pytest.raises(ValueError, match="--ray-address: expected 'auto', 'host:port'"):
        RayExecutor(address="nowhere").start()


def test_a_ray_client_address_without_the_client_extra_is_one_line_naming_the_flag(capsys, monkeypatch):
    """Ray's own refusal came through as "argument Ray Client requires pip package ...: " (no flag)."""
    pytest.importorskip("ray")
    monkeypatch.setitem(sys.modules, "grpc", None)  # the minimal Ray: `import grpc` fails
    parser = Parser(prog="demo")
    add_executor_args(parser)
    with socket.socket() as server:  # something answers there: only the missing extra can refuse it
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"ray://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(SystemExit) as exit_:
            executor_from_args(parser, parser.parse_args(["--executor", "ray", "--ray-address", address]))
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and not any("Traceback" in line for line in err)
    assert err[-1].startswith(f"demo: error: argument --ray-address: {address} is a Ray Client address, which needs "
                              f"Ray's client extra (pip install 'ray[client]==2.60.0'); or run the script on a node")


def test_make_executor_names():
    assert make_executor("serial").name == "serial"
    with pytest.raises(ValueError, match="--executor: expected one of serial, ray, got 'dask'"):
        make_executor("dask")
    with pytest.raises(ValueError, match="--workers: expected an integer >= 1, got 0"):
        RayExecutor(workers=0)


def test_a_few_rows_product_does_not_depend_on_the_thread_count():
    """A Ray worker runs on one thread where the serial run uses every core: the answer positions'
    unembedding (a few rows times the vocabulary) must give the same bits on both, or a study on Ray
    would not write the serial table. In a fresh interpreter, as a user's script starts."""
    code = """
import interp, torch
torch.manual_seed(0)
weight = torch.randn(576, 49152) * 0.05
for rows in range(1, 17):
    x = torch.randn(rows, 576)
    torch.set_num_threads(2); two = x @ weight
    torch.set_num_threads(1); one = x @ weight
    assert torch.equal(one, two), rows
print("same")
"""
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip() == "same", done.stderr[-500:]
