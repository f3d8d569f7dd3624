"""Teacher-forced exact match vs greedy `generate` on the same prompts of the embedded model:
identical accuracy, and the time ratio, at length 100 (non-unique copying, NF).

At length 100 the embedded model copies nothing exactly, so equal accuracies alone would be a
weak check. Two more checks, untimed: the first position where greedy generation leaves the
target equals the first wrong teacher-forced argmax, and the token generated there is that
argmax, example by example; and a second case (UF at length 20) where the model is often right.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

from interp.evaluate import evaluate_prompts, generate_accuracy, resolve_prepend_bos, task_prompts  # noqa: E402
from interp.models import load_model  # noqa: E402
from interp.prompts import PromptConfig, encode_prompts  # noqa: E402
from interp.realistic.alignment import departure_from_predictions, transition_index  # noqa: E402
from interp.realistic.common import greedy_answers, teacher_forced  # noqa: E402


def parse_case(text: str) -> tuple[str, int, int]:
    try:
        task, length, n = text.split(":")
        return task, int(length), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"case {text!r}: expected TASK:LENGTH:N, e.g. NF:100:4") from None


def compare(model, task: str, length: int, n: int) -> None:
    prompts = task_prompts(model, task, length, n, seed=0)
    times: dict[str, float] = {}
    with timed(f"{task} {length}: teacher forcing", times):
        tf = evaluate_prompts(model, prompts, progress=False)
    with timed(f"{task} {length}: generate", times):
        gen_acc, hits = generate_accuracy(model, prompts, progress=False)
    print(f"{task} n={length}, {n} prompts: teacher-forced accuracy {tf.accuracy:.3f}, "
          f"generate accuracy {gen_acc:.3f}, per-example agreement {hits == tf.correct.tolist()}; "
          f"token accuracy {tf.token_accuracy.mean():.3f}")
    encoded = encode_prompts(model.tokenizer, prompts, prepend_bos=resolve_prepend_bos(model, PromptConfig()))
    forced = teacher_forced(model, encoded, progress=False)
    greedy = greedy_answers(model, encoded, progress=False)
    tf_departures = [departure_from_predictions(p.answer_ids, f.predictions, p.end_ids) for p, f in zip(encoded, forced)]
    greedy_departures = [transition_index(p.answer_ids, g) for p, g in zip(encoded, greedy)]
    same_token = all(t is None or t >= len(g) or g[t] == f.predictions[t]
                     for t, g, f in zip(greedy_departures, greedy, forced))
    print(f"  first departure from the target, teacher forcing: {tf_departures}; greedy: {greedy_departures}; "
          f"identical: {tf_departures == greedy_departures}; token there = teacher-forced argmax: {same_token}")
    ratio = times[f"{task} {length}: generate"] / times[f"{task} {length}: teacher forcing"]
    print(f"  generate / teacher-forcing time ratio: {ratio:.1f}x (target >= 10x)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=lambda s: [parse_case(c) for c in s.split(",")],
                        default=[("NF", 100, 4), ("UF", 20, 8)], help="TASK:LENGTH:N,... (default: NF:100:4,UF:20:8)")
    args = parser.parse_args()
    model = load_model(device="cpu")
    for task, length, n in args.cases:
        compare(model, task, length, n)


if __name__ == "__main__":
    main()
