"""Cold load (dequantize the GGUF, then convert) vs warm load (from the safetensors cache) of the
embedded model, each in a fresh cache folder, in one run."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

import torch  # noqa: E402

from interp.models import load_model  # noqa: E402


def main() -> None:
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["INTERP_CACHE"] = cache
        import interp.models  # noqa: F401  (warm imports so neither timing pays for them)

        with timed("cold (GGUF -> cache -> bridge)", times):
            cold = load_model(device="cpu")
        ids = torch.tensor([cold.tokenizer.encode("The capital of France is")])
        reference = cold(ids)
        del cold
        with timed("warm (cache -> bridge)", times):
            warm = load_model(device="cpu")
        same = torch.allclose(warm(ids), reference)
    cold_s, warm_s = times["cold (GGUF -> cache -> bridge)"], times["warm (cache -> bridge)"]
    print(f"cold / warm load time ratio: {cold_s / warm_s:.1f}x (target >= 10x); identical logits: {same}")


if __name__ == "__main__":
    main()
