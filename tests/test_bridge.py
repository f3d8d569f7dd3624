"""interp.models.bridge, the one package that touches TransformerLens beyond its public API: each private
name it relies on still exists (a TransformerLens upgrade that renames one fails here, loudly),
and the helpers built on them do what they promise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from interp.models import bridge as tl

ROOT = Path(__file__).resolve().parents[1]
PRIVATE_PATTERNS = (r"\._modules\[", r"_weights_processed", r"model_bridge\.sources", r"\breal_components\b",
                    r"postprocess_weights", r"distribute_weights_to_components")


def test_private_transformer_lens_names_still_exist(tiny_llama):
    """Every name of ``PRIVATE_NAMES``: if this fails after an upgrade, adapt interp/models/bridge/."""
    from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
    from transformer_lens.model_bridge.generalized_components.moe import has_batched_experts
    from transformer_lens.weight_processing import ProcessWeights

    checks = {
        "TransformerBridge._weights_processed": isinstance(tiny_llama._weights_processed, bool),
        "TransformerBridge.real_components": {"embed", "blocks", "unembed"} <= set(tiny_llama.real_components),
        "ArchitectureAdapter.postprocess_weights": callable(tiny_llama.adapter.postprocess_weights),
        "ArchitectureAdapter.preprocess_weights": callable(ArchitectureAdapter.preprocess_weights),
        "ProcessWeights.distribute_weights_to_components": callable(ProcessWeights.distribute_weights_to_components),
        "ProcessWeights.process_weights": callable(ProcessWeights.process_weights),
        "moe.has_batched_experts": has_batched_experts(tiny_llama.original_model) is False,
        "the '._original_component' segment of module paths": any(
            "._original_component" in name for name, _ in tiny_llama.named_parameters()),
        "the zero 'bias' buffer UnembeddingBridge adds to a bias-free unembedding": (
            "bias" in dict(tiny_llama.unembed.original_component.named_buffers(recurse=False))
            and not tiny_llama.unembed.original_component.bias.any()),
    }
    assert set(checks) == set(tl.PRIVATE_NAMES)
    assert {name: ok for name, ok in checks.items() if not ok} == {}


def test_only_the_bridge_package_touches_private_names():
    bridge = ROOT / "interp" / "models" / "bridge"
    offenders = []
    for path in (ROOT / "interp").rglob("*.py"):
        if bridge in path.parents:
            continue
        text = path.read_text()
        offenders += [f"{path.relative_to(ROOT)}: {p}" for p in PRIVATE_PATTERNS if re.search(p, text)]
    assert offenders == []


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_gpt2"])
def test_hook_names_exist(fixture, request):
    model = request.getfixturevalue(fixture)
    for name in ("pattern", "z", "q", "k", "v", "attn_scores", "resid_pre"):
        assert tl.act_name(name, 1) in model.hook_dict, name
    keep = tl.is_act("pattern")
    assert keep("blocks.0.attn.hook_pattern") and not keep("blocks.0.attn.hook_z")


def test_run_until_stops_after_the_hook(tiny_llama):
    fired: list[str] = []

    def recorder(name):
        return lambda value, hook: fired.append(name)

    names = [tl.act_name("resid_pre", 0), tl.act_name("pattern", 0), tl.act_name("resid_pre", 1)]
    tl.run_until(tiny_llama, torch.tensor([[3, 4, 5]]), names[1], [(n, recorder(n)) for n in names])
    assert fired == names[:2]  # block 1 never ran
    with pytest.raises(ValueError, match="no hook 'blocks.0.hook_nowhere'"):
        tl.run_until(tiny_llama, torch.tensor([[3, 4, 5]]), "blocks.0.hook_nowhere", [])


@pytest.mark.parametrize("fixture", ["tiny_llama", "tiny_gpt2"])
def test_run_from_layer_reproduces_the_full_pass(fixture, request):
    model = request.getfixturevalue(fixture)
    tokens = torch.tensor([[3, 7, 11, 5, 3, 7]])
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n == tl.act_name("resid_pre", 1))
        final = tl.run_from_layer(model, cache[tl.act_name("resid_pre", 1)], 1)
        replayed = tl.unembed_residual(model, final[0])
    assert torch.allclose(replayed, logits[0], atol=1e-5)
    originals = [block.original_component for block in model.blocks]
    assert all(not isinstance(o, type(None)) and o.__class__.__name__ != "_PassThrough" for o in originals)
    with torch.no_grad():  # the bypass is undone: a plain pass still runs every block
        assert torch.equal(model(tokens), logits)


def test_weights_are_contiguous_after_processing(tiny_gpt2):
    assert tl.weights_processed(tiny_gpt2)
    assert all(p.is_contiguous() for p in tiny_gpt2.parameters())


@pytest.mark.parametrize("layer", [0, 1])
def test_apply_rotary_rotates_queries_and_keys_as_the_model_does(tiny_llama, layer):
    names = [f"blocks.{layer}.attn.hook_{n}" for n in ("q", "k", "rot_q", "rot_k", "cos", "sin")]
    _, cache = tiny_llama.run_with_cache(torch.tensor([[1, 5, 9, 2, 7, 3], [1, 4, 4, 8, 6, 2]]),
                                         names_filter=lambda n: n in names)
    q, k, rot_q, rot_k, cos, sin = (cache[n] for n in names)
    assert torch.allclose(tl.apply_rotary(tiny_llama, q, cos, sin), rot_q, atol=1e-6)
    assert torch.allclose(tl.apply_rotary(tiny_llama, k, cos, sin), rot_k, atol=1e-6)
    assert not torch.allclose(q, rot_q, atol=1e-3)  # the rotation is not the identity here
