"""Write a circuitsvis attention page for chosen heads on one task example (opens offline).

    python analyses/show_heads.py --task UB --heads 18.6,17.3
    python analyses/show_heads.py --task UR --heads 18.6 --length 20 --example 3 --out build/ur.html

Heads are LAYER.HEAD (query heads); ``[Q]`` marks the query position, ``[A]`` the answer's source
in the test input (see ``interp.figures.attention``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import (RUN_FIGURES, ArgumentTypeError, Parser, add_model_args, add_prompt_args, add_quiet_arg,
                        add_source_args, fail, heads_before_loading, load_model_from_args, non_negative_int,
                        positive_int, prompt_config_from_args, run, seed, source_from_args, task_name, writable_file)
from interp.core.heads import parse_heads
from interp.data.tasks import TASK_NAMES

# The figure and scoring modules (torch, transformers: seconds to import) are imported once the
# arguments are read, so that a mistake is refused at once.
VIEWS = "heads (circuitsvis attention_heads), patterns (attention_patterns) or both"

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_prompt_args(parser)
    add_source_args(parser)
    parser.add_argument("--task", required=True, type=task_name, help=f"one of {', '.join(TASK_NAMES)}")
    parser.add_argument("--heads", required=True, help="heads as LAYER.HEAD, comma-separated, e.g. 18.6,17.3")
    parser.add_argument("--length", type=positive_int, default=None,
                        help="task length (default 10; with --data: the first length the files hold)")
    parser.add_argument("--example", type=non_negative_int, default=0, help="index of the seeded example (default 0)")
    parser.add_argument("--seed", type=seed, default=0, help="example seed (default 0)")
    parser.add_argument("--view", default="heads", help=f"{VIEWS} (default heads)")
    parser.add_argument("--no-answer", action="store_true", help="do not append the teacher-forced answer")
    parser.add_argument("--scores", type=non_negative_int, default=0, metavar="N",
                        help="show every head score (paper's and mechanism, interp.measure.mechanism_scores) from N probe "
                             "sequences beside each head (default 0: none)")
    parser.add_argument("--out", type=writable_file, default=None,
                        help=f"output HTML file (default {RUN_FIGURES}/attention_<TASK>.html, git-ignored)")
    add_quiet_arg(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    heads = heads_before_loading(parser, args, args.heads)  # ranges too, where the model's name tells its shape
    if not heads:
        fail(parser, "--heads", "no heads given (expected e.g. 18.6,17.3)")
    from interp.data.paper_files import PaperData
    from interp.figures.attention import VIEW_KINDS, attention_view, save_attention_view
    from interp.measure.mechanism_scores import all_head_scores

    if args.view not in VIEW_KINDS:
        fail(parser, "--view", f"expected {VIEWS}, got {args.view!r}")
    config = prompt_config_from_args(parser, args, [args.task])
    source = source_from_args(parser, args, [args.task])
    length = args.length or (source.lengths(args.task)[0] if isinstance(source, PaperData) else 10)
    out = args.out or ROOT / RUN_FIGURES / f"attention_{args.task}.html"
    try:
        writable_file(str(out))
    except ArgumentTypeError as err:
        fail(parser, "--out", str(err))
    model = load_model_from_args(args)
    try:
        heads = parse_heads(heads, model.cfg.n_layers, model.cfg.n_heads, name="--heads")
        scores = all_head_scores(model, n_sequences=args.scores, progress=not args.quiet) if args.scores else None
        view = attention_view(model, args.task, heads, length=length, example=args.example, seed=args.seed,
                              prompt_config=config, append_answer=not args.no_answer, model_name=args.model,
                              source=source, scores=scores)
    except ValueError as err:
        message = str(err)
        if message.startswith("length="):
            fail(parser, "--length", message.partition(": ")[2])
        parser.error(message)
    try:
        save_attention_view(view, out, kind=args.view)
    except OSError as err:
        fail(parser, "--out", f"cannot write {str(out)!r} ({err.strerror or err})")
    for line in view.summary_lines():
        print(line)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
