#!/usr/bin/env bash
# Fine-tune GPT-2 XL (1.5B) on one task, as the paper does (finetuning/ in its repo), on one GPU.
#
# Usage (from the repository root):
#   bash analyses/gpu/finetune_gpt2xl.sh [TASK ...]          # default: UF UB NF NB
#   MODEL=/path/to/gpt2-xl STEPS=10000 bash analyses/gpu/finetune_gpt2xl.sh UB
#
# Needs
#   * one CUDA GPU with >= 40 GB (full fine-tuning keeps fp32 master weights, gradients and AdamW
#     moments: 1.56e9 x 16 bytes = 23.2 GiB, plus activations; bf16 autocast and gradient
#     checkpointing keep activations to a few GiB). analyses/finetune.py estimates this before
#     loading any weight and stops with the arithmetic if the GPU is too small; then add --lora.
#   * the project installed (`make install`) with a CUDA build of torch instead of the CPU one:
#       .venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128
#   * GPT-2 XL weights on disk (the machine may be offline): either in the Hugging Face cache
#     (`huggingface-cli download openai-community/gpt2-xl` where there is network, then copy
#     ~/.cache/huggingface/hub/models--openai-community--gpt2-xl) or a folder with config.json and
#     model.safetensors passed as MODEL=/path.
#
# Settings: the paper's (AdamW lr 1e-5, weight decay 0.01, 15% warmup then linear decay, gradient
# clipping 1, batch 64, loss on the answer only, a random position-id offset so that position
# embeddings beyond the training lengths are trained: --max-position), zero-shot lines
# "<bos> x1 .. xn : y1 .. yn <eos>" (copying) and " x1 .. | q: a" (retrieval). STEPS defaults to
# 3000; the paper's 15 epochs of ~45k examples are ~10k steps (STEPS=10000).
#
# Time: about 0.2-0.3 s a step on an H100/H200 (batch 64 in 2 micro-batches, sequences of 10-110
# tokens), so ~15 min a task for 3000 steps plus ~1 min of evaluation; ~50 min at STEPS=10000.
# A killed run started again with the same arguments resumes from its last checkpoint
# (every 500 steps: ~18 GiB each, in results/runs/finetune_gpt2-xl_<TASK>/checkpoint.safetensors).
#
# Writes, per task
#   results/finetune_gpt2-xl_<TASK>.{csv,json,md}   step, split (id/ood), length, accuracy, loss
#   results/runs/finetune_gpt2-xl_<TASK>/            checkpoint (delete after the run)
#   results/runs/finetune_gpt2-xl_<TASK>/model/      the fine-tuned model (with SAVE_MODEL=1)
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=${PY:-.venv/bin/python}
MODEL=${MODEL:-gpt2-xl}
STEPS=${STEPS:-3000}
TASKS=("$@")
[ ${#TASKS[@]} -eq 0 ] && TASKS=(UF UB NF NB)
EXTRA=()
[ "${SAVE_MODEL:-0}" = 1 ] && EXTRA+=(--save-model)

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: install a CUDA build of torch (see the header of this script)')"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

for TASK in "${TASKS[@]}"; do
  case "$TASK" in
    UF|UB) LENGTHS=(--train-lengths 5-30 --id-lengths 10,30 --ood-lengths 40,50) ;;  # 62 single-token items
    NF|NB) LENGTHS=(--train-lengths 5-50 --id-lengths 20,50 --ood-lengths 75,100) ;;
    *)     LENGTHS=(--train-lengths 7-50 --id-lengths 20,50 --ood-lengths 75,100) ;;
  esac
  echo "=== GPT-2 XL on $TASK: $STEPS steps ==="
  "$PY" analyses/finetune.py --model "$MODEL" --task "$TASK" --device cuda \
    --precision bf16 --gradient-checkpointing --batch-size 64 --grad-accum 2 \
    --lr 1e-5 --weight-decay 0.01 --warmup 0.15 --schedule linear --max-grad-norm 1.0 \
    --shots 0 --max-position 256 --steps "$STEPS" --eval-every 500 --checkpoint-every 500 \
    --eval-examples 200 --eval-batch-size 32 --seed 0 "${LENGTHS[@]}" "${EXTRA[@]}"
done
