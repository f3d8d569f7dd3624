"""The command-line vocabulary every script shares: ``analyses/``, ``benchmarks/`` and the model
installer (``python -m interp.cli.models``). Parsing only; no experiment logic. Scripts take
[`Parser`][interp.cli.parser.Parser], its argument types, ``ArgumentTypeError`` (for a type of their own) and
``Namespace`` from here.

One style for mistakes: a bad argument is refused by the parser, before any model is loaded,
with ``error: argument --n: expected an integer >= 1, got '0'`` and exit code 2. Problems only
visible once the model is loaded (a length past its context, ``--k`` larger than its number of
heads) are reported the same way through [`fail`][interp.cli.parser.fail], still before any scoring.

Modules: ``parser`` (the parser and [`fail`][interp.cli.parser.fail]; the one module importing the standard parser),
``argtypes`` (argument types), ``args`` (the shared arguments and what scripts make of them),
``running`` ([`run`][interp.cli.running.run]: a script's mistakes as one ``error:`` line), ``output`` (``say``: a
line that never lands inside a progress bar's), ``models`` (the offline-model
installer's command, `python -m interp.cli.models`), ``publish`` (``make publish``: a run's tables
into ``results/``, table by table).
"""

from interp.cli.args import (RUN_FIGURES, RUN_RESULTS, add_model_args, add_output_args, add_prompt_args,
                             add_quiet_arg, add_source_args, heads_before_loading, input_error_argument,
                             load_model_from_args, prompt_config_from_args, result_stem_from_args,
                             shape_before_loading, source_from_args)
from interp.cli.argtypes import (MAX_SEED, at_least, existing_dir, figure_formats, fraction, fraction_list, index_list, int_list,
                                 name_list, new_or_existing_dir, non_negative_float, non_negative_int, positive_float,
                                 positive_int, positive_int_list, seed, seed_list, task_list, task_name, writable_dir,
                                 writable_file)
from interp.cli.output import log_through_tqdm, say
from interp.cli.parser import ArgumentTypeError, Namespace, Parser, fail
from interp.cli.running import USER_ERRORS, run

__all__ = [
    "MAX_SEED", "RUN_FIGURES", "RUN_RESULTS", "USER_ERRORS", "ArgumentTypeError", "Namespace", "Parser",
    "add_model_args", "add_output_args", "add_quiet_arg",
    "add_prompt_args", "add_source_args", "at_least", "existing_dir", "fail", "figure_formats", "fraction", "fraction_list",
    "heads_before_loading", "index_list", "log_through_tqdm",
    "input_error_argument", "int_list", "load_model_from_args", "name_list", "new_or_existing_dir",
    "non_negative_float", "non_negative_int", "positive_float", "positive_int", "positive_int_list",
    "prompt_config_from_args", "result_stem_from_args", "run", "say", "seed", "shape_before_loading", "seed_list", "source_from_args", "task_list",
    "task_name", "writable_dir", "writable_file",
]
