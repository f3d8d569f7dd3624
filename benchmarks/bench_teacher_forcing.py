"""Teacher-forced exact match vs greedy `generate` (string-level, the paper's scoring) on the same
prompts of the embedded model: identical accuracy, and the time ratio (A/B alternated).

Where the model copies nothing exactly (NF at lengths 50 and 100), equal accuracies alone would be
a weak check. Two more checks, untimed: the first position where greedy generation leaves the target
equals the first wrong teacher-forced argmax, and the token generated there is that argmax,
example by example. The default cases keep a run to about five minutes on an idle 2-core machine;
a longer comparison is `--cases NF:100:4,UF:20:8` (about 15 minutes).

Prints per case the A/B table, both accuracies and their per-example agreement, the first
departures from the target under both scorings, and a closing `RESULT` line with the time ratio
of each case (median).

    python benchmarks/bench_teacher_forcing.py
    python benchmarks/bench_teacher_forcing.py --cases NF:100:4,UF:20:8"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import ArgumentTypeError, Parser, positive_int, run, task_name
from interp.core.lm import LanguageModel
from interp.experiments.realistic.alignment import departure_from_predictions, transition_index
from interp.measure.encoding import encode_for
from interp.measure.evaluate import evaluate_prompts, generate_accuracy, task_prompts
from interp.measure.generation import greedy_answers
from interp.measure.teacher_forcing import teacher_forced_scores
from interp.models import load_model
from interp.prompts import PromptConfig

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def parse_cases(text: str) -> list[tuple[str, int, int]]:
    """``"UF:20:4,NF:50:2"`` -> (task, length, prompts) per case; a task by name, numbers >= 1.

    >>> parse_cases("uf:20:4,NF:50:2")
    [('UF', 20, 4), ('NF', 50, 2)]
    """
    cases = []
    for case in (c for c in text.replace(" ", ",").split(",") if c):
        try:
            task, length, n = case.split(":")
            cases.append((task_name(task), positive_int(length), positive_int(n)))
        except (ValueError, ArgumentTypeError) as err:
            detail = f" ({err})" if isinstance(err, ArgumentTypeError) else ""
            raise ArgumentTypeError(f"case {case!r}: expected TASK:LENGTH:N, e.g. NF:100:4{detail}") from None
    if not cases:
        raise ArgumentTypeError(f"expected cases TASK:LENGTH:N, e.g. NF:100:4, got {text!r}")
    return cases


def check_case(model: LanguageModel, task: str, length: int, n: int, repeats: int, warmup: int) -> float:
    """Time teacher forcing against ``generate`` on one case, check they agree; the time ratio."""
    prompts = task_prompts(model, task, length, n, seed=0)
    result = compare(f"{task} {length}: teacher forcing", lambda: evaluate_prompts(model, prompts, progress=False),
                     f"{task} {length}: generate", lambda: generate_accuracy(model, prompts, progress=False),
                     repeats=repeats, warmup=warmup, title=f"teacher forcing vs generate, {task} n={length}, {n} prompts")
    tf = result.a.output
    gen_acc, hits = result.b.output
    print(f"{task} n={length}, {n} prompts: teacher-forced accuracy {tf.accuracy:.3f}, "
          f"generate accuracy {gen_acc:.3f}, per-example agreement {hits == tf.correct.tolist()}; "
          f"token accuracy {tf.token_accuracy.mean():.3f}")
    encoded = encode_for(model, prompts, PromptConfig())
    forced = teacher_forced_scores(model, encoded, progress=False, keep_predictions=True).predictions
    greedy = greedy_answers(model, encoded, progress=False)
    tf_departures = [departure_from_predictions(p.answer_ids, f, p.end) for p, f in zip(encoded, forced)]
    greedy_departures = [transition_index(p.answer_ids, g) for p, g in zip(encoded, greedy)]
    same_token = all(t is None or t >= len(g) or g[t] == f[t]
                     for t, g, f in zip(greedy_departures, greedy, forced))
    print(f"  first departure from the target, teacher forcing: {tf_departures}; greedy: {greedy_departures}; "
          f"identical: {tf_departures == greedy_departures}; token there = teacher-forced argmax: {same_token}")
    return result.ratio


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--cases", type=parse_cases, default="UF:20:4,NF:50:2",
                        help="TASK:LENGTH:N,... (default: UF:20:4,NF:50:2)")
    return add_timing_args(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print_header("bench_teacher_forcing")
    model = load_model(device="cpu")
    ratios = {f"{t}:{l}:{n}": check_case(model, t, l, n, args.repeats, args.warmup) for t, l, n in args.cases}
    print("RESULT generate / teacher forcing, median: " + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    sys.exit(run(main))
