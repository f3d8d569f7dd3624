"""Ablate every head alone (or the heads of --heads) and record the change in a task's accuracy
and answer log-probability (layer x head table).

`--method attribution` is the fast screen: an estimate of every head's change in answer
log-probability from one forward and one backward pass per batch (no accuracy column). By default
it is AtP* (`--screen atp*`): first order, except that each head's effect on later heads' attention
patterns through their queries and keys goes through the softmax exactly (`--qk-rows` pattern rows
per prompt); `--screen first-order` is plain attribution patching. `--verify K` spends K exact
evaluations (one head ablated alone each) on the screen's largest estimates either way, in that
order, and writes the verified ranking: exact where verified, estimated elsewhere, with a `status`
column (verified / estimated). Measured against the exact sweep in benchmarks/bench_attribution.py
and benchmarks/bench_verify.py (how many exact evaluations find the exact top 10).

`--method path --heads 16.0,18.6` is the check for a head where the two disagree: the exact change
at `--alphas` of the way to its ablation (the head alone moves), once as it is and once with every
later layer's attention patterns frozen. A straight line means a first-order estimate can be
trusted for that head; a flat start and a cliff near 1 means no gradient at the clean run sees it.
Printed, not written.

`--executor ray --workers N` splits the exact sweep's layers over N Ray actors (docs/guide/cluster.md).

Writes <out>/head_sweep_<model>.* (exact) or <out>/head_screen_<model>.* (attribution); with an
adapter the model reads `smollm2-135m+ub`.
"""

from __future__ import annotations

import sys

from interp.models.bridge import TransformerBridge
from interp.interventions.ablation import ABLATION_KINDS, compute_head_means
from interp.interventions.ablation_path import ablation_path, path_points
from interp.interventions.attribution import DEFAULT_QK_ROWS, SCREENS, attribution_sweep
from interp.interventions.verify import check_budget, verify_screen
from interp.cli import (Parser, add_model_args, add_output_args, add_prompt_args, add_source_args, fail,
                        fraction_list, heads_before_loading, load_model_from_args, positive_int, prompt_config_from_args,
                        result_stem_from_args, run, seed, shape_before_loading,
                        source_from_args, task_name)
from interp.cli.args import add_executor_args, executor_from_args, model_source_from_args
from interp.data.paper_files import Generated, PaperData
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.core.heads import parse_heads
from interp.core.naming import model_name
from interp.core.tables import write_table
from interp.interventions.sweep import head_sweep
from interp.data.tasks import TASK_NAMES, get_task
from interp.measure.teacher_forcing import check_context


DEFAULT_ALPHAS = (0.25, 0.5, 0.75, 1.0)


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_prompt_args(parser)
    add_source_args(parser)
    add_executor_args(parser)
    parser.add_argument("--task", default="UF", type=task_name, help=f"one of {', '.join(TASK_NAMES)}")
    parser.add_argument("--length", type=positive_int, default=None,
                        help="task length (default: 10; with --data: the first length the files hold)")
    parser.add_argument("--n", type=positive_int, default=16, help="examples (default: 16)")
    parser.add_argument("--kind", default="zero", choices=ABLATION_KINDS)
    parser.add_argument("--heads", default=None, help="only these heads, LAYER.HEAD comma-separated (default: all)")
    parser.add_argument("--method", default="exact", choices=("exact", "attribution", "path"),
                        help="'exact' (one ablated pass per head, default), 'attribution' (the screen) or 'path' "
                             "(each of --heads part of the way to its ablation)")
    parser.add_argument("--alphas", type=fraction_list, default=None,
                        help="with --method path: points of the way, in (0, 1]; 1 is always added "
                             "(default: 0.25,0.5,0.75,1)")
    parser.add_argument("--verify", type=int, default=None, metavar="K",
                        help="with --method attribution: ablate the screen's first K heads (largest estimates "
                             "either way) exactly and rank by exact values where verified (default: none)")
    parser.add_argument("--screen", default="atp*", choices=SCREENS,
                        help="with --method attribution: 'atp*' (QK fix, default) or 'first-order'")
    parser.add_argument("--qk-rows", type=positive_int, default=DEFAULT_QK_ROWS,
                        help=f"with --screen atp*: attention rows per prompt taken through the softmax (default: {DEFAULT_QK_ROWS})")
    parser.add_argument("--ig-steps", type=positive_int, default=1,
                        help="with --screen first-order: integrated-gradient points (default: 1, plain attribution)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8)
    return parser


def check_method_args(parser: Parser, args) -> None:
    """Refuse options that refine a method other than the one chosen (one line naming them)."""
    if args.method == "exact" and (args.verify is not None or args.ig_steps != 1):
        fail(parser, "--verify/--ig-steps", "they refine --method attribution; the exact sweep needs neither")
    if args.ig_steps != 1 and args.screen != "first-order":
        fail(parser, "--ig-steps", "integrated gradients refine the first-order screen; add --screen first-order")
    if args.verify is not None:
        shape = shape_before_loading(args)
        check_verify(parser, args.verify, shape.n_layers * shape.n_heads if shape else None)
    if args.method == "path" and not args.heads:
        fail(parser, "--heads", "--method path follows the heads it is given, e.g. --heads 16.0,18.6")
    if args.method == "path" and args.verify is not None:
        fail(parser, "--verify", "it refines --method attribution; --method path measures its heads exactly")
    if args.method != "path" and args.alphas is not None:
        fail(parser, "--alphas", f"points of the way refine --method path; --method {args.method} takes none")
    if args.method == "path":
        try:
            args.alphas = path_points(args.alphas or DEFAULT_ALPHAS)
        except ValueError as err:
            fail(parser, "--alphas", f"points of the way must be in (0, 1]: {err}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_method_args(parser, args)
    heads = heads_before_loading(parser, args, args.heads) if args.heads else None  # range too, when the name says

    spec = get_task(args.task)
    config = prompt_config_from_args(parser, args, [spec.name])
    source = source_from_args(parser, args, [spec.name])
    length = args.length or (source.lengths(spec.name)[0] if isinstance(source, PaperData) else 10)
    model = load_model_from_args(args)
    if heads is not None:
        try:
            heads = parse_heads(heads, model.cfg.n_layers, model.cfg.n_heads, name="--heads")
        except ValueError as err:
            parser.error(str(err))
    try:
        encoded = encode_for(model, task_prompts(model, spec, length, args.n, args.seed, config, source=source), config)
        check_context(model, encoded)
    except ValueError as err:
        fail(parser, "--length", str(err))
    means = None
    if args.kind == "mean":  # a reference of generated prompts over the same items, with a seed of its own
        reference_prompts = task_prompts(model, spec, length, args.n, args.seed + 10_000, config,
                                         source=Generated(source.items(spec), args.repeats))
        reference = encode_for(model, reference_prompts, config)
        means = compute_head_means(model, reference, progress=not args.quiet)
    if args.method == "attribution":
        screen_heads(parser, model, encoded, spec.name, length, heads, means, args)
    elif args.method == "path":
        path_heads(model, encoded, heads, means, args)
    else:
        with executor_from_args(parser, args) as executor:
            sweep_heads(model, encoded, spec.name, length, heads, means, args, executor)
    return 0


def sweep_heads(model: TransformerBridge, encoded, task: str, length: int, heads, means, args, executor) -> None:
    """The exact sweep (one ablated pass per head), written as a table, with the worst heads printed."""
    result = head_sweep(model, encoded, heads, kind=args.kind, means=means, batch_size=args.batch_size,
                        progress=not args.quiet, executor=executor, model_source=model_source_from_args(args))
    rows = result.rows(task, length, model_name(model))
    # where the cells ran is not part of the result: the same table whatever the executor
    study_args = {k: v for k, v in vars(args).items() if k not in ("executor", "workers", "ray_address", "gpus_per_worker")}
    write_table(rows, result_stem_from_args(args, "head_sweep"), metadata={"args": study_args})
    worst = sorted(rows, key=lambda r: r["delta_logprob"])[:10]
    print(f"clean accuracy {result.clean.accuracy:.3f}; heads whose ablation hurts {task} most (log-prob):")
    for r in worst:
        print(f"  {r['layer']}.{r['head']}: accuracy {r['accuracy']:.3f} ({r['delta_accuracy']:+.3f}), "
              f"log-prob change {r['delta_logprob']:+.3f}")


def path_heads(model: TransformerBridge, encoded, heads, means, args) -> None:
    """Each head's way to its ablation, free and with later patterns frozen, printed."""
    for head in heads:
        for frozen in (False, True):
            path = ablation_path(model, encoded, head, args.alphas, args.kind, means, frozen, args.batch_size)
            print(f"{path.summary()}; linear share {path.linear_share():.2f}")


def screen_heads(parser, model: TransformerBridge, encoded, task: str, length: int, heads, means, args) -> None:
    """The attribution screen of every head (rows of ``heads`` only, when given), with the
    screen's first ``--verify`` heads ablated exactly."""
    if args.verify is not None:
        check_verify(parser, args.verify, model.cfg.n_layers * model.cfg.n_heads)
    screen = attribution_sweep(model, encoded, args.kind, means, args.batch_size, args.ig_steps, progress=not args.quiet,
                               screen=args.screen, qk_rows=args.qk_rows)
    result = screen if args.verify is None else verify_screen(model, encoded, screen, args.verify, means,
                                                               args.batch_size, progress=not args.quiet)
    rows = result.rows(task, length, model_name(model))
    if heads is not None:
        wanted = set(heads)
        rows = [r for r in rows if (r["layer"], r["head"]) in wanted]
    write_table(rows, result_stem_from_args(args, "head_screen"), metadata={"args": vars(args)})
    print(f"clean accuracy {screen.clean.accuracy:.3f}; heads whose ablation is estimated to hurt {task} most "
          f"(log-prob, {screen.method}" + ("" if args.verify is None else f", {args.verify} verified exactly") + "):")
    for r in sorted(rows, key=lambda r: r["delta_logprob"])[:10]:
        print(f"  {r['layer']}.{r['head']}: log-prob change {r['delta_logprob']:+.3f} [{r['estimate']}]")


def check_verify(parser, budget: int, n_heads: int | None) -> None:
    """Refuse a ``--verify`` budget outside 1..heads (heads unknown before loading: 1.. only)."""
    try:
        check_budget(budget, n_heads if n_heads is not None else max(budget, 1), name="K")
    except ValueError as err:
        fail(parser, "--verify", str(err))


if __name__ == "__main__":
    sys.exit(run(main))
