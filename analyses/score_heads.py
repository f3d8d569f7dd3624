"""Per-head induction, anti-induction and previous-token scores (repeated random tokens), the
mechanism scores of interp.measure.mechanism_scores (duplicate-token, reversed probe, K/V composition with
the previous-token heads, duplicate_v_composition), plus attention to the answer's source on task
prompts; writes the layer x head table. `--executor ray --workers N` spreads the task cells (one per
task) over N Ray actors (docs/guide/cluster.md); the probe scores run here.

Writes <out>/head_scores_<model>.* (with an adapter the model reads `smollm2-135m+ub`).
"""

from __future__ import annotations

import sys

from interp.cli import (Parser, add_model_args, add_output_args, add_prompt_args, add_source_args, fail,
                        input_error_argument, load_model_from_args, name_list, positive_int, positive_int_list,
                        prompt_config_from_args, result_stem_from_args, run, seed, source_from_args)
from interp.cli.args import add_executor_args, executor_from_args, model_source_from_args
from interp.core.lm import LanguageModel, context_length
from interp.core.locking import TableLock
from interp.core.naming import model_name
from interp.core.tables import to_markdown, write_table
from interp.measure.mechanism_scores import all_head_scores
from interp.data.tasks import TASK_NAMES
from interp.experiments import AblationConfig, ablation_prompt_sets, add_task_attention, check_prompt_context
from interp.measure.score_tables import model_dtype


def check_probe_length(parser: Parser, model: LanguageModel, half_length: int, bos: bool) -> None:
    """Refuse a probe longer than the model's context (one line naming --half-length)."""
    n_ctx, tokens = context_length(model), 2 * half_length + int(bos)
    if n_ctx is not None and tokens > n_ctx:
        fail(parser, "--half-length", f"a probe of 2 x {half_length} tokens{' + BOS' if bos else ''} = {tokens} "
                                      f"does not fit the model's context of {n_ctx} tokens; use --half-length "
                                      f"{(n_ctx - int(bos)) // 2} or less")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_prompt_args(parser)
    add_source_args(parser)
    add_executor_args(parser)
    parser.add_argument("--n", type=positive_int, default=100, help="repeated random sequences (default: 100, as the paper)")
    parser.add_argument("--half-length", type=positive_int, default=50, help="tokens per copy (default: 50)")
    parser.add_argument("--bos", action="store_true", help="prefix each probe with BOS (the paper does not)")
    parser.add_argument("--tasks", type=name_list(("none", *TASK_NAMES), "tasks"), default=["UF", "UB", "UR", "UL"],
                        help="tasks for attention-to-answer scores, or 'none' (default: UF,UB,UR,UL)")
    parser.add_argument("--lengths", type=positive_int_list, default=[10])
    parser.add_argument("--task-n", type=positive_int, default=20, help="task prompts per task and length")
    parser.add_argument("--top", type=positive_int, default=10)
    parser.add_argument("--seed", type=seed, default=0)
    args = parser.parse_args(argv)
    if args.half_length < 3:
        fail(parser, "--half-length", f"expected an integer >= 3, got {args.half_length}")
    tasks = tuple(t for t in args.tasks if t != "none")

    stem = result_stem_from_args(args, "head_scores")
    config = AblationConfig(tasks=tasks or ("UF",), lengths=tuple(args.lengths), n_examples=args.task_n, seed=args.seed,
                            prompt_config=prompt_config_from_args(parser, args, tasks), random_seeds=(),
                            source=source_from_args(parser, args, tasks or ["UF"]))
    # before the model loads: a second run on this table, or an executor that cannot start, is refused at once
    with TableLock(stem), executor_from_args(parser, args) as executor:
        model = load_model_from_args(args)
        check_probe_length(parser, model, args.half_length, args.bos)
        if tasks:
            try:
                check_prompt_context(model, config)
            except ValueError as err:
                fail(parser, input_error_argument(str(err), args), str(err))
        scores = all_head_scores(model, half_length=args.half_length, n_sequences=args.n, seed=args.seed,
                             prepend_bos=args.bos, progress=not args.quiet)
        if tasks:
            add_task_attention(model, scores, ablation_prompt_sets(model, config), config.prompt_config,
                               progress=not args.quiet, executor=executor, model_source=model_source_from_args(args))
        rows = scores.rows()
        write_table(rows, stem, metadata=scores.metadata | {"model": model_name(model), "dtype": model_dtype(model),
                                                            "adapter": args.adapter})
    for name in scores.scores:
        top = sorted(rows, key=lambda r: r[f"{name}_rank"])[: args.top]
        print(f"\ntop {args.top} heads by {name}:")
        print(to_markdown(top, ["layer", "head", *scores.scores]))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
