"""Training never hands on ruined numbers: a run that diverges on its last step fails, a checkpoint
whose run diverged or whose contents were tampered with is refused in one line naming the file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from interp.models import tiny_hf_model
from interp.training import CHECKPOINT_NAME, CheckpointUnreadable, TrainConfig, read_checkpoint, save_checkpoint, train
from interp.training.loop import TrainingDiverged, check_finite_weights

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


def small_config(**overrides) -> TrainConfig:
    base = dict(task="UF", train_lengths=(3, 4), id_lengths=(4,), ood_lengths=(), steps=2, batch_size=4,
                lr=3e-3, warmup_frac=0.0, n_shots=0, eval_every=2, eval_examples=4, eval_batch_size=4,
                checkpoint_every=1, seed=0)
    return TrainConfig(**(base | overrides))


def test_divergence_on_the_last_step_fails_and_writes_no_checkpoint(tmp_path):
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    # step 1's loss is finite; only its update ruins the model, and no later step's loss shows it
    with pytest.raises(TrainingDiverged, match=r"evaluation loss is nan at step 1") as err:
        train(model, tokenizer, small_config(lr=1e30, steps=1), tmp_path, progress=False)
    assert len(str(err.value).splitlines()) == 1
    assert not (tmp_path / CHECKPOINT_NAME).exists()


def test_non_finite_weights_stop_a_run():
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(TrainingDiverged, match=r"1 weight tensors are not finite after step 3 \(e.g. weight\)"):
        check_finite_weights(model, 3, TrainConfig())


def test_finetune_refuses_to_save_a_diverged_model(tmp_path, capsys):
    import finetune

    argv = ["--model", "tiny-gpt2", "--steps", "1", "--lr", "1e30", "--train-lengths", "3-4", "--id-lengths", "4",
            "--ood-lengths", "5", "--eval-examples", "4", "--batch-size", "4", "--shots", "0", "--save-model",
            "--out", str(tmp_path), "--quiet"]
    assert finetune.run(finetune.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "training diverged: the evaluation loss is nan at step 1" in err[0]
    assert not list(tmp_path.glob("runs/*/model")) and not list(tmp_path.glob("finetune_*.csv"))


@pytest.fixture()
def checkpointed(tmp_path):
    """A run folder holding the checkpoint of step 1 of a 2-step run."""
    model, tokenizer = tiny_hf_model("tiny-gpt2")

    class Killed(Exception):
        pass

    def kill(step, loss):
        raise Killed

    with pytest.raises(Killed):
        train(model, tokenizer, small_config(), tmp_path, progress=False, on_step=kill)
    return tmp_path / CHECKPOINT_NAME


def _first_weight(payload: dict) -> str:
    return next(iter(payload["model"]))


def _nan_weight(payload):
    payload["model"][_first_weight(payload)][..., 0] = float("nan")


def _nan_moment(payload):
    state = next(iter(payload["optimizer"]["state"].values()))
    state["exp_avg"].view(-1)[0] = float("nan")


def _wrong_shape(payload):
    name = _first_weight(payload)
    payload["model"][name] = torch.zeros(3, 3)


def _bad_rng(payload):
    payload["rng"]["torch"] = torch.zeros(5, dtype=torch.uint8)


def _bad_python_rng(payload):
    payload["rng"]["python"] = "not a state"


@pytest.mark.parametrize("damage, fragment", [
    (lambda p: p.update(step=-5), "has step -5, expected an integer from 0 to 2"),
    (lambda p: p.update(step="1"), "has step '1', expected an integer"),
    (lambda p: p.update(step=1.5), "has step 1.5, expected an integer"),
    (lambda p: p.update(step=True), "has step True, expected an integer"),
    (lambda p: p.update(step=99), "has step 99, expected an integer from 0 to 2"),
    (_nan_weight, "holds non-finite weights (1 tensors"),
    (_nan_moment, "holds non-finite optimizer state"),
    (_wrong_shape, "is (3, 3) where the model's is"),
    (_bad_rng, "damaged optimizer, scheduler or RNG state"),
    (_bad_python_rng, "damaged optimizer, scheduler or RNG state"),
    (lambda p: p.update(history=[{"step": "x", "nonsense": 1}]), "damaged history"),
    (lambda p: p.update(losses=[["a"]]), "damaged optimizer, scheduler or RNG state"),
    (lambda p: p.update(config="UF"), "holds no configuration table"),
])
def test_a_damaged_checkpoint_is_refused_in_one_line_naming_the_file(checkpointed, damage, fragment):
    payload = read_checkpoint(checkpointed)
    damage(payload)
    save_checkpoint(checkpointed, payload)
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    with pytest.raises(CheckpointUnreadable) as err:
        train(model, tokenizer, small_config(), checkpointed.parent, progress=False)
    message = str(err.value)
    assert fragment in message and str(checkpointed) in message and "--no-resume" in message
    assert len(message.splitlines()) == 1


def test_a_folder_named_like_the_checkpoint_is_refused_before_training(tmp_path):
    (tmp_path / CHECKPOINT_NAME).mkdir()
    steps = []
    model, tokenizer = tiny_hf_model("tiny-gpt2")
    with pytest.raises(ValueError, match=rf"run_dir: .*{CHECKPOINT_NAME} is not a file, so no checkpoint"):
        train(model, tokenizer, small_config(), tmp_path, progress=False, on_step=lambda s, l: steps.append(s))
    assert steps == []


def test_finetune_refuses_a_folder_named_like_the_checkpoint_before_loading(tmp_path, capsys, monkeypatch):
    import finetune
    import interp.experiments.finetune as experiment

    (tmp_path / "run" / CHECKPOINT_NAME).mkdir(parents=True)
    monkeypatch.setattr(experiment, "load_hf_model", lambda *a, **k: pytest.fail("loaded a model first"))
    assert finetune.run(finetune.main, ["--model", "tiny-gpt2", "--run-dir", str(tmp_path / "run"), "--quiet"]) == 2
    assert f"--run-dir: {tmp_path / 'run' / CHECKPOINT_NAME} is not a file" in capsys.readouterr().err
