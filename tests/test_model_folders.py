"""Hostile and broken model folders are refused in one line naming the file, before anything is
built when the config alone shows it: missing, unexpected, wrong-shape or non-finite tensors,
impossible or huge dimensions, unreadable configs and tokenizers."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from interp.cli import run
from interp.models import load_hf_model, tiny_hf_model
from interp.models.folder import ModelFolderError
from interp.models.store import CacheDamaged

ROOT = Path(__file__).resolve().parents[1]
TENSOR = "model.layers.1.input_layernorm.weight"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def folder(tmp_path):
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def edit_weights(folder, change):
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    change(tensors)
    save_file(tensors, weights, metadata={"format": "pt"})


def edit_config(folder, **values):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | values))


def refusal(folder) -> str:
    with pytest.raises(ModelFolderError) as refused:
        load_hf_model(str(folder))
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and not isinstance(refused.value, CacheDamaged), message
    return message


def test_a_sound_folder_loads(folder):
    model, _ = load_hf_model(str(folder))
    reference, _ = tiny_hf_model("tiny-llama")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))


def test_a_missing_tensor_is_named(folder):
    edit_weights(folder, lambda t: t.pop(TENSOR))
    assert f"tensors missing (they would be random): {TENSOR}" in refusal(folder)


def test_an_unexpected_tensor_is_named(folder):
    edit_weights(folder, lambda t: t.update({"model.layers.7.smuggled.weight": torch.zeros(3)}))
    assert "no place for: model.layers.7.smuggled.weight" in refusal(folder)


def test_a_wrong_shape_tensor_is_named(folder):
    edit_weights(folder, lambda t: t.update({TENSOR: torch.zeros(3, 3)}))
    assert f"wrong shape: {TENSOR} (3, 3) where the config needs (64,)" in refusal(folder)


def test_nan_weights_in_a_users_folder_are_not_called_cache_damage(folder):
    edit_weights(folder, lambda t: t[TENSOR].fill_(float("nan")))
    message = refusal(folder)
    assert str(folder) in message and f"weight {TENSOR} holds NaN" in message


@pytest.mark.parametrize("values, expected", [
    ({"num_hidden_layers": 0}, "num_hidden_layers=0, expected an integer >= 1"),
    ({"hidden_size": -1}, "hidden_size=-1, expected an integer >= 1"),
    ({"num_attention_heads": "nine"}, "num_attention_heads='nine', expected an integer >= 1"),
])
def test_impossible_dimensions_name_the_config(folder, values, expected):
    edit_config(folder, **values)
    assert f"{folder / 'config.json'}: {expected}" in refusal(folder)


def test_a_garbage_config_is_not_called_unreadable_weights(folder):
    (folder / "config.json").write_text("{not json")
    message = refusal(folder)
    assert f"{folder / 'config.json'} cannot be read as JSON" in message and "weights" not in message


def test_a_huge_config_is_refused_before_anything_is_built(folder):
    edit_config(folder, num_hidden_layers=100_000, hidden_size=100_000, intermediate_size=100_000)
    started = time.perf_counter()
    message = refusal(folder)
    assert time.perf_counter() - started < 5
    assert "GiB for its weights" in message and "allow_large=True" in message


@pytest.mark.parametrize("content", ["garbage, not JSON", '{"version": "1.0", "model": {"type": "Nonsense"}}'])
def test_a_broken_tokenizer_is_named(folder, content):
    (folder / "tokenizer.json").write_text(content)
    message = refusal(folder)
    assert f"{folder}: its tokenizer (" in message and "tokenizer.json" in message


def test_a_script_prints_the_refusal_in_one_line(folder, tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "analyses"))
    import show_heads

    edit_weights(folder, lambda t: t.pop(TENSOR))
    argv = ["--model", str(folder), "--task", "UF", "--heads", "0.0", "--out", str(tmp_path / "view.html")]
    assert run(show_heads.main, argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line and "Loading weights" not in line]
    assert "Traceback" not in err and len(lines) == 1, err  # transformers' progress bar aside
    assert lines[0].startswith(f"error: --model {folder}") and TENSOR in lines[0]


# --------------------------------------------------------------------------- broken LoRA adapters


def saved_adapter(tmp_path) -> Path:
    from interp.models.adapters import LoraSettings, add_lora, save_adapter

    model, _ = tiny_hf_model("tiny-llama")
    peft_model = add_lora(model, LoraSettings(rank=2))
    with torch.no_grad():  # a trained adapter: B no longer zero, so A reaches the weights
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.fill_(0.01)
    return save_adapter(peft_model, tmp_path / "adapter", base_model="tiny-llama")


@pytest.mark.parametrize("damage", ["NaN lora_A", "lora_alpha 1e39"])
def test_a_broken_adapter_is_refused_naming_it(tmp_path, damage):
    from interp.models import load_model

    adapter = saved_adapter(tmp_path)
    if damage == "NaN lora_A":
        weights = adapter / "adapter_model.safetensors"
        tensors = load_file(weights)
        name = next(k for k in tensors if "lora_A" in k)
        tensors[name][0, 0] = float("nan")
        save_file(tensors, weights, metadata={"format": "pt"})
    else:
        config = json.loads((adapter / "adapter_config.json").read_text())
        (adapter / "adapter_config.json").write_text(json.dumps(config | {"lora_alpha": 1e39}))
    with pytest.raises(ValueError, match=rf"adapter {adapter}: merging it makes weight .* NaN or infinite"):
        load_model("tiny-llama", device="cpu", adapter=adapter)


def test_a_sound_adapter_still_merges(tmp_path):
    from interp.models import load_model

    assert load_model("tiny-llama", device="cpu", adapter=saved_adapter(tmp_path)).cfg.n_layers == 2
