"""benchmarks/bench_circuits.py end to end on a tiny GQA-layout model: one row per method, each
compared with the exact effects of the sampled edges."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_bench_circuits_prints_a_row_per_method(capsys):
    import bench_circuits

    assert bench_circuits.main(["--model", "tiny-llama", "--length", "3", "--n", "2", "--shots", "2", "--per-layer", "2",
                                "--steps", "1,2", "--act-steps", "2", "--top", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| method")]
    assert [r.split(" | ")[0] for r in rows] == ["| exact (sample)", "| eap", "| eap-ig m=1", "| eap-ig m=2", "| eap-ig-act m=2"]
    assert rows[0].split(" | ")[5:7] == ["1.000", "1.000"]  # exact against itself
    assert rows[1].split(" | ")[5] == rows[2].split(" | ")[5]  # one step of EAP-IG is EAP
    assert "copies" in out and "sampled" in out


def test_bench_circuits_counts_copies_over_batches_smaller_than_the_prompts(capsys):
    import re

    import bench_circuits
    import torch

    from interp.interventions.circuits import copying_task
    from interp.models import load_model

    assert bench_circuits.main(["--model", "tiny-llama", "--length", "3", "--n", "3", "--shots", "2", "--per-layer", "1",
                                "--steps", "1", "--act-steps", "2", "--top", "2", "--batch-size", "2"]) == 0
    copied = int(re.search(r"copies (\d+) of 3 exactly", capsys.readouterr().out).group(1))
    torch.manual_seed(0)
    model = load_model("tiny-llama", device="cpu")
    task = copying_task(model.tokenizer, "UF", 3, 3, fmt="few-shot", n_shots=2,
                        prepend_bos=bool(getattr(model.cfg, "default_prepend_bos", False)))
    with torch.no_grad():
        assert copied == int(task.correct(model(task.clean)).sum())  # all three prompts in one batch
