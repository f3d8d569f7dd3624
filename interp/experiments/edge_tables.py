"""Published edge tables: the note on their intervals, and the rewrite of a table written with the
earlier columns (``n``, ``accuracy_lo/hi``, ``loss``) to the current ones:
``python -m interp.experiments.edge_tables upgrade FILE.csv``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from interp.core.stats import binomial_stderr
from interp.core.tables import read_csv, stem_file, write_table

CI_NOTE = "accuracy: binomial standard error and Wilson 95% interval (Accuracy); mean_logprob: mean and standard error"


def upgrade_row(row: Mapping) -> dict:
    """An edge table row with the earlier columns rewritten, in their place, to the current ones: ``n`` ->
    ``n_examples``, ``accuracy_lo/hi`` -> ``ci_low/ci_high``, ``loss`` -> ``mean_logprob = -loss``, ``loss_se`` ->
    ``mean_logprob_se``, ``delta_loss`` -> ``delta_mean_logprob = -delta_loss``, ``stderr`` from accuracy and n (a
    current row comes back unchanged).

    >>> old = {"task": "UF", "n": 4, "accuracy": 0.5, "accuracy_lo": 0.15, "accuracy_hi": 0.85, "loss": 1.5,
    ...        "loss_se": 0.25, "token_accuracy": 0.75, "heads": "all"}
    >>> list(upgrade_row(old).items())[1:5]
    [('n_examples', 4), ('accuracy', 0.5), ('stderr', 0.25), ('ci_low', 0.15)]
    >>> upgrade_row(old)["mean_logprob"], upgrade_row(upgrade_row(old)) == upgrade_row(old)
    (-1.5, True)
    """
    if "n" not in row:
        return dict(row)
    n, accuracy = int(row["n"]), float(row["accuracy"])
    summary = {"n_examples": n, "accuracy": accuracy, "stderr": binomial_stderr(accuracy, n), "ci_low": row["accuracy_lo"],
               "ci_high": row["accuracy_hi"], "mean_logprob": None if row["loss"] is None else -row["loss"],
               "token_accuracy": row["token_accuracy"], "mean_logprob_se": row["loss_se"]}
    upgraded = {}
    for key, value in row.items():
        if key == "n":
            upgraded |= summary
        elif key == "delta_loss":
            upgraded["delta_mean_logprob"] = None if value is None else -value
        elif key not in summary and key not in ("accuracy_lo", "accuracy_hi", "loss", "loss_se"):
            upgraded[key] = value
    return upgraded


def upgrade_table(path: str | Path) -> list[Path]:
    """Rewrite the edge table ``path`` (its .csv, .json and .md, whichever exist) with [`upgrade_row`][interp.experiments.edge_tables.upgrade_row]; the
    rows are read from the .json where there is one (exact values and the metadata), else from the .csv.

    >>> upgrade_table("results/edge_patching_smollm2-135m.csv")  # doctest: +SKIP
    """
    path = Path(path)
    if path.suffix not in (".csv", ".json", ".md"):
        raise ValueError(f"{path}: expected an edge table's .csv, .json or .md file")
    stem = path.with_name(path.name[: -len(path.suffix)])
    formats = [fmt for fmt in ("csv", "json", "md") if stem_file(stem, fmt).exists()]  # none: read_csv says so
    if "json" in formats:
        stored = json.loads(stem_file(stem, "json").read_text(encoding="utf-8"))
        rows, metadata = stored["rows"], dict(stored.get("metadata") or {})
    else:
        rows, metadata = read_csv(stem_file(stem, "csv")), {}
    metadata |= {"ci": CI_NOTE} if "ci" in metadata else {}
    return write_table([upgrade_row(row) for row in rows], stem, formats=formats, metadata=metadata)


def main(argv: Sequence[str]) -> int:
    """``python -m interp.experiments.edge_tables upgrade FILE...``: rewrite edge tables to the current columns.

    >>> import tempfile
    >>> old = {"task": "UF", "length": 3, "condition": "none", "n": 4, "accuracy": 0.5, "accuracy_lo": 0.15,
    ...        "accuracy_hi": 0.85, "loss": 1.5, "loss_se": 0.25, "token_accuracy": 0.75}
    >>> stem = Path(tempfile.mkdtemp()) / "edge_patching_m"
    >>> _ = write_table([old], stem, formats=("csv",))
    >>> main(["upgrade", str(stem) + ".csv"])
    upgraded .../edge_patching_m.csv
    0
    >>> read_csv(str(stem) + ".csv")[0]["mean_logprob"]
    -1.5
    """
    if len(argv) < 2 or argv[0] != "upgrade":
        print("usage: python -m interp.experiments.edge_tables upgrade FILE.csv [FILE.csv ...]", file=sys.stderr)
        return 2
    for path in argv[1:]:
        try:
            written = upgrade_table(path)
        except (OSError, ValueError, KeyError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print("upgraded " + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
