"""Train the toolkit's UF / UB models that are not built yet (a killed run resumes), then load each by name.

    python analyses/train_models.py                          # all four (the `make trained-models` job)
    python analyses/train_models.py --models scratch-uf,scratch-ub

Models: smollm2-135m-ft-uf / -ub (SmolLM2-135M, every weight fine-tuned on single-shot copying; into
$INTERP_CACHE/trained/) and scratch-uf / -ub (trained from scratch; into checkpoints/). Training tables go to
<out>/finetune_smollm2-135m_<task>_single.* and <out>/trained_scratch-<task>.*. `--executor ray --workers 2`
trains two models at once (docs/guide/cluster.md).
"""

from __future__ import annotations

import sys

import torch

from interp.cli import Parser, add_output_args, log_through_tqdm, name_list, positive_int, run
from interp.cli.args import add_executor_args, executor_from_args
from interp.experiments.trained_models import build_all
from interp.models.trained import TRAINED_MODELS


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_output_args(parser)
    parser.add_argument("--models", type=name_list(tuple(TRAINED_MODELS), "models"), default=list(TRAINED_MODELS),
                        help=f"comma-separated, or 'all' ({', '.join(TRAINED_MODELS)})")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch CPU threads (default 1: fastest on a CPU shared with other jobs)")
    add_executor_args(parser)  # --executor ray --workers 2: two models at once, one actor each
    args = parser.parse_args(argv)
    log_through_tqdm()
    torch.set_num_threads(args.threads)
    with executor_from_args(parser, args) as executor:
        for name, folder in build_all(args.models, results_dir=args.out, progress=not args.quiet, executor=executor):
            print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
