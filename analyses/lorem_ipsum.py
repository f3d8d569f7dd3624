"""Lorem Ipsum copying: where does a model's greedy copy first depart from the paragraph, and is
the token there ambiguous (its predecessor has several successors in the paragraph)?

    python analyses/lorem_ipsum.py                       # embedded SmolLM2-135M, 20 paragraphs of ~200 tokens
    python analyses/lorem_ipsum.py --max-tokens 500 --paragraphs 100   # the paper's paragraph size
    python analyses/lorem_ipsum.py --generate            # add free generation + alignment (slow)

Writes ``results/lorem_ipsum.{csv,json,md}`` (one row per paragraph) and
``results/lorem_ipsum_summary.{csv,json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from interp.cli import add_model_args, add_output_args, load_model_from_args  # noqa: E402
from interp.realistic.lorem import LoremConfig, describe, run_lorem, write_lorem_tables  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    defaults = LoremConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--paragraphs", type=int, default=defaults.n_paragraphs,
                        help=f"number of paragraphs (default {defaults.n_paragraphs})")
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens,
                        help=f"token budget per paragraph (default {defaults.max_tokens}; the paper: 500)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help=f"data seed (default {defaults.seed})")
    parser.add_argument("--n-shots", type=int, default=defaults.n_shots, help="echo demonstrations, 0-2 (default 2)")
    parser.add_argument("--no-rule", action="store_true", help="leave out the '# RULE' line of the prompt")
    parser.add_argument("--batch-size", type=int, default=4, help="prompts per forward pass (default 4)")
    parser.add_argument("--generate", action="store_true",
                        help="also generate freely and align (Needleman-Wunsch) as the paper does; one pass per token")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = LoremConfig(n_paragraphs=args.paragraphs, max_tokens=args.max_tokens, seed=args.seed,
                             n_shots=args.n_shots, rule=not args.no_rule)
    except ValueError as err:
        parser.error(str(err))
    model = load_model_from_args(args)
    run = run_lorem(model, config, batch_size=args.batch_size, generate=args.generate, progress=not args.quiet,
                    model_name=args.model)
    paths = write_lorem_tables(run, args.out, metadata={"args": vars(args)})
    print(describe(run.summary))
    print("wrote " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    main()
