"""Single-head ablation sweep (cached residual, recompute only from the ablated layer on, logits
only at answer positions) vs a naive loop of full `run_with_hooks` passes, on the embedded model:
identical numbers, and the time ratio. The default sweeps all 270 heads, so the layers skipped
average out as in real use (a sweep of early layers alone saves little, of late ones much)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

import torch  # noqa: E402

from interp.evaluate import resolve_prepend_bos, task_prompts  # noqa: E402
from interp.models import load_model  # noqa: E402
from interp.prompts import PromptConfig, encode_prompts  # noqa: E402
from interp.sweep import head_sweep, naive_head_sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=8, help="prompts")
    parser.add_argument("--every", type=int, default=1, help="sweep every k-th layer (all its heads; default: all)")
    parser.add_argument("--heads-per-pass", type=int, default=1, help="heads of a layer stacked in one pass")
    args = parser.parse_args()
    model = load_model(device="cpu")
    prompts = task_prompts(model, "UF", 10, args.n)
    encoded = encode_prompts(model.tokenizer, prompts, resolve_prepend_bos(model, PromptConfig()))
    heads = [(l, h) for l in range(0, model.cfg.n_layers, args.every) for h in range(model.cfg.n_heads)]
    times: dict[str, float] = {}
    with timed(f"interp head_sweep ({len(heads)} heads)", times):
        fast = head_sweep(model, encoded, heads, progress=False, heads_per_pass=args.heads_per_pass)
    with timed("naive run_with_hooks loop", times):
        slow = naive_head_sweep(model, encoded, heads, progress=False)
    same_acc = all(torch.equal(a.correct, b.correct) for a, b in zip(fast.ablated, slow.ablated))
    diff = max((a.mean_logprob - b.mean_logprob).abs().max().item() for a, b in zip(fast.ablated, slow.ablated))
    print(f"identical exact-match per example: {same_acc}; max |log-prob difference|: {diff:.1e}")
    print(f"naive / sweep time ratio: {times['naive run_with_hooks loop'] / times[f'interp head_sweep ({len(heads)} heads)']:.1f}x (target >= 2x)")


if __name__ == "__main__":
    main()
