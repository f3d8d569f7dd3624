"""Checkpoints the user already has: a local folder, or a hub name in the local Hugging Face cache."""

from __future__ import annotations

from pathlib import Path


def local_checkpoint(name_or_path: str) -> Path | None:
    """A folder holding a config.json, given directly or found in the local HF hub cache.

    >>> local_checkpoint("no-such-org/no-such-model") is None
    True
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path
    if "/" not in name_or_path or path.exists():
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name_or_path, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not in the local cache"
        return None


def cached_hub_models() -> list[str]:
    """The ``org/name`` of every model in the local Hugging Face hub cache.

    >>> cached_hub_models()  # doctest: +SKIP
    ['HuggingFaceTB/SmolLM2-135M-Instruct']
    """
    try:
        from huggingface_hub import scan_cache_dir

        return sorted(repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "model")
    except Exception:  # noqa: BLE001 - no cache folder at all
        return []
