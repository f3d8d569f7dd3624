"""Lorem Ipsum copying: where does a model's greedy copy first depart from the paragraph, and is
the token there ambiguous (its predecessor has several successors in the paragraph)?

    python analyses/lorem_ipsum.py                       # embedded SmolLM2-135M, 20 paragraphs of ~200 tokens
    python analyses/lorem_ipsum.py --max-tokens 500 --paragraphs 100   # the paper's paragraph size
    python analyses/lorem_ipsum.py --generate            # add free generation + alignment (slow)

Writes ``<out>/lorem_ipsum.{csv,json,md}`` (one row per paragraph) and
``<out>/lorem_ipsum_summary.{csv,json,md}``.
"""

from __future__ import annotations

import sys

from interp.cli import Parser, add_model_args, add_output_args, load_model_from_args, positive_int, run, seed
from interp.core.naming import model_name
from interp.experiments.realistic.lorem import LoremConfig, describe, run_lorem, write_lorem_tables


def main(argv: list[str] | None = None) -> int:
    defaults = LoremConfig()
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--paragraphs", type=positive_int, default=defaults.n_paragraphs,
                        help=f"number of paragraphs (default {defaults.n_paragraphs})")
    parser.add_argument("--max-tokens", type=positive_int, default=defaults.max_tokens,
                        help=f"token budget per paragraph (default {defaults.max_tokens}; the paper: 500)")
    parser.add_argument("--seed", type=seed, default=defaults.seed, help=f"data seed (default {defaults.seed})")
    parser.add_argument("--shots", type=int, default=defaults.n_shots, choices=(0, 1, 2), help="echo demonstrations (default 2)")
    parser.add_argument("--no-rule", action="store_true", help="leave out the '# RULE' line of the prompt")
    parser.add_argument("--batch-size", type=positive_int, default=4, help="prompts per forward pass (default 4)")
    parser.add_argument("--generate", action="store_true",
                        help="also generate freely and align (Needleman-Wunsch) as the paper does; one pass per token")
    args = parser.parse_args(argv)
    try:
        config = LoremConfig(n_paragraphs=args.paragraphs, max_tokens=args.max_tokens, seed=args.seed,
                             n_shots=args.shots, rule=not args.no_rule)
    except ValueError as err:
        parser.error(str(err))
    model = load_model_from_args(args)
    lorem = run_lorem(model, config, batch_size=args.batch_size, generate=args.generate, progress=not args.quiet,
                      model_name=model_name(model))
    paths = write_lorem_tables(lorem, args.out, metadata={"args": vars(args)})
    print(describe(lorem.summary))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
