"""Turning ``device`` / ``dtype`` arguments into torch objects, with one clear error each."""

from __future__ import annotations

import torch

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
          "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` / ``"auto"`` pick CUDA when present, else the CPU.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a torch device (expected 'cpu', 'cuda', 'cuda:1', 'auto')") from err
    if resolved.type == "meta":
        raise ValueError(f"device={device!r} holds shapes but no data: no model can run on it "
                         f"(expected 'cpu', 'cuda', 'cuda:1', 'auto')")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available on this machine")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """A dtype from its name (``"bf16"``, ``"float32"``, ...) or itself; ``None`` is float32.

    >>> resolve_dtype("bf16"), resolve_dtype(None)
    (torch.bfloat16, torch.float32)
    """
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not understood (expected one of {sorted(DTYPES)})")
    return DTYPES[dtype]


def dtype_name(dtype: torch.dtype) -> str:
    """The name tables and file names use for ``dtype`` (``"bfloat16"``).

    >>> dtype_name(torch.bfloat16)
    'bfloat16'
    """
    return str(dtype).removeprefix("torch.")
