"""Ablate every head alone and record the change in a task's accuracy and answer log-probability
(layer x head table)."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.ablation import compute_head_means
from interp.cli import add_model_args, add_output_args, load_model_from_args
from interp.evaluate import resolve_prepend_bos, task_prompts
from interp.prompts import PromptConfig, encode_prompts
from interp.results import write_table
from interp.scoring import model_name
from interp.sweep import head_sweep
from interp.tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--task", default="UF")
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--n", type=int, default=16, help="examples (default: 16)")
    parser.add_argument("--kind", default="zero", choices=["zero", "mean"])
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    spec = get_task(args.task)
    model = load_model_from_args(args)
    config = PromptConfig(n_shots=args.shots)
    bos = resolve_prepend_bos(model, config)
    encoded = encode_prompts(model.tokenizer, task_prompts(model, spec, args.length, args.n, args.seed, config), bos)
    means = None
    if args.kind == "mean":
        reference = encode_prompts(model.tokenizer, task_prompts(model, spec, args.length, args.n, args.seed + 10_000, config), bos)
        means = compute_head_means(model, reference, progress=not args.quiet)
    result = head_sweep(model, encoded, kind=args.kind, means=means, progress=not args.quiet)
    rows = result.rows(spec.name, args.length, model_name(model))
    suffix = f"_{args.adapter}" if args.adapter else ""
    write_table(rows, Path(args.out) / f"head_sweep{suffix}")
    worst = sorted(rows, key=lambda r: r["delta_logprob"])[:10]
    print(f"clean accuracy {result.clean.accuracy:.3f}; heads whose ablation hurts {spec.name} most (log-prob):")
    for r in worst:
        print(f"  {r['layer']}.{r['head']}: accuracy {r['accuracy']:.3f} ({r['delta_accuracy']:+.3f}), "
              f"log-prob change {r['delta_logprob']:+.3f}")


if __name__ == "__main__":
    main()
