"""Teacher-forced exact match vs greedy `generate` on the same prompts of the embedded model:
identical accuracy, and the time ratio, at length 100 (non-unique copying, NF)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

from interp.evaluate import evaluate_prompts, generate_accuracy, task_prompts  # noqa: E402
from interp.models import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", default="NF")
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--n", type=int, default=4)
    args = parser.parse_args()
    model = load_model(device="cpu")
    prompts = task_prompts(model, args.task, args.length, args.n, seed=0)
    times: dict[str, float] = {}
    with timed("teacher forcing", times):
        tf = evaluate_prompts(model, prompts, progress=False)
    with timed("generate", times):
        gen_acc, hits = generate_accuracy(model, prompts, progress=True)
    print(f"{args.task} n={args.length}, {args.n} prompts: teacher-forced accuracy {tf.accuracy:.3f}, "
          f"generate accuracy {gen_acc:.3f}, per-example agreement {hits == tf.correct.tolist()}; "
          f"token accuracy {tf.token_accuracy.mean():.3f}")
    print(f"generate / teacher-forcing time ratio: {times['generate'] / times['teacher forcing']:.1f}x (target >= 10x)")


if __name__ == "__main__":
    main()
