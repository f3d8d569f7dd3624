"""Fine-tune a model on one task (full or LoRA), evaluating in and out of distribution.

Examples:
    # the paper's GPT-2 setting (on a GPU; see analyses/gpu/finetune_gpt2xl.sh)
    python analyses/finetune.py --model gpt2-xl --task UF --precision bf16 --gradient-checkpointing
    # a LoRA adapter for the embedded model, kept in the repo for the analyses' --adapter
    # (the exact command of each adapter is in adapters/<name>/README.md; ~30 min on one CPU core)
    python analyses/finetune.py --model smollm2-135m --task UB --lora --adapter-out adapters/ub \\
        --train-lengths 5-20 --id-lengths 10 --ood-lengths 30 --steps 200 --batch-size 8 --lr 2e-3 \\
        --warmup 0.1 --device cpu --threads 1

Writes <out>/finetune_<model>_<task>.{csv,json,md} (step, split, length, accuracy, loss) and
checkpoints under <out>/runs/; a killed run started again with the same arguments resumes.
"""

from __future__ import annotations

import shlex
import sys

import torch

from interp.models.adapters import LoraSettings
from interp.cli import (Parser, add_model_args, add_output_args, add_prompt_args, fail, fraction, log_through_tqdm,
                        new_or_existing_dir, non_negative_float, non_negative_int, positive_float, positive_int,
                        positive_int_list, run, seed, task_name)
from interp.data.tasks import TASK_NAMES
from interp.experiments.finetune import finetune
from interp.training import PRECISIONS, SCHEDULES, TrainConfig


def build_parser() -> Parser:
    defaults = TrainConfig()
    p = Parser(__doc__)
    add_model_args(p)
    add_output_args(p)
    add_prompt_args(p, shots=defaults.n_shots)
    p.add_argument("--task", default="UF", type=task_name, help=f"one of {', '.join(TASK_NAMES)}")
    p.add_argument("--train-lengths", type=positive_int_list, default=(), help="e.g. 5-30 (default: the task family's)")
    p.add_argument("--id-lengths", type=positive_int_list, default=(), help="in-distribution evaluation lengths")
    p.add_argument("--ood-lengths", type=positive_int_list, default=(), help="out-of-distribution evaluation lengths")
    p.add_argument("--steps", type=positive_int, default=defaults.steps)
    p.add_argument("--batch-size", type=positive_int, default=defaults.batch_size, help="examples per optimizer step")
    p.add_argument("--grad-accum", type=positive_int, default=defaults.grad_accum, help="micro-batches per step")
    p.add_argument("--lr", type=positive_float, default=defaults.lr)
    p.add_argument("--weight-decay", type=non_negative_float, default=defaults.weight_decay)
    p.add_argument("--warmup", type=fraction, default=defaults.warmup_frac, help="fraction of steps of linear warmup")
    p.add_argument("--schedule", default=defaults.schedule, choices=SCHEDULES)
    p.add_argument("--max-grad-norm", type=non_negative_float, default=defaults.max_grad_norm,
                   help="gradient clipping norm (0: no clipping)")
    p.add_argument("--seed", type=seed, default=defaults.seed)
    p.add_argument("--max-position", type=positive_int, default=None,
                   help="train with a random position-id offset in [0, N - len] (absolute-position models, the paper's trick)")
    p.add_argument("--precision", default=defaults.precision, choices=PRECISIONS, help="autocast dtype")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of every weight")
    p.add_argument("--lora-rank", type=positive_int, default=LoraSettings.rank)
    p.add_argument("--lora-alpha", type=positive_float, default=LoraSettings.alpha)
    p.add_argument("--lora-targets", default=None, help="comma-separated module names (default: attention projections)")
    p.add_argument("--adapter-out", type=new_or_existing_dir, default=None, help="folder to save the adapter in (with --lora), e.g. adapters/ub")
    p.add_argument("--save-model", action="store_true", help="save the fine-tuned model under the run folder")
    p.add_argument("--eval-every", type=positive_int, default=defaults.eval_every)
    p.add_argument("--eval-examples", type=non_negative_int, default=defaults.eval_examples)
    p.add_argument("--eval-batch-size", type=positive_int, default=defaults.eval_batch_size)
    p.add_argument("--checkpoint-every", type=positive_int, default=defaults.checkpoint_every)
    p.add_argument("--stop-at-accuracy", type=fraction, default=None, help="stop once every in-distribution length reaches it")
    p.add_argument("--memory-budget-gib", type=positive_float, default=None, help="refuse plans above this (default: the device's memory)")
    p.add_argument("--run-dir", type=new_or_existing_dir, default=None, help="checkpoint folder (default <out>/runs/finetune_<model>_<task>)")
    p.add_argument("--no-resume", action="store_true", help="start over even if the run folder holds a checkpoint")
    p.add_argument("--tag", default=None, help="suffix for the results and run names")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="torch CPU threads (1 is fastest on a CPU shared with other jobs)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.adapter:
        fail(parser, "--adapter", "fine-tuning starts from the base model; train a new adapter with --lora --adapter-out")
    if args.device_map:
        fail(parser, "--device-map", "fine-tuning runs on one device (--device); split models only for analyses")
    if args.adapter_out and not args.lora:
        fail(parser, "--adapter-out", "needs --lora (full fine-tuning saves a model with --save-model)")
    log_through_tqdm()
    if args.threads:
        torch.set_num_threads(args.threads)
    lora = None
    if args.lora:
        targets = tuple(t for t in args.lora_targets.split(",") if t) if args.lora_targets else None
        lora = LoraSettings(rank=args.lora_rank, alpha=args.lora_alpha, target_modules=targets)
    config = TrainConfig(
        task=args.task, train_lengths=tuple(args.train_lengths), id_lengths=tuple(args.id_lengths),
        ood_lengths=tuple(args.ood_lengths),
        steps=args.steps, batch_size=args.batch_size, grad_accum=args.grad_accum, lr=args.lr,
        weight_decay=args.weight_decay, warmup_frac=args.warmup, schedule=args.schedule,
        max_grad_norm=args.max_grad_norm, seed=args.seed, n_shots=args.shots, template=args.template or TrainConfig.template,
        max_position=args.max_position, precision=args.precision, gradient_checkpointing=args.gradient_checkpointing,
        lora=lora, eval_every=args.eval_every, eval_examples=args.eval_examples, eval_batch_size=args.eval_batch_size,
        checkpoint_every=args.checkpoint_every, stop_at_accuracy=args.stop_at_accuracy,
    )
    command = "python analyses/finetune.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    out = finetune(args.model, config, run_dir=args.run_dir, results_dir=args.out, device=args.device, dtype=args.dtype,
                   adapter_out=args.adapter_out, save_model=args.save_model,
                   memory_budget_gib=args.memory_budget_gib, resume=not args.no_resume,
                   progress=not args.quiet, tag=args.tag, command=command)
    print(f"memory estimate: {out.memory.describe() if out.memory else 'n/a'}")
    for when in ("before", "after"):
        summary = ", ".join(f"{split} n={n}: {acc:.2f}" for split, accs in out.info[when].items() for n, acc in accs.items())
        print(f"{when:6s} {summary}")
    print("wrote " + ", ".join(str(p) for p in out.table))
    if out.adapter:
        print(f"adapter saved to {out.adapter}")
    if out.model_dir:
        print(f"model saved to {out.model_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
