"""Argument helpers shared by the scripts in ``analyses/`` (parsing only; no experiment logic)."""

from __future__ import annotations

import argparse

from .models import EMBEDDED_MODEL


def int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", ",").split(",") if x]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=EMBEDDED_MODEL,
                        help="model name or local checkpoint folder (default: the embedded SmolLM2-135M)")
    parser.add_argument("--device", default="auto", help="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1'")
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16, float16")
    parser.add_argument("--device-map", default=None, help="accelerate device_map, e.g. 'auto', to split a large model")
    parser.add_argument("--adapter", default=None,
                        help="LoRA adapter: a name under adapters/ (e.g. 'ub') or a folder")


def add_output_args(parser: argparse.ArgumentParser, default_dir: str = "results") -> None:
    parser.add_argument("--out", default=default_dir, help=f"output folder (default: {default_dir})")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def load_model_from_args(args: argparse.Namespace):
    """The model the common arguments describe (with its adapter, when one is named)."""
    from .models import load_model

    kwargs = dict(device=None if args.device_map else args.device, dtype=args.dtype, device_map=args.device_map)
    if getattr(args, "adapter", None):
        kwargs["adapter"] = args.adapter
    return load_model(args.model, **kwargs)
