"""The arguments scripts share (model, output, prompt format, examples' source) and what a script
makes of them once parsed: the prompt config, the source, the model, where its table goes, and
which argument a failed input check is about.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from interp.cli.argtypes import non_negative_int, writable_dir
from interp.cli.parser import ArgumentParser, Namespace, Parser, fail  # noqa: F401 (Parser: the examples build one)
from interp.core.naming import EMBEDDED_MODEL, result_stem


def add_model_args(parser: ArgumentParser) -> None:
    """``--model``, ``--device``, ``--dtype``, ``--device-map`` and ``--adapter``.

    >>> parser = Parser()
    >>> add_model_args(parser)
    >>> parser.parse_args(["--model", "tiny-gpt2", "--device", "cpu"])
    Namespace(model='tiny-gpt2', device='cpu', dtype=None, device_map=None, adapter=None)
    """
    parser.add_argument("--model", default=EMBEDDED_MODEL,
                        help="model name or local checkpoint folder (default: the embedded SmolLM2-135M)")
    parser.add_argument("--device", default="auto", help="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1'")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="weights dtype (default float32)")
    parser.add_argument("--device-map", default=None, help="accelerate device_map, e.g. 'auto', to split a large model")
    parser.add_argument("--adapter", default=None,
                        help="LoRA adapter: a name under adapters/ (e.g. 'ub') or a folder")


# Where a script run by hand writes (git-ignored); `make publish`, `make figures` and `make claims`
# are the explicit ways into the tracked results/ and figures/.
RUN_RESULTS = "build/results"
RUN_FIGURES = "build/figures"


def add_output_args(parser: ArgumentParser, default_dir: str = RUN_RESULTS) -> None:
    """``--out`` (a folder checked writable while parsing; by default the git-ignored
    ``build/results``) and ``--quiet``.

    >>> import tempfile
    >>> parser = Parser()
    >>> add_output_args(parser)
    >>> args = parser.parse_args(["--out", tempfile.mkdtemp(), "--quiet"])
    >>> args.out.is_dir(), args.quiet
    (True, True)
    """
    parser.add_argument("--out", type=writable_dir, default=default_dir,
                        help=f"output folder (default: {default_dir}, git-ignored; `make publish` copies tables to results/)")
    add_quiet_arg(parser)


def add_quiet_arg(parser: ArgumentParser) -> None:
    """``--quiet``: no progress bars (for a script whose output is one file, not a folder).

    >>> parser = Parser()
    >>> add_quiet_arg(parser)
    >>> parser.parse_args(["--quiet"]).quiet
    True
    """
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def add_prompt_args(parser: ArgumentParser, shots: int = 5) -> None:
    """``--shots``, ``--protocol`` and ``--template``; read them with [`prompt_config_from_args`][interp.cli.args.prompt_config_from_args].

    >>> parser = Parser()
    >>> add_prompt_args(parser)
    >>> parser.parse_args([])
    Namespace(shots=5, protocol='interp', template=None)
    """
    from interp.prompts import ALL_TEMPLATES, PROTOCOLS

    parser.add_argument("--shots", type=non_negative_int, default=shots,
                        help=f"in-context demonstrations per prompt (default: {shots})")
    parser.add_argument("--protocol", default="interp", choices=PROTOCOLS,
                        help="'interp' (default: fresh demonstrations, BOS as the tokenizer does, the answer must end its "
                             "line) or 'paper' (the paper's templates, 4 shown demonstrations after an explanation block "
                             "for retrieval, answers ending at <eos> for copying, no BOS)")
    parser.add_argument("--template", default=None, choices=ALL_TEMPLATES,
                        help="prompt wording (default: bare; under --protocol paper the first of the family's templates)")


def prompt_config_from_args(parser: ArgumentParser, args: Namespace, tasks: Sequence[str] = ()):
    """The [`interp.prompts.PromptConfig`][interp.prompts.config.PromptConfig] of ``--shots`` / ``--protocol`` / ``--template``;
    with ``tasks``, a template that does not apply to one of them is refused here, by name.

    >>> parser = Parser()
    >>> add_prompt_args(parser)
    >>> prompt_config_from_args(parser, parser.parse_args(["--shots", "3"]), tasks=["UF"])
    PromptConfig(n_shots=3, template=None, demo_length=None, prepend_bos=None, protocol='interp')
    """
    from interp.data.tasks import get_task
    from interp.prompts import PromptConfig

    try:
        if args.protocol == "paper":
            config = PromptConfig.paper(args.template, args.shots)
        else:
            config = PromptConfig(n_shots=args.shots, template=args.template)
    except ValueError as err:
        fail(parser, "--template" if "template" in str(err) else "--shots", str(err))
    for task in tasks:
        try:
            config.template_for(get_task(task).family)
        except ValueError as err:
            fail(parser, "--template", f"{err} (task {get_task(task).name})")
    return config


def add_source_args(parser: ArgumentParser) -> None:
    """``--data`` (the paper's JSONL files) and ``--repeats``; read them with [`source_from_args`][interp.cli.args.source_from_args].

    >>> parser = Parser()
    >>> add_source_args(parser)
    >>> parser.parse_args(["--repeats", "sparse"])
    Namespace(data=None, repeats='sparse')
    """
    from interp.data.tasks import REPEATS

    parser.add_argument("--data", action="append", default=None, metavar="FILE",
                        help="evaluate the records of the paper's JSONL file(s) instead of generated examples "
                             "(repeatable; lengths then come from the files)")
    parser.add_argument("--repeats", default="pool", choices=REPEATS,
                        help="non-unique copying strings: 'pool' (length//3 items, each at least twice; the paper's "
                             "generator) or 'sparse' (draws with replacement, one repeat forced; like the paper's "
                             "files at lengths 10 and 20)")


def source_from_args(parser: ArgumentParser, args: Namespace, tasks):
    """The examples' source: the paper's files of ``--data`` (records of ``tasks``), else the generator.

    >>> parser = Parser()
    >>> add_source_args(parser)
    >>> source_from_args(parser, parser.parse_args([]), ["UF"])
    Generated(vocabulary=None, repeats='pool')
    """
    from interp.data.paper_files import Generated, read_paper_jsonl

    if not args.data:
        return Generated(repeats=args.repeats)
    try:
        return read_paper_jsonl(args.data, tasks)
    except (ValueError, FileNotFoundError) as err:
        fail(parser, "--data", str(err).removeprefix("--data: "))


def input_error_argument(message: str, args: Namespace) -> str:
    """The argument a failed input check (context, vocabulary, data, ``k``) is about: what the user
    chose, not always ``--lengths`` (with ``--data`` the lengths come from the files).

    >>> input_error_argument("length 9000 is past the model's context", Namespace(data=["uf.jsonl"]))
    '--data'
    >>> input_error_argument("k=12 is more than the model's 9 heads", Namespace(data=None))
    '--k'
    """
    if message.startswith("k="):
        return "--k"
    if message.startswith("--n ") or "--n " in message.partition(":")[0]:
        return "--n"
    if getattr(args, "data", None):
        return "--data"
    if "template" in message:
        return "--template"
    return "--lengths"


def shape_before_loading(args: Namespace):
    """The shape (layers, heads, context) of ``args.model`` as its name or config file tells it,
    without loading a weight (``interp.interventions.edges.preflight.model_shape``); None when
    only loading can tell.

    >>> shape_before_loading(Namespace(model="tiny-llama")).n_heads
    4
    """
    from interp.interventions.edges.preflight import model_shape

    return model_shape(args.model)


def heads_before_loading(parser: ArgumentParser, args: Namespace, heads, argument: str = "--heads"):
    """``heads`` (a ``--heads`` value) read and, where the model's shape is known from its name or
    config file (``interp.interventions.edges.preflight.model_shape``), range-checked: a head
    the model does not have is refused before any weight is loaded. Returns the heads as ``Head``.

    >>> parser = Parser(prog="demo")
    >>> heads_before_loading(parser, Namespace(model="tiny-llama"), "1.3,0.0")
    [Head(1, 3), Head(0, 0)]
    >>> heads_before_loading(parser, Namespace(model="tiny-llama"), "99.0")
    Traceback (most recent call last):
    SystemExit: 2
    """
    from interp.core.heads import parse_heads

    shape = shape_before_loading(args)
    try:
        return parse_heads(heads, *((shape.n_layers, shape.n_heads) if shape else (None, None)), name=argument)
    except ValueError as err:
        fail(parser, argument, str(err).removeprefix(f"{argument}: "))


def load_model_from_args(args: Namespace):
    """The model the common arguments describe (with its adapter, when one is named).

    >>> args = Namespace(model="tiny-gpt2", device="cpu", dtype=None, device_map=None, adapter=None)
    >>> load_model_from_args(args).cfg.n_layers
    2
    """
    from interp.models import load_model

    if getattr(args, "quiet", False):  # --quiet: transformers' own loading bars too (this process is the script's)
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    kwargs = dict(device=None if args.device_map else args.device, dtype=args.dtype, device_map=args.device_map)
    if getattr(args, "adapter", None):
        kwargs["adapter"] = args.adapter
    return load_model(args.model, **kwargs)


def result_stem_from_args(args: Namespace, kind: str, variant: str | Sequence[str] = ()) -> Path:
    """Where a script writes its ``kind`` of table: [`interp.core.naming.result_stem`][interp.core.naming.result_stem] under
    ``args.out`` for the run's model, adapter and dtype.

    >>> result_stem_from_args(Namespace(out=Path("results"), model="smollm2", adapter="ub", dtype="bfloat16"),
    ...                       "ablation").as_posix()
    'results/ablation_smollm2-135m+ub_bfloat16'
    """
    return result_stem(args.out, kind, args.model, adapter=getattr(args, "adapter", None),
                       dtype=getattr(args, "dtype", None), variant=variant)


# --------------------------------------------------------------------------- where the cells run


def add_executor_args(parser: ArgumentParser) -> None:
    """``--executor`` (serial or ray), ``--workers`` and ``--ray-address``; read them with
    `executor_from_args` and `model_source_from_args`.

    >>> parser = Parser()
    >>> add_executor_args(parser)
    >>> parser.parse_args(["--executor", "ray", "--workers", "2"])
    Namespace(executor='ray', workers=2, ray_address=None, gpus_per_worker=None)
    """
    from interp.cli.argtypes import positive_float, positive_int
    from interp.core.executor import EXECUTORS

    parser.add_argument("--executor", default="serial", choices=EXECUTORS,
                        help="where the study's cells run: 'serial' (default: one after the other here) or 'ray' "
                             "(Ray actors, one model each; pip install -e '.[cluster]')")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="Ray actors (default: 2); each pins torch to its share of the cores")
    parser.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="join a running Ray cluster: 'auto', 'host:port' or 'ray://host:port' "
                             "(default: start a local instance)")
    parser.add_argument("--gpus-per-worker", type=positive_float, default=None, metavar="FRACTION",
                        help="GPU share of each actor, e.g. 0.5 for two small models per GPU "
                             "(default: the cluster's GPUs split between the workers; none without CUDA)")


def executor_from_args(parser: ArgumentParser, args: Namespace):
    """The executor the arguments name, started (a local Ray instance, or the cluster joined) so
    that a missing Ray or an address that does not answer is one line before any model loads.

    >>> parser = Parser()
    >>> add_executor_args(parser)
    >>> executor_from_args(parser, parser.parse_args([])).name
    'serial'
    """
    import sys

    from interp.core.executor import make_executor

    if args.executor == "serial":
        for flag, value in (("--workers", args.workers), ("--ray-address", args.ray_address),
                            ("--gpus-per-worker", args.gpus_per_worker)):
            if value is not None:
                fail(parser, flag, "only applies with --executor ray")
    if args.gpus_per_worker is not None and args.gpus_per_worker > 1:
        fail(parser, "--gpus-per-worker", f"expected a fraction of one GPU in (0, 1], got {args.gpus_per_worker}")
    try:
        executor = make_executor(args.executor, args.workers or 2, args.ray_address, args.gpus_per_worker)
        if args.executor == "ray":
            print(executor.start().describe(), file=sys.stderr)  # where the cells run, and how to watch them
        return executor
    except ValueError as err:
        argument, _, message = str(err).partition(": ")
        fail(parser, argument, message)


def model_source_from_args(args: Namespace):
    """How a worker loads the model of ``--model`` / ``--device`` / ``--dtype`` / ``--adapter``
    (a `interp.core.executor.ModelSource`, keyed by those arguments).

    >>> source = model_source_from_args(Namespace(model="tiny-gpt2", device="cpu", dtype=None, device_map=None,
    ...                                           adapter=None))
    >>> source.key, source.load().cfg.n_layers
    ('tiny-gpt2 device=cpu dtype=None device_map=None adapter=None', 2)
    """
    from functools import partial

    from interp.core.executor import ModelSource

    spec = {name: getattr(args, name, None) for name in ("model", "device", "dtype", "device_map", "adapter")}
    key = " ".join([str(spec["model"])] + [f"{name}={value}" for name, value in spec.items() if name != "model"])
    return ModelSource(key, partial(load_model_from_args, Namespace(**spec)))
