"""Edge scores on a GQA model: EAP, EAP-IG (inputs, m = 1, 4, 16), EAP-IG-activations (m = 2, 4)
and exact edge patching on the embedded SmolLM2-135M (30 layers x 9 query heads, 3 key/value heads),
UF in the paper's few-shot copy prompts with ``--shots`` shots (the test included).

EAP and EAP-IG score every position-resolved edge of the graph at once; an exact effect costs one
pass of the prompts per edge, so it runs on a sample: ``--per-layer`` component-level edges (an edge at
every position at once: the graph of ``circuit_runner(..., grain="components")``) drawn uniformly,
seeded, among the edges into each reader layer (the 30 layers and the logits), each removed alone
(`exact_effects`). Each method's component-level score (its position scores summed) is compared
with the exact effect of the sampled edges: Pearson, Spearman and the overlap of the top ``--top``.
Times are single runs (the methods differ by orders of magnitude); peak memory is each stage's own
resident peak (the kernel's high-water mark is reset before each stage where Linux allows it).

Prints the machine, the model's exact-copy accuracy on the prompts, the graph's size, and one table
row per method: seconds, speed-up over exact on the sample, peak memory, forward / backward passes,
Pearson, Spearman and top-k overlap against exact.

    python benchmarks/bench_circuits.py --n 16 --shots 2   # 310 sampled edges, 16 two-shot prompts
    python benchmarks/bench_circuits.py --n 16 --shots 11  # the paper's prompts (hours on a shared 2-core CPU)
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from interp.cli import Parser, positive_int, positive_int_list, run
from interp.interventions.circuits import circuit_runner, copying_task, edge_scores, exact_effects
from interp.interventions.circuits.role_graph import RoleGraph
from interp.interventions.circuits.role_scores import residual_scores
from interp.interventions.circuits.scores import PassCount
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _machine import format_load, load_average, machine_line  # noqa: E402


def build_parser() -> Parser:
    parser = Parser(__doc__)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--task", default="UF")
    parser.add_argument("--length", type=positive_int, default=10)
    parser.add_argument("--n", type=positive_int, default=2, help="prompts (default 2)")
    parser.add_argument("--shots", type=positive_int, default=2, help="shots per prompt, the test included (default 2; the paper: 11)")
    parser.add_argument("--per-layer", type=positive_int, default=10, help="sampled edges per reader layer (default 10)")
    parser.add_argument("--top", type=positive_int, default=20)
    parser.add_argument("--steps", type=positive_int_list, default=[1, 4, 16], help="EAP-IG steps (default 1,4,16)")
    parser.add_argument("--act-steps", type=positive_int_list, default=[2, 4],
                        help="EAP-IG-activations steps (default 2,4; each costs m - 1 passes per writer layer)")
    parser.add_argument("--batch-size", type=positive_int, default=2)
    return parser


def sample_edges(graph: RoleGraph, per_layer: int, seed: int = 0) -> torch.Tensor:
    """``per_layer`` edges of a component-level graph into each reader layer, uniformly at random (seeded)."""
    generator = torch.Generator().manual_seed(seed)
    readers = graph.components.readers
    layer = torch.tensor([readers[r].layer for r in graph.residual[:, 0].tolist()])
    chosen = []
    for value in layer.unique().tolist():
        members = (layer == value).nonzero()[:, 0]
        chosen.append(members[torch.randperm(len(members), generator=generator)[:per_layer]])
    return torch.cat(chosen)


def reset_peak() -> None:
    """Reset the kernel's resident high-water mark of this process (Linux 4.0+), where permitted."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_mb() -> float:
    """Resident peak since the last `reset_peak` (``VmHWM``), else since the process started."""
    try:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.manual_seed(0)
    model = load_model(args.model, device="cpu")
    bos = bool(getattr(model.cfg, "default_prepend_bos", False))
    task = copying_task(model.tokenizer, args.task, args.length, args.n, fmt="few-shot", n_shots=args.shots, prepend_bos=bos)
    print(machine_line())
    reset_peak()
    t = time.perf_counter()
    runner = circuit_runner(model, task, grain="components", batch_size=args.batch_size)
    copied = round(runner.clean_accuracy * task.n)  # the runner's clean run, chunk by chunk
    print(f"{args.task} length {args.length}, {args.shots}-shot prompts: the model copies {copied} of {task.n} exactly")
    graph = runner.graph.components
    sample = sample_edges(runner.graph, args.per_layer)
    print(f"{args.model}: {len(graph.writers)} writers, {len(graph.readers)} readers, {task.clean.shape[1]} positions, "
          f"{graph.n_edges_per_position * task.clean.shape[1]:,} position-resolved edges; {len(sample)} sampled; "
          f"load {format_load(load_average())}")
    # per chunk of prompts: the clean and counterfactual runs the removal starts from, and the clean logits
    passes = PassCount(forward=3 * len(runner.chunks) + runner.passes(len(sample)))
    with tqdm(total=runner.passes(len(sample)), desc="exact edges") as bar:
        exact = exact_effects(runner, sample, on_pass=bar.update)
    exact_time = time.perf_counter() - t
    top = set(exact.abs().argsort(descending=True)[:args.top].tolist())

    def row(name: str, seconds: float, peak: float, passes: PassCount, values: torch.Tensor) -> str:
        pearson = float(torch.corrcoef(torch.stack([values.double(), exact.double()]))[0, 1])
        spearman = float(spearmanr(values.numpy(), exact.numpy()).statistic)
        overlap = len(top & set(values.abs().argsort(descending=True)[:args.top].tolist()))
        return (f"| {name} | {seconds:.1f} | {exact_time / seconds:.1f} | {peak:.0f} | {passes.forward} / {passes.backward} | "
                f"{pearson:.3f} | {spearman:.3f} | {overlap}/{args.top} |")

    print(f"\n| method | seconds | x faster than exact on the sample | peak RSS MB | fwd / bwd passes | Pearson | Spearman | top-{args.top} overlap |")
    print("|---|---|---|---|---|---|---|---|")
    print(row("exact (sample)", exact_time, peak_mb(), passes, exact), flush=True)
    runs = [("eap", 1)] + [("eap-ig", s) for s in args.steps] + [("eap-ig-act", s) for s in args.act_steps]
    for method, steps in runs:  # each row as it finishes: a long run shows its progress
        reset_peak()
        t = time.perf_counter()
        passes = PassCount()
        scores = edge_scores(model, task, method, steps=steps, batch_size=args.batch_size, graph=graph, passes=passes)
        print(row(method if method == "eap" else f"{method} m={steps}", time.perf_counter() - t, peak_mb(), passes,
                  residual_scores(scores, runner.graph)[sample]), flush=True)
    print(f"\nload after: {format_load(load_average())}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
