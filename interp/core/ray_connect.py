"""Joining a Ray cluster: what goes wrong is one line naming ``--ray-address`` and the fix.

Ray 2.60 turns token authentication on by default: a cluster started with it refuses a process
that sends no token (or another one), which ``ray.init`` reports, after 20 s of retries, as a
failure to connect. Here the address is checked first, in milliseconds: that it answers, that a
Ray Client address (``ray://``) has Ray's client extra, and that the cluster accepts this
process's token.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator

GUIDE = "docs/guide/cluster.md"
# Ray logs this whenever it turns its default token authentication on for a cluster it starts or
# finds: noise for a study, which says where it runs in its own line.
TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Refuse at once a ``host:port`` / ``ray://host:port`` that does not answer (Ray itself
    retries for a minute before giving up), and a Ray Client address without the client extra.

    >>> check_reachable("nowhere")
    Traceback (most recent call last):
    ValueError: --ray-address: expected 'auto', 'host:port' or 'ray://host:port', got 'nowhere'
    """
    if address in ("auto", "local"):
        return
    if address.startswith("ray://") and not _has_client_extra():
        raise ValueError(f"--ray-address: {address} is a Ray Client address, which needs Ray's client extra "
                         f"(pip install 'ray[client]==2.60.0'); or run the script on a node of the cluster with "
                         f"--ray-address auto, or give the head's host:port (what `ray start --head` printed)")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray-address: expected 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise ValueError(f"--ray-address: no Ray cluster answers at {address} ({err.strerror or err})") from None


def _has_client_extra() -> bool:
    try:
        import grpc  # noqa: F401 - what Ray Client needs and the minimal Ray lacks
    except ImportError:
        return False
    return True


def is_auth_failure(err: BaseException | None) -> bool:
    """Whether Ray's error (or what caused it) is a refused authentication token.

    >>> is_auth_failure(RuntimeError("RPC error: InvalidAuthToken: missing")), is_auth_failure(ValueError("x"))
    (True, False)
    """
    for _ in range(8):  # a cause chain, never a cycle
        if err is None:
            return False
        if type(err).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def auth_error(address: str) -> ValueError:
    """The one-line refusal when the cluster at ``address`` rejects this process's token, with the fix.

    >>> str(auth_error("10.0.0.1:6379")).startswith("--ray-address: the Ray cluster at 10.0.0.1:6379 ")
    True
    """
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return ValueError(f"--ray-address: the Ray cluster at {address} requires token authentication, and this "
                          f"process sends no token: run it with RAY_AUTH_MODE=token and the cluster's token (the "
                          f"head's ~/.ray/auth_token, or RAY_AUTH_TOKEN_PATH / RAY_AUTH_TOKEN), or start every node "
                          f"with RAY_AUTH_MODE=disabled (see {GUIDE})")
    return ValueError(f"--ray-address: the Ray cluster at {address} refused this process's authentication token: "
                      f"use the token the head was started with (its ~/.ray/auth_token, via RAY_AUTH_TOKEN_PATH or "
                      f"RAY_AUTH_TOKEN) (see {GUIDE})")


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 sent to /dev/null: Ray's C++ client logs each refused attempt there."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _check_authenticated(address: str) -> None:
    """Refuse at once a cluster that rejects this process's token: ``ray.init`` retries for 20 s,
    logging every attempt, then reports a failure to connect. Any other failure is left to ``ray.init``."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return
    try:
        from ray._raylet import GcsClient
    except ImportError:  # another Ray than the locked one: ray.init reports what goes wrong
        return
    try:
        with _stderr_silenced():
            GcsClient(address=address)
    except Exception as err:  # noqa: BLE001 - Ray raises its own error types
        if is_auth_failure(err):
            raise auth_error(address) from None


class _DropTokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TOKEN_NOTICE)


@contextlib.contextmanager
def without_token_notice() -> Iterator[None]:
    """Ray's notice that it turned token authentication on, dropped while the block runs (its
    other messages, warnings and errors pass).

    >>> with without_token_notice():
    ...     logging.getLogger("ray._private.authentication.authentication_token_setup").warning(TOKEN_NOTICE)
    """
    token_logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    notice = _DropTokenNotice()
    token_logger.addFilter(notice)
    try:
        yield
    finally:
        token_logger.removeFilter(notice)


def check_address(address: str) -> None:
    """Refuse ``address`` in one line (a ``ValueError`` naming ``--ray-address``) when it is
    malformed, does not answer, needs the client extra, or refuses this process's token.

    >>> check_address("auto")  # the cluster this machine belongs to: left to ray.init
    """
    check_reachable(address)
    _check_authenticated(address)
