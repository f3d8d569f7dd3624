import pytest
import torch

from interp.models import load_model


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
