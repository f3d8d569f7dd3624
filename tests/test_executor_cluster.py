"""Ray as a user meets it: a two-node cluster on this machine (``ray start --head`` and ``ray start
--address``, token authentication on, the token shared through ``RAY_AUTH_TOKEN_PATH``) runs
``ablate_heads.py --executor ray --ray-address`` and writes the serial tables byte for byte; a
driver without the token, or with another one, gets one line saying it is authentication; a local
instance says where it runs without Ray's token notice.

The cluster is this module's own: its own temporary folder (so nothing else on the machine finds
it, and ``ray.init()`` elsewhere never joins it), free ports from the kernel, and a token of its
own (``~/.ray/auth_token`` is neither read nor written). Its processes are stopped by process group,
and any left over by the folder in their command line, even when a test fails: ``ray stop`` would
stop every Ray process of the machine, other tests' and other users' included.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
STUDY = ["--model", "tiny-llama", "--tasks", "UF", "--lengths", "4", "--k", "1", "--n", "2", "--kinds", "zero",
         "--random-seeds", "0", "--score-sequences", "2", "--quiet"]
JOIN = """
import sys
from interp.cli import Parser
from interp.cli.args import add_executor_args, executor_from_args
parser = Parser(prog="demo")
add_executor_args(parser)
executor = executor_from_args(parser, parser.parse_args(["--executor", "ray", *sys.argv[1:]]))
executor.close()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # no cluster or token of the caller's
    return {**env, "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1", **settings}


def _stop(groups: list[int], folder: str) -> None:
    """SIGKILL our `ray start` process groups, then any process still naming our folder."""
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if folder.encode() in command and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _start_node(arguments: list[str], env: dict, folder: str, groups: list[int]) -> subprocess.Popen:
    """``ray start ...`` in a session of its own (its daemons share its process group); it exits once
    the node is up."""
    node = subprocess.Popen([str(RAY), "start", *arguments, f"--temp-dir={folder}", "--num-cpus=1",
                             f"--dashboard-agent-listen-port={_free_port()}", "--disable-usage-stats"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    groups.append(node.pid)
    return node


def _wait_started(node: subprocess.Popen) -> None:
    out, _ = node.communicate(timeout=90)
    assert node.returncode == 0, out[-2000:]


def _wait_listening(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the head's GCS never listened on port {port}")


@pytest.fixture(scope="module")
def cluster():
    """(address, environment with the token) of a head and a second node on this machine."""
    if not RAY.exists():
        pytest.skip(f"no ray command beside {sys.executable}")
    folder = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    token = Path(folder) / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    port, groups = _free_port(), []
    try:
        head = _start_node(["--head", f"--port={port}", "--include-dashboard=false"], env, folder, groups)
        _wait_listening(port)  # the second node joins while the head starts its other daemons
        second = _start_node([f"--address=127.0.0.1:{port}"], env, folder, groups)
        _wait_started(head)
        _wait_started(second)
        yield f"127.0.0.1:{port}", env
    finally:
        _stop(groups, folder)
        time.sleep(0.2)
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_two_node_cluster_writes_the_serial_tables(cluster, tmp_path):
    address, env = cluster
    sys.path.insert(0, str(ROOT / "analyses"))
    try:
        import ablate_heads
    finally:
        sys.path.remove(str(ROOT / "analyses"))
    from interp.cli import run

    driver = subprocess.Popen([sys.executable, "analyses/ablate_heads.py", *STUDY, "--executor", "ray", "--workers",
                               "2", "--ray-address", address, "--out", str(tmp_path / "ray")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run(ablate_heads.main, [*STUDY, "--out", str(tmp_path / "serial")])  # while the driver starts
        stdout, stderr = driver.communicate(timeout=180)
    finally:
        driver.kill()
    done = subprocess.CompletedProcess(driver.args, driver.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert lines, "no line says where the cells run"
    assert (f"ray: 2 workers of 1 CPU each on the Ray cluster at {address} (2 nodes, 2 CPUs); watch it with "
            f"`RAY_AUTH_MODE=token ray status --address ") in lines[0]
    assert not any("Token authentication" in line or "Traceback" in line for line in lines)
    serial = sorted(p.name for p in (tmp_path / "serial").iterdir())
    assert serial == sorted(p.name for p in (tmp_path / "ray").iterdir()) and len(serial) == 9
    for name in serial:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes(), name


@pytest.mark.parametrize("driver", ["no token", "another token"])
def test_a_refused_token_is_one_line_saying_it_is_authentication(cluster, tmp_path, driver):
    """Before: 20 s of retries logged to stderr, then "could not join ...: Failed to connect to Ray
    cluster at ..." (an authentication failure reported as a connection failure)."""
    address, _ = cluster
    if driver == "no token":
        env = _env()
        expected = (f"demo: error: argument --ray-address: the Ray cluster at {address} requires token "
                    f"authentication, and this process sends no token: run it with RAY_AUTH_MODE=token and the "
                    f"cluster's token")
    else:
        other = tmp_path / "other-token"
        other.write_text(secrets.token_hex(32))
        env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(other))
        expected = (f"demo: error: argument --ray-address: the Ray cluster at {address} refused this process's "
                    f"authentication token: use the token the head was started with")
    started = time.perf_counter()
    done = _run([sys.executable, "-c", JOIN, "--ray-address", address], env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(expected), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "InvalidAuthToken" not in done.stderr  # Ray's own log lines too
    assert time.perf_counter() - started < 15  # refused at once, not after Ray's 20 s of retries


def test_a_local_instance_says_where_it_runs_without_the_token_notice():
    done = _run([sys.executable, "-c", JOIN, "--workers", "1"], _env(), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("ray: 1 worker of ") and " on a local Ray instance started here (1 node, " in lines[0]
    assert "it stops when the study ends); watch it with `RAY_AUTH_MODE=token ray status --address " in lines[0]
