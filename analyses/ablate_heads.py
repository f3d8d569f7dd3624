"""Score every head, then ablate the top-k induction, top-k anti-induction and k random heads
(zero and mean ablation) and recompute accuracy on UF, UB, UR, UL. The `make run` job.

Writes <out>/head_scores_<model>.*, <out>/ablation_<model>.* and <out>/ablation_summary_<model>.*
(--out: by default the git-ignored build/results; `make publish` copies tables into results/; with an adapter the model reads `smollm2-135m+ub`). `--anti-heads-by SCORE` (or `--induction-heads-by`)
picks a set by another head score (interp.measure.mechanism_scores), e.g. duplicate_v_composition; the
files then end in `_anti-by-SCORE`. A killed run started again with the same arguments
resumes: finished head scores and finished ablation cells are reused. `--executor ray --workers N`
spreads the cells over N Ray actors (docs/guide/cluster.md); the tables are the same.
"""

from __future__ import annotations

import sys

from interp.cli import (Namespace, Parser, add_model_args, add_output_args, add_prompt_args, add_source_args, fail,
                        input_error_argument, load_model_from_args, name_list, positive_int, positive_int_list,
                        prompt_config_from_args, result_stem_from_args, run, say, seed, seed_list, shape_before_loading,
                        source_from_args, task_list)
from interp.cli.args import add_executor_args, executor_from_args, model_source_from_args
from interp.core.journal import RowJournal
from interp.core.locking import TableLock
from interp.core.tables import to_markdown, write_table
from interp.data.paper_files import PaperData
from interp.experiments import (ABLATION_COLUMNS, ABLATION_ROW_SHAPE, AblationConfig, ablation_study, ablation_summary,
                                check_ablation_inputs, study_head_scores)
from interp.experiments.ablation_setup import SELECTABLE_SCORES
from interp.interventions.ablation import ABLATION_KINDS


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_prompt_args(parser)
    add_source_args(parser)
    add_executor_args(parser)
    parser.add_argument("--tasks", type=task_list, default=["UF", "UB", "UR", "UL"], help="comma-separated tasks (default: UF,UB,UR,UL)")
    parser.add_argument("--lengths", type=positive_int_list, default=None,
                        help="task lengths (default: 10; with --data: every length the files hold for all tasks)")
    parser.add_argument("--k", type=positive_int, default=10, help="heads per ablated set (default: 10, as the paper)")
    parser.add_argument("--n", type=positive_int, default=30, help="examples per task and length (default: 30)")
    parser.add_argument("--kinds", type=name_list(ABLATION_KINDS, "ablation kinds", allow_all=False), default=list(ABLATION_KINDS),
                        help="ablation kinds: zero, mean (default: both)")
    parser.add_argument("--random-seeds", type=seed_list, default=[0, 1, 2], help="seeds of the random-head control")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--score-sequences", type=positive_int, default=100, help="repeated random sequences for head scores")
    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--induction-heads-by", choices=SELECTABLE_SCORES, default="induction",
                        help="head score whose top k form the induction set (default: induction, the paper's)")
    parser.add_argument("--anti-heads-by", choices=SELECTABLE_SCORES, default="anti_induction",
                        help="head score whose top k form the anti-induction set (default: anti_induction, the paper's; "
                             "duplicate_v_composition names one-step backward copiers)")
    args = parser.parse_args(argv)
    config = study_config(parser, args)
    if shape := shape_before_loading(args):  # k against the heads, before any weight is loaded
        try:
            config.check_model(shape.n_layers, shape.n_heads)
        except ValueError as err:
            fail(parser, input_error_argument(str(err), args), str(err))
    chosen = [f"{role}-by-{score}" for role, score, default in
              (("induction", config.induction_by, "induction"), ("anti", config.anti_by, "anti_induction"))
              if score != default]  # another choice of heads is another study, in its own files
    stem = result_stem_from_args(args, "ablation", chosen)
    scores_stem = result_stem_from_args(args, "head_scores")
    run_config = {"config": config.as_dict(), "model": args.model, "adapter": args.adapter, "dtype": args.dtype,
                  "score_sequences": args.score_sequences, "scoring": "teacher-forced exact match (interp.measure.teacher_forcing)"}
    with TableLock(stem) as lock, executor_from_args(parser, args) as executor:  # refused at once, before the model loads
        model = load_model_from_args(args)
        try:
            check_ablation_inputs(model, config)
        except ValueError as err:
            fail(parser, input_error_argument(str(err), args), str(err).removeprefix("--data: ").removeprefix("--n "))
        progress = not args.quiet
        source = model_source_from_args(args)
        scores = study_head_scores(model, scores_stem, config, args.score_sequences, progress,
                                   metadata={"adapter": args.adapter}, log=say, executor=executor, model_source=source)
        for name in (config.induction_by, config.anti_by):
            top = scores.top_heads(name, args.k)
            say(f"top {args.k} {name} heads: " + ", ".join(f"{h} ({float(scores[name][h]):.3f})" for h in top))

        journal = RowJournal(stem, run_config, ABLATION_ROW_SHAPE, lock=lock)
        if journal.done():
            say(f"resuming: {len(journal.done())} finished cells in {journal.path}")
        rows = ablation_study(model, scores, config, progress=progress, log=say, journal=journal, executor=executor,
                              model_source=source)
        summary = ablation_summary(rows)
        written = write_table(summary, result_stem_from_args(args, "ablation_summary", chosen), metadata=run_config)
        written = journal.finish(rows, ABLATION_COLUMNS, metadata=run_config) + written
    print(f"\naccuracy (change from baseline) {spread_note(len(config.random_seeds))}:\n")
    print(to_markdown(summary))
    scores_files = [scores_stem.with_name(f"{scores_stem.name}.{ext}") for ext in ("csv", "json", "md")]
    print("wrote " + ", ".join(str(path) for path in [*written, *scores_files]))
    return 0


def spread_note(n_seeds: int) -> str:
    """What the bracket after a random-head cell means, for the number of random-head seeds.

    >>> spread_note(3), spread_note(1)
    ('[min-max over 3 random-head seeds]', '(one random-head seed: no spread)')
    """
    if n_seeds > 1:
        return f"[min-max over {n_seeds} random-head seeds]"
    return "(one random-head seed: no spread)" if n_seeds == 1 else "(no random-head control)"


def study_config(parser: Parser, args: Namespace) -> AblationConfig:
    """The study the arguments ask for; with --data, the lengths the files hold for every task."""
    source = source_from_args(parser, args, args.tasks)
    lengths = args.lengths or [10]
    if isinstance(source, PaperData):
        lengths = args.lengths or sorted(set.intersection(*(set(source.lengths(t)) for t in args.tasks)))
        if not lengths:
            fail(parser, "--data", f"the files hold no length common to all of {', '.join(args.tasks)}")
    return AblationConfig(tasks=tuple(args.tasks), lengths=tuple(lengths), k=args.k, n_examples=args.n,
                          kinds=tuple(args.kinds), random_seeds=tuple(args.random_seeds), seed=args.seed,
                          batch_size=args.batch_size, prompt_config=prompt_config_from_args(parser, args, args.tasks),
                          source=source, induction_by=args.induction_heads_by, anti_by=args.anti_heads_by)


if __name__ == "__main__":
    sys.exit(run(main))
