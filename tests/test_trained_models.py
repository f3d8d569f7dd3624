"""The toolkit's UF / UB models (interp.models.trained): single-shot training data and its loss mask,
name resolution and the missing-weights error, and the single-shot edge-patching format."""

import importlib.util
from pathlib import Path

import pytest
import torch

from interp.interventions.edges import copying_prompts
from interp.experiments.edge_study import EdgeStudyConfig, edge_study
from interp.models import ModelNotFoundError, load_hf_model, load_model, tiny_hf_model, tiny_tokenizer
from interp.models import trained
from interp.experiments.trained_models import finetune_config
from interp.models.trained import TRAINED_MODELS, trained_folder
from interp.training.data import IGNORE_INDEX, collate, training_items
from interp.data.tasks import ALNUM
from interp.data.vocab import single_token_vocabulary

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("task", ["UF", "UB"])
def test_single_shot_items_are_one_line_with_loss_on_the_copy_only(task):
    tok = tiny_tokenizer()
    config = finetune_config(task)
    items = training_items(config, step=1, tokenizer=tok, vocabulary=single_token_vocabulary(tok, ALNUM), prepend_bos=False)
    assert len(items) == config.batch_size
    batch = collate(items, tok.pad_token_id, with_positions=False)
    for row, item in enumerate(items):
        pieces = tok.convert_ids_to_tokens(list(item.ids))
        sep = pieces.index("Ġ:")
        string, copy, end = item.ids[sep - (len(item.ids) - sep - 2): sep], item.ids[sep + 1: -1], item.ids[-1]
        assert "".join(pieces[:sep]).count("<") == 1  # a single line: no demonstration before it
        assert 3 <= len(string) <= 10 and list(copy) == (list(string) if task == "UF" else list(string)[::-1])
        assert end == tok.encode(" <eos>")[0]  # the model must also end the copy
        labelled = (batch.targets[row] != IGNORE_INDEX).nonzero().flatten().tolist()
        # labels sit one position early (logits at t predict t + 1): exactly the copy and its end
        assert labelled == list(range(sep, len(item.ids) - 1))
        assert batch.targets[row, labelled].tolist() == [*copy, end]


def test_missing_weights_name_the_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(trained, "CHECKPOINTS_DIR", tmp_path / "checkpoints")
    for name in TRAINED_MODELS:
        with pytest.raises(ModelNotFoundError, match=rf"{name}.*not built.*make trained-models"):
            load_hf_model(name)
    assert str(tmp_path / "cache") in str(TRAINED_MODELS["smollm2-135m-ft-ub"].folder())


def test_a_built_model_loads_by_name_and_runs_the_analyses(tmp_path, monkeypatch):
    monkeypatch.setattr(trained, "CHECKPOINTS_DIR", tmp_path)
    model, tok = tiny_hf_model("tiny-gpt2")
    model.save_pretrained(tmp_path / "scratch-ub")
    tok.save_pretrained(tmp_path / "scratch-ub")
    assert trained_folder("scratch-ub") == tmp_path / "scratch-ub"
    bridge = load_model("scratch-ub", device="cpu")
    assert bridge.cfg.model_name == "scratch-ub" and bridge.cfg.n_layers == 2
    tokens = torch.tensor([tok.encode(" a b c : c b a")])
    expected = model(tokens).logits.log_softmax(-1)  # compatibility mode centres the logits
    assert torch.allclose(bridge(tokens).log_softmax(-1), expected, atol=1e-4)


@pytest.mark.parametrize("task", ["UF", "UB"])
def test_single_shot_edges_read_the_string_before_its_copy(task):
    tok = tiny_tokenizer()
    length = 5
    prompts = copying_prompts(tok, task, length, 4, fmt="single-shot", prepend_bos=True)
    assert prompts.n_shots == 1 and prompts.tokens[0, 0] == tok.bos_token_id
    copy = prompts.copy_positions()
    assert tok.convert_ids_to_tokens(int(prompts.tokens[0, prompts.copy_start - 1])) == "Ġ:"
    occurrences = prompts.occurrences()
    assert (occurrences < prompts.copy_start - 1).all()  # sources are in the string, before the separator
    # anti-induction edge: the earlier occurrence of the current token
    anti = prompts.anti_induction_edges()
    assert torch.equal(prompts.tokens[:, anti.source[0]], prompts.tokens[:, copy])
    # induction edge: the token after that occurrence, which is the next copy token for UF only
    induction = prompts.induction_edges()
    assert torch.equal(induction.source[0], occurrences + 1)
    after = prompts.tokens[:, induction.source[0][:-1]]
    assert torch.equal(after, prompts.tokens[:, copy[1:]]) == (task == "UF")
    # the same letters as the few-shot format's last shot would not hold: one seeded draw per instance
    assert prompts.strings == copying_prompts(tok, "UF" if task == "UB" else "UB", length, 4, fmt="single-shot").strings


def test_single_shot_study_runs_and_rejects_extra_shots():
    model = load_model("tiny-gpt2", device="cpu")
    with pytest.raises(ValueError, match="single-shot"):
        EdgeStudyConfig(tasks=("UB",), lengths=(3,), n=2, n_shots=11, prompt_format="single-shot")
    config = EdgeStudyConfig(tasks=("UB",), lengths=(3,), n=2, n_shots=1, prompt_format="single-shot")
    rows, _ = edge_study(model, config, progress=False)
    assert [r.condition for r in rows] == ["none", "induction", "anti_induction"]
    assert all(r.format == "single-shot" and r.n_examples == 2 for r in rows)
    assert len({round(r.mean_logprob, 6) for r in rows}) == 3  # each patch changed the copy's log-prob


def test_patch_edges_script_refuses_shots_with_single_shot(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("patch_edges", ROOT / "analyses" / "patch_edges.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--format", "single-shot", "--shots", "3", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "--shots" in capsys.readouterr().err


def test_saved_scratch_tokenizer_starts_with_bos_as_in_training(tmp_path):
    from transformers import AutoTokenizer

    from interp.models import tokenizer_adds_bos
    from interp.experiments.from_scratch import scratch_items, scratch_tokenizer
    from interp.experiments.scratch_models import with_bos

    tok = scratch_tokenizer(scratch_items(62))
    assert not tokenizer_adds_bos(tok)  # training adds BOS itself (prepend_bos=True)
    with_bos(tok).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert tokenizer_adds_bos(loaded)
    assert loaded.encode(" a b", add_special_tokens=False) == tok.encode(" a b", add_special_tokens=False)


@pytest.mark.parametrize("name, task, other", [("scratch-uf", "UF", "UB"), ("scratch-ub", "UB", "UF")])
def test_the_kept_scratch_models_solve_their_task_and_only_it(name, task, other):
    """The checkpoints in checkpoints/ (a few hundred KB, loaded by name) copy in their own direction
    (teacher forced, zero-shot lines as trained) and not in the other."""
    from interp.measure.encoding import encode_for
    from interp.measure.evaluate import task_prompts
    from interp.measure.teacher_forcing import Accuracy, teacher_forced_scores
    from interp.prompts import PromptConfig

    model = load_model(name, device="cpu")
    config = PromptConfig(n_shots=0)

    def accuracy(which: str) -> float:
        encoded = encode_for(model, task_prompts(model, which, 10, 20, 0, config), config)
        return Accuracy.of(teacher_forced_scores(model, encoded, progress=False)).accuracy

    assert accuracy(task) >= 0.95 and accuracy(other) <= 0.05


def test_scratch_ub_copies_backwards_through_the_edges_into_the_answer_position():
    """What edge patching found on the UB model trained from scratch (results/edge_patching_scratch-ub_single-shot):
    removing the (mirrored) induction edges breaks UB, removing the anti-induction edges does not."""
    model = load_model("scratch-ub", device="cpu")
    config = EdgeStudyConfig(tasks=("UB",), lengths=(7,), n=16, prompt_format="single-shot", n_shots=1, sweep_n=0)
    rows, _ = edge_study(model, config, progress=False)
    found = {row.condition: row.accuracy for row in rows}
    assert found["none"] >= 0.95 and found["anti_induction"] >= 0.95 and found["induction"] <= 0.3
