import pytest
import torch

from interp.models import load_model


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """Scripts run in-process set the root logger up for themselves (``log_through_tqdm``): give the next test
    the logging it would have had in a fresh interpreter."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):  # pytest's own capture handlers come and go with each phase
        if handler not in handlers and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def tiny_llama():
    torch.manual_seed(0)
    return load_model("tiny-llama", device="cpu")


@pytest.fixture(scope="session")
def tiny_gpt2():
    return load_model("tiny-gpt2", device="cpu")


@pytest.fixture(scope="session")
def embedded():
    """The real SmolLM2-135M (converted from the GGUF into the cache on first use)."""
    return load_model(device="cpu")


def assert_same_bridge(got, expected):
    """Logits, every hook (hook_pattern and hook_z included), state dict and buffers, bit for bit."""
    tokens = torch.tensor([[3, 7, 11, 5, 3, 7, 9]])
    got_logits, got_cache = got.run_with_cache(tokens)
    ref_logits, ref_cache = expected.run_with_cache(tokens)
    assert torch.equal(got_logits, ref_logits)
    assert set(got_cache.keys()) == set(ref_cache.keys())
    assert {"blocks.1.attn.hook_pattern", "blocks.1.attn.hook_z"} <= set(ref_cache.keys())
    for key in ref_cache.keys():
        assert torch.equal(got_cache[key], ref_cache[key]), key
    got_state, ref_state = got.state_dict(), expected.state_dict()
    assert set(got_state) == set(ref_state)
    for key, value in ref_state.items():
        assert got_state[key].dtype == value.dtype and torch.equal(got_state[key], value), key
    got_buffers, ref_buffers = dict(got.original_model.named_buffers()), dict(expected.original_model.named_buffers())
    assert set(got_buffers) == set(ref_buffers)
    assert all(torch.equal(got_buffers[k], ref_buffers[k]) for k in ref_buffers)
    assert not any(t.is_meta for t in [*got.parameters(), *got.buffers()])
