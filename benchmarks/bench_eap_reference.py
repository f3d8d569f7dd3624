"""The toolkit's first-order edge scores beside the reference implementation behind the MIB benchmark,
hannamw/EAP-IG 2.0 (``eap.attribute.attribute``), on the same model, tokens and metric: by default
SmolLM2-135M, UF at length 5 in 5-shot prompts, 16 prompts in batches of 8, EAP-IG with 5 steps (the
reference's README setting).

Each round runs toolkit EAP, reference EAP, toolkit EAP-IG and reference EAP-IG in turn (``--warmup``
untimed rounds first, then ``--repeats`` timed ones). Prints each side's median time with its range,
the ratio reference / toolkit per round (median, min, max), the load average before and after, and the
largest difference between the two libraries' scores.

What is compared. Both score every edge from a writer (token embedding, head output, MLP output) to a
reader (a head's query, key or value input, an MLP's input, the logits) as the clean run's gradient
times the change of the writer's output to the corrupt run's. The toolkit keeps positions apart
(``[pos, reader, writer]``) and reads keys and values per key/value head; the reference sums over
positions and reads keys and values per query head. The scores are compared at the toolkit's grain:
positions summed, the reference's key/value scores summed over the query heads of a group. EAP agrees
to float precision. EAP-IG differs by design: the toolkit averages gradients at the points k / m for
k = 1..m, the reference at k = 0..m-1; the check reruns the reference once, untimed, with its points
moved to k = 1..m (the one shim below that changes a result, and it is never timed).

The metric: the toolkit's `CircuitTask.metric` (mean logit difference of the answer tokens over the
corrupt prompt's), summed over a batch; both libraries divide by the number of prompts.

The reference is not part of the toolkit. To get it:

    git clone https://github.com/hannamw/EAP-IG /tmp/EAP-IG     # measured at commit 795f560
    python benchmarks/bench_eap_reference.py --reference /tmp/EAP-IG

Without it (no ``--reference`` and no ``$EAP_IG_REFERENCE``) the script prints one line and exits 0.
"""

from __future__ import annotations

import builtins
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import einops
import torch
from torch import Tensor, nn

from interp.cli import Parser, positive_int, run
from interp.interventions.circuits import circuit_graph, copying_task, edge_scores
from interp.interventions.circuits.graph import CircuitGraph, graph_hooks_enabled
from interp.interventions.circuits.task import CircuitTask
from interp.models import load_model
from interp.models.bridge import TransformerBridge

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_task_args, add_timing_args, compare_many, print_header, spread  # noqa: E402
from _machine import format_load, load_average  # noqa: E402

REFERENCE_ENV = "EAP_IG_REFERENCE"


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before any model is loaded."""
    parser = add_task_args(Parser(__doc__), length=5, n=16)
    parser.add_argument("--reference", type=Path, default=os.environ.get(REFERENCE_ENV),
                        help=f"a checkout of hannamw/EAP-IG (default: ${REFERENCE_ENV}); without it the script skips")
    parser.add_argument("--model", default="smollm2-135m", help="model (default: smollm2-135m)")
    parser.add_argument("--shots", type=positive_int, default=5, help="shots per prompt, the test included (default: 5)")
    parser.add_argument("--steps", type=positive_int, default=5, help="EAP-IG steps for both libraries (default: 5)")
    return add_timing_args(parser)


def reference_source(path: Path | None) -> Path | None:
    """The folder holding the reference's ``eap`` package (a checkout or its ``src``), or None.

    >>> reference_source(None) is None, reference_source(Path("/nonexistent")) is None
    (True, True)
    """
    if path is None:
        return None
    for folder in (path / "src", path):
        if (folder / "eap" / "attribute.py").is_file():
            return folder
    return None


# =====================================================================================================
# SHIMS: the reference (written for TransformerLens 2's HookedTransformer) on TransformerLens 4.3's
# TransformerBridge. None changes what the reference computes, except `aligned_steps` (used only for
# the untimed EAP-IG check).
#   1. imports TransformerLens 4.3 no longer has (HookedTransformer, HookedTransformerConfig,
#      transformer_lens.utils) and the reference's drawing module (matplotlib, not installed here);
#   2. its score matrices are created on 'cuda': they are created on the model's device instead;
#   3. its tokenizer helper takes strings: it takes the toolkit's token tensors instead (the same
#      tokens for both libraries, no padding);
#   4. grouped-query attention: TransformerLens 2's `ungroup_grouped_query_attention` (a key and value
#      input per query head) does not exist in 4.3: a second copy of the model has each key/value
#      projection repeated for the query heads sharing it, which computes the same function.
# =====================================================================================================


class _CudaOnDevice(types.ModuleType):
    """``torch`` as the reference's ``attribute`` module sees it (shim 2): ``device='cuda'`` means ``device``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__("torch")
        self.device = device

    def __getattr__(self, name: str):
        return getattr(torch, name)

    def zeros(self, *size, device=None, **kwargs) -> Tensor:
        return torch.zeros(*size, device=self.device if device == "cuda" else device, **kwargs)


def _tokens_as_given(model, tokens: Tensor, max_length: int | None = None):
    """Shim 3: (tokens, attention mask, lengths, positions) of already tokenized, unpadded prompts."""
    return tokens, None, torch.full((tokens.shape[0],), tokens.shape[1]), tokens.shape[1]


def import_reference(source: Path, model: TransformerBridge) -> types.ModuleType:
    """The reference's ``eap`` package, imported from ``source`` with shims 1-3 in place."""
    import transformer_lens

    if "HookedTransformer" not in vars(transformer_lens):  # shim 1 (TransformerLens 4 raises on the name)
        transformer_lens.HookedTransformer = TransformerBridge
        transformer_lens.HookedTransformerConfig = type(model.cfg)
    if "transformer_lens.utils" not in sys.modules:
        utils = types.ModuleType("transformer_lens.utils")
        utils.get_attention_mask = lambda tokenizer, tokens, prepend_bos: torch.ones_like(tokens)
        sys.modules["transformer_lens.utils"] = utils
    drawing = types.ModuleType("eap.visualization")
    drawing.get_color = drawing.generate_random_color = lambda *args, **kwargs: "#000000"
    sys.modules["eap.visualization"] = drawing
    sys.path.insert(0, str(source))
    import eap.attribute
    import eap.graph

    eap.attribute.torch = _CudaOnDevice(torch.device(model.cfg.device))  # shim 2
    eap.attribute.tokenize_plus = _tokens_as_given  # shim 3
    return eap


def ungrouped(model: TransformerBridge) -> TransformerBridge:
    """Shim 4: ``model`` with a key/value head per query head, in place (load a second copy first)."""
    cfg = model.cfg
    n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    if n_kv != cfg.n_heads:
        group = cfg.n_heads // n_kv
        for block in model.blocks:
            for projection in (block.attn.k, block.attn.v):
                linear = projection.original_component
                weight = einops.repeat(linear.weight.detach(), "(kv e) d -> (kv g e) d", kv=n_kv, g=group)
                linear.weight = nn.Parameter(weight, requires_grad=linear.weight.requires_grad)
                if linear.bias is not None:
                    bias = einops.repeat(linear.bias.detach(), "(kv e) -> (kv g e)", kv=n_kv, g=group)
                    linear.bias = nn.Parameter(bias, requires_grad=linear.bias.requires_grad)
                linear.out_features = weight.shape[0]
            block.attn.original_component.num_key_value_groups = 1
        configs = {id(c): c for c in [cfg] + [getattr(m, "config", None) for m in model.modules()]
                   if hasattr(c, "n_key_value_heads")}  # each block keeps a config of its own
        for config in configs.values():
            config.n_key_value_heads = cfg.n_heads
    cfg.ungroup_grouped_query_attention = True  # what the reference asserts of a model with key/value heads
    return model


def aligned_steps(eap: types.ModuleType) -> Callable[[], None]:
    """The reference's EAP-IG at the points k / m, k = 1..m, like the toolkit's (its own loop runs
    ``range(0, steps)``); returns the function that undoes it. Used for the untimed check only."""
    eap.attribute.range = lambda start, stop: builtins.range(start + 1, stop + 1)
    return lambda: delattr(eap.attribute, "range")

# ============================================================================== end of the shims


def at_toolkit_grain(scores: Tensor, graph: CircuitGraph) -> Tensor:
    """The reference's ``[forward, backward]`` scores as the toolkit's ``[reader, writer]``: key/value
    readers summed over the query heads of their group (the reference has no position writer)."""
    n_heads, per_layer = graph.n_heads, 3 * graph.n_heads + 1
    to_backward = torch.zeros(len(graph.readers), scores.shape[1])
    for r, reader in enumerate(graph.readers):
        base = reader.layer * per_layer
        if reader.kind == "q":
            to_backward[r, base + reader.head] = 1
        elif reader.kind in ("k", "v"):
            offset = base + (n_heads if reader.kind == "k" else 2 * n_heads) + reader.head * graph.group_size
            to_backward[r, offset:offset + graph.group_size] = 1
        elif reader.kind == "mlp_in":
            to_backward[r, base + 3 * n_heads] = 1
        else:
            to_backward[r, -1] = 1
    return to_backward @ scores.float().cpu().T


def reference_scores(eap: types.ModuleType, model: TransformerBridge, task: CircuitTask, batch_size: int,
                     method: str, steps: int) -> Tensor:
    """``eap.attribute.attribute`` on the task's prompts, batch by batch: ``[forward, backward]`` scores."""
    graph = eap.graph.Graph.from_model(model)
    batches = [(task.clean[i:i + batch_size], task.corrupt[i:i + batch_size], slice(i, i + batch_size))
               for i in range(0, task.n, batch_size)]

    def metric(logits, clean_logits, lengths, rows):
        return task.rows(rows).metric(logits).sum()

    with graph_hooks_enabled(model):
        eap.attribute.attribute(model, graph, batches, metric, method, ig_steps=steps if method != "EAP" else None,
                                quiet=True)
    return graph.scores.clone()


def shown(name: str, fn: Callable[[], Tensor]) -> Callable[[], Tensor]:
    """``fn`` printing its own time as it finishes: a round of the defaults takes minutes."""

    def run_and_show() -> Tensor:
        start = time.perf_counter()
        value = fn()
        print(f"  {name}: {time.perf_counter() - start:.1f} s (load {format_load(load_average())})", flush=True)
        return value

    return run_and_show


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    source = reference_source(args.reference)
    if source is None:
        where = f"no eap/attribute.py under {args.reference}" if args.reference else f"no --reference or ${REFERENCE_ENV}"
        print(f"bench_eap_reference: skipped ({where}; git clone https://github.com/hannamw/EAP-IG to run it)")
        return 0
    model = load_model(args.model, device="cpu")
    graph = circuit_graph(model)
    if graph.pos_embed:
        raise ValueError(f"--model {args.model}: has a position-embedding writer, which the reference's graph lacks")
    reference_model = ungrouped(load_model(args.model, device="cpu"))
    eap = import_reference(source, reference_model)
    task = copying_task(model.tokenizer, args.task, args.length, args.n, fmt="few-shot", n_shots=args.shots,
                        prepend_bos=bool(getattr(model.cfg, "default_prepend_bos", False)))
    with torch.no_grad():
        drift = float((model(task.clean[:1]) - reference_model(task.clean[:1])).abs().max())
    print_header(f"bench_eap_reference: {args.model}, {args.task} at length {args.length}, {args.shots}-shot, "
                 f"{task.n} prompts of {task.clean.shape[1]} tokens in batches of {args.batch_size}, "
                 f"EAP-IG with {args.steps} steps; reference from {source}")
    print(f"{len(graph.writers)} writers, {len(graph.readers)} readers ({graph.n_edges_per_position:,} edges per position); "
          f"ungrouped copy for the reference: max |logit difference| {drift:.1e}", flush=True)

    def toolkit(method: str) -> Callable[[], Tensor]:
        return lambda: edge_scores(model, task, method, steps=args.steps, batch_size=args.batch_size, graph=graph)

    def reference(method: str) -> Callable[[], Tensor]:
        return lambda: reference_scores(eap, reference_model, task, args.batch_size, method, args.steps)

    sides = [("toolkit EAP", toolkit("eap")), ("reference EAP", reference("EAP")),
             (f"toolkit EAP-IG m={args.steps}", toolkit("eap-ig")),
             (f"reference EAP-IG m={args.steps}", reference("EAP-IG-inputs"))]
    # the harness's own table divides by its last side only: this one prints each library pair instead
    result = compare_many([(name, shown(name, fn)) for name, fn in sides], repeats=args.repeats, warmup=args.warmup,
                          flops=False, peak=False, quiet=True, title="toolkit vs reference")
    print(f"threads {result.threads} | load average (1/5/15 min) before {format_load(result.load_before)}, "
          f"after {format_load(result.load_after)}")
    for side in result.sides:
        print(f"{side.name:<28} median s (min-max) {spread(side.times)}   rounds: "
              + " ".join(f"{t:.1f}" for t in side.times))
    for ours, theirs in ((result.sides[0], result.sides[1]), (result.sides[2], result.sides[3])):
        ratios = [t / o for o, t in zip(ours.times, theirs.times)]
        print(f"time({theirs.name}) / time({ours.name}): median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x) over {len(ratios)} rounds")

    valid = graph.valid
    mine_eap, mine_ig = result.sides[0].output.sum(0), result.sides[2].output.sum(0)
    undo = aligned_steps(eap)
    try:
        aligned = at_toolkit_grain(reference("EAP-IG-inputs")(), graph)
    finally:
        undo()
    for name, mine, theirs in (("EAP", mine_eap, at_toolkit_grain(result.sides[1].output, graph)),
                               (f"EAP-IG m={args.steps}, points as published (k = 0..m-1 vs 1..m)", mine_ig,
                                at_toolkit_grain(result.sides[3].output, graph)),
                               (f"EAP-IG m={args.steps}, reference moved to k = 1..m", mine_ig, aligned)):
        gap = float((mine - theirs)[valid].abs().max())
        scale = float(mine[valid].abs().max())
        print(f"scores {name}: max |toolkit - reference| {gap:.2e} over {int(valid.sum()):,} component edges "
              f"(largest |score| {scale:.3g}, relative {gap / scale:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
