"""Model names: the built-in ones, aliases, and the labels results and file names carry."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: the command line reads names without importing torch
    from interp.core.lm import LanguageModel

EMBEDDED_MODEL = "smollm2-135m"
PAPER_MODEL = "qwen2.5-1.5b"
GEMMA_MODEL = "gemma-3-270m"
TINY_MODELS = ("tiny-llama", "tiny-gpt2")
# The conditions of the edge-patching study, as tables and figures name them.
CONDITION_LABELS = {"none": "no intervention", "induction": "induction edges removed",
                    "anti_induction": "anti-induction edges removed"}
# Our short names are TransformerLens aliases of *other* checkpoints ("qwen2.5-1.5b" is the base
# Qwen2.5-1.5B there): the bridge is booted under the real repository name instead.
HUB_REPOS = {EMBEDDED_MODEL: "HuggingFaceTB/SmolLM2-135M-Instruct", PAPER_MODEL: "Qwen/Qwen2.5-Coder-1.5B-Instruct",
             GEMMA_MODEL: "google/gemma-3-270m"}
ALIASES = {
    "smollm2": EMBEDDED_MODEL,
    "smollm2-135m-instruct": EMBEDDED_MODEL,
    "qwen2.5-coder-1.5b-instruct": PAPER_MODEL,
    "qwen2.5-coder-1.5b": PAPER_MODEL,
    "gemma3-270m": GEMMA_MODEL,
    "google/gemma-3-270m": GEMMA_MODEL,
    "gpt2-xl": "openai-community/gpt2-xl",
    "gpt2": "openai-community/gpt2",
}


class ModelNotFoundError(ValueError):
    """Raised when a model name resolves to nothing on this machine."""


def canonical_name(name_or_path: str) -> str:
    """Aliases resolved (case-insensitively); anything else unchanged.

    >>> canonical_name("SmolLM2"), canonical_name("tiny-gpt2")
    ('smollm2-135m', 'tiny-gpt2')
    """
    return ALIASES.get(str(name_or_path).lower(), str(name_or_path))


def slug(text: str) -> str:
    """``text`` made safe as part of a file name: ``org/model`` -> ``org_model``.

    >>> slug("openai-community/gpt2-xl")
    'openai-community_gpt2-xl'
    """
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", str(text)).strip("_") or "model"


def model_label(name_or_path: str) -> str:
    """A short label for file names of runs: ``openai-community/gpt2-xl`` -> ``gpt2-xl``,
    ``/data/ckpt/`` -> ``ckpt``, ``smollm2-135m+ub`` stays.

    >>> model_label("openai-community/gpt2-xl"), model_label("/data/ckpt/"), model_label("smollm2-135m+ub")
    ('gpt2-xl', 'ckpt', 'smollm2-135m+ub')
    """
    resolved = canonical_name(name_or_path).rstrip("/")
    return slug(Path(resolved).name if "/" in resolved else resolved)


def with_adapter(name: str, adapter: str | None) -> str:
    """The name of a base model with a LoRA adapter merged in (``smollm2-135m+ub``).

    >>> with_adapter("smollm2-135m", "ub"), with_adapter("smollm2-135m", None)
    ('smollm2-135m+ub', 'smollm2-135m')
    """
    return name if not adapter else f"{name}+{model_label(str(adapter))}"


def model_name(model: LanguageModel) -> str:
    """The name a loaded model goes by in results tables (what ``load_model`` was given).

    >>> from interp.models import load_model
    >>> model_name(load_model("tiny-gpt2", device="cpu"))
    'tiny-gpt2'
    """
    return str(getattr(model.cfg, "model_name", "") or "")


# Every kind of results table the toolkit writes; a file name starts with one of them (the longest that
# fits), so the kind can be read back from a name whose model label or variant holds underscores.
RESULT_KINDS = (
    "ablation", "ablation_summary", "head_scores", "head_sweep", "head_screen",
    "directional_bias", "directional_pairs", "directional_templates",
    "edge_patching", "edge_patching_layers", "finetune", "trained", "from_scratch", "from_scratch_summary",
    "theory_table", "planted_sensitivity", "planted_sensitivity_summary",
    "lorem_ipsum", "lorem_ipsum_summary", "git_history", "claims", "claims_matrix", "circuit_attention",
    "circuit", "circuit_summary", "circuit_curve", "circuit_components", "circuit_edges", "circuit_ranking",
    "circuit_sensitivity", "circuit_sensitivity_summary", "circuit_sensitivity_stops",
    "circuit_routes", "circuit_difference", "circuit_wiring",
    "scratch_family", "scratch_family_models", "scratch_family_routes", "scratch_family_edges",
    "scratch_family_circuits", "scratch_family_verdicts",
)


def result_stem(folder: str | Path, kind: str, model: str | None = None, *, adapter: str | None = None,
                dtype: str | None = None, variant: str | Sequence[str] = ()) -> Path:
    """The one place result files are named: ``folder/<kind>_<model label>[_<dtype>][_<variant>...]``
    (no extension; the table writer adds ``.csv``, ``.json``, ``.md``), so runs of different models,
    adapters, dtypes or settings never overwrite each other. ``model=None`` for tables that span
    models (the claims table); float32, the default dtype, is not named.

    >>> result_stem("results", "ablation", "smollm2-135m", adapter="ub").as_posix()
    'results/ablation_smollm2-135m+ub'
    >>> result_stem("results", "lorem_ipsum", "openai-community/gpt2-xl", dtype="bfloat16").as_posix()
    'results/lorem_ipsum_gpt2-xl_bfloat16'
    >>> result_stem("results", "ablation", "qwen2.5-coder-1.5b", variant="anti-by-duplicate_v_composition").name
    'ablation_qwen2.5-1.5b_anti-by-duplicate_v_composition'
    >>> result_stem("results", "from_scratch", variant="quick").name
    'from_scratch_quick'
    """
    if kind not in RESULT_KINDS:
        raise ValueError(f"kind={kind!r} is not a results table kind; expected one of {RESULT_KINDS}")
    parts = [kind]
    if model:
        parts.append(model_label(with_adapter(canonical_name(model), adapter)))
    if dtype not in (None, "float32"):
        parts.append(str(dtype))
    parts += [slug(v) for v in ([variant] if isinstance(variant, str) else variant) if v]
    return Path(folder) / "_".join(parts)


def split_result_stem(stem: str) -> tuple[str, str]:
    """A result file's stem split into its kind and the rest (model label, dtype, variants), the
    inverse of [`result_stem`][interp.core.naming.result_stem]'s joining; ``("", stem)`` for a name of no known kind.

    >>> split_result_stem("ablation_summary_smollm2-135m_anti-by-duplicate_v_composition")
    ('ablation_summary', 'smollm2-135m_anti-by-duplicate_v_composition')
    >>> split_result_stem("claims")
    ('claims', '')
    """
    fits = [k for k in RESULT_KINDS if stem == k or stem.startswith(k + "_")]
    kind = max(fits, key=len, default="")
    return kind, stem[len(kind):].lstrip("_") if kind else stem


def result_files(folder: str | Path, kind: str, suffix: str = ".csv") -> list[Path]:
    """The ``kind`` tables in ``folder``, sorted: every model, dtype and variant, without the tables of
    other kinds that share its prefix (``ablation_summary_*`` beside ``ablation_*``).

    >>> [path.name for path in result_files("results", "edge_patching")][:2]  # from the repository's root
    ['edge_patching_gemma-3-270m.csv', 'edge_patching_planted-ub_single-shot.csv']
    """
    return sorted(path for path in Path(folder).glob(f"{kind}*{suffix}") if split_result_stem(path.stem)[0] == kind)
