"""Cold load (dequantize the GGUF, convert, process the weights) vs warm load (raw and processed
weights from the cache) of the embedded model, in a fresh cache folder, in one run. A third
timing shows what the processed-weight cache saves: a warm load that has to process again."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import timed  # noqa: E402

import torch  # noqa: E402

from interp.models import embedded_cache_path, load_model  # noqa: E402


def main() -> None:
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["INTERP_CACHE"] = cache
        with timed("cold (GGUF -> cache -> bridge)", times):
            cold = load_model(device="cpu")
        ids = torch.tensor([cold.tokenizer.encode("The capital of France is")])
        reference = cold(ids)
        del cold
        with timed("warm (cache -> bridge)", times):
            warm = load_model(device="cpu")
        same_warm = torch.equal(warm(ids), reference)
        del warm
        for processed in embedded_cache_path().glob("processed-*.safetensors"):
            processed.unlink()
        with timed("warm, raw weights only (processing again)", times):
            unprocessed = load_model(device="cpu")
        same_unprocessed = torch.equal(unprocessed(ids), reference)
    cold_s, warm_s = times["cold (GGUF -> cache -> bridge)"], times["warm (cache -> bridge)"]
    raw_s = times["warm, raw weights only (processing again)"]
    print(f"cold / warm load time ratio: {cold_s / warm_s:.1f}x (target >= 10x); "
          f"processing again / warm: {raw_s / warm_s:.1f}x; "
          f"identical logits: warm {same_warm}, reprocessed {same_unprocessed}")


if __name__ == "__main__":
    main()
