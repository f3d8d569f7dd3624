"""From-scratch models kept as checkpoints (``scratch-uf``, ``scratch-ub``): trained by
[`interp.experiments.from_scratch`][interp.experiments.from_scratch] with its ``mechanism`` preset, saved as a Hugging Face folder with the word-level
tokenizer, so that [`interp.models.load_model`][interp.models.loading.load_model] and every analysis can use them."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from interp.models.store import cache_dir
from interp.core.naming import result_stem
from interp.core.tables import to_markdown, write_table
from interp.experiments.from_scratch import PRESETS, FittedModel, ScratchConfig, fit, score_bins

# Rotary positions make "the token before" one relative pattern at every position: with learned absolute
# positions (and the paper's random offset) UB stalled near 0.3 exact match where UF reached 0.98.
POSITIONAL = "rope"
PRESET = "mechanism"
POSITION_WORDS = {"rope": "rotary positions", "absolute": "absolute positions with the paper's random offset"}
# The column order of ``trained_scratch-<task>``, as it was first published.
TRAINED_COLUMNS = ["task", "positional", "split", "lengths", "accuracy", "n_examples", "expressible", "predicted",
                   "steps", "seconds", "cpu_seconds", "timed_from_step"]


def with_bos(tokenizer):
    """The tokenizer made to start every text with BOS, as the model was trained: analyses then
    prompt it with BOS first (they follow what the model's own tokenizer does).

    >>> from interp.experiments.scratch_vocab import scratch_items, scratch_tokenizer
    >>> tokenizer = with_bos(scratch_tokenizer(scratch_items(3)))
    >>> tokenizer.convert_ids_to_tokens(tokenizer.encode(" a b"))
    ['<s>', ' a', ' b']
    """
    from tokenizers.processors import TemplateProcessing

    bos = tokenizer.bos_token
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tokenizer.bos_token_id)])
    return tokenizer


def _save_fitted(fitted: FittedModel, folder: Path, info: dict) -> Path:
    """Weights (safetensors), config, tokenizer and a README in ``folder``, renamed into place whole."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        fitted.model.save_pretrained(staging)
        with_bos(fitted.tokenizer).save_pretrained(staging)
        (staging / "training_info.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
        (staging / "README.md").write_text(_readme(folder.name, info))
        os.chmod(staging, 0o755)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _readme(name: str, info: dict) -> str:
    cfg = info["config"]
    lines = [
        f"# {name}: a transformer trained from scratch on {info['task']}", "",
        f"Made by `{info['command']}`: `interp.experiments.from_scratch` preset `{info['preset']}` ({cfg['n_layers']} layers, "
        f"{cfg['n_heads']} heads, d_model {cfg['d_model']}, {POSITION_WORDS[info['positional']]}, "
        f"lengths {cfg['train_range'][0]}-{cfg['train_range'][1]}, lr {cfg['lr']}, seed {cfg['seed']}), "
        f"{info['steps']} steps, {info['seconds']:.0f} s wall.", "",
        "Prompt format: the zero-shot line `<bos> a b c : <copy> <eos>` with a BOS token first "
        "(analyses: `--shots 0`; edge patching: `--format single-shot`).", "",
        f"Teacher-forced exact match on fresh examples ({info['scoring']}):", "",
        to_markdown(info["rows"], ["split", "lengths", "accuracy", "n_examples"]),
    ]
    return "\n".join(lines) + "\n"


def train_scratch_model(task: str, folder: Path, *, results_dir: Path = Path("results"), preset: str = PRESET,
                        progress: bool = False) -> Path:
    """Train (or resume) the from-scratch model of ``task`` and save it to ``folder``.

    >>> train_scratch_model("UB", Path("checkpoints/scratch-ub"))  # doctest: +SKIP
    PosixPath('checkpoints/scratch-ub')
    """
    config: ScratchConfig = PRESETS[preset]
    name = f"scratch-{task.lower()}"
    fitted = fit(task, POSITIONAL, config, cache_dir() / "trained" / name, progress=progress)
    rows = score_bins(fitted, task, POSITIONAL, config)
    info = {"name": name, "task": task, "preset": preset, "config": asdict(config), "positional": POSITIONAL,
            "command": "make trained-models", "steps": fitted.result.final_step, "seconds": fitted.timing["seconds"],
            "rows": [asdict(row) for row in rows], "scoring": "zero-shot lines, answer must end with the line's end marker"}
    write_table(rows, result_stem(results_dir, "trained", name), TRAINED_COLUMNS,
                metadata={k: v for k, v in info.items() if k != "rows"})
    return _save_fitted(fitted, folder, info)

