"""Scoring every head (batched, pattern hooks only) vs TransformerLens `detect_head` over the same
repeated sequences of the embedded model: same scores, and the time ratio."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

import torch  # noqa: E402
from transformer_lens.head_detector import detect_head  # noqa: E402

from interp.models import load_model  # noqa: E402
from interp.scoring import detect_induction_batched, repeated_random_tokens, score_heads, spearman  # noqa: E402
from interp.vocab import word_vocabulary  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20, help="sequences")
    parser.add_argument("--half-length", type=int, default=50)
    args = parser.parse_args()
    model = load_model(device="cpu")
    tokenizer = model.tokenizer
    # words that re-tokenize exactly, so detect_head (which takes strings) sees the same token ids
    pool = torch.tensor([tokenizer.encode(" " + w, add_special_tokens=False)[0] for w in word_vocabulary(tokenizer, 300)])
    tokens = repeated_random_tokens(pool, args.n, args.half_length, seed=0)
    texts = [tokenizer.decode(row) for row in tokens]
    assert all(tokenizer.encode(t, add_special_tokens=False) == row.tolist() for t, row in zip(texts, tokens))
    times: dict[str, float] = {}
    with timed("interp: all three scores, all heads", times):
        ours = score_heads(model, tokens, half_length=args.half_length, progress=False)
    with timed("interp: detect_head's measure, batched", times):
        batched = detect_induction_batched(model, tokens)
    with timed("transformer_lens detect_head (induction only)", times):
        theirs = detect_head(model, texts, "induction_head").float()
    print(f"max |batched - detect_head| = {(batched - theirs).abs().max():.2e}; "
          f"rank correlation of interp induction score with detect_head: {spearman(ours['induction'], theirs):.3f}")
    print(f"top induction heads: interp {[str(h) for h in ours.top_heads('induction', 5)]}")
    base = times["transformer_lens detect_head (induction only)"]
    print(f"detect_head / interp score_heads time ratio: {base / times['interp: all three scores, all heads']:.1f}x (target >= 5x)")
    print(f"detect_head / interp batched detect time ratio: {base / times['interp: detect_head' + chr(39) + 's measure, batched']:.1f}x")


if __name__ == "__main__":
    main()
