
import pytest
import torch

from conftest import assert_same_bridge

from interp.measure.evaluate import evaluate_prompts, generate_accuracy, task_prompts
from interp.measure.teacher_forcing import AnswerPositions, AnswerScores, answer_rows, gather_positions
from interp.models import ModelNotFoundError, load_model, resolve_device
from interp.prompts import AnswerEnd, EncodedPrompt, PromptConfig
from interp.data.vocab import item_token_ids, single_token_vocabulary


def test_unknown_model_error_names_what_was_looked_for():
    with pytest.raises(ModelNotFoundError, match=r"looked for a local folder.*Available: smollm2-135m, tiny-llama"):
        load_model("no-such/model-anywhere")


def test_device_auto_and_bad_device():
    assert resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device="):
        resolve_device("tpu-9")


def test_tiny_models_are_seeded_and_hooked(tiny_llama, tiny_gpt2):
    again = load_model("tiny-llama", device="cpu")
    tokens = torch.tensor([[1, 5, 9, 3]])
    assert torch.allclose(tiny_llama(tokens), again(tokens))
    for model in (tiny_llama, tiny_gpt2):
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith(("hook_pattern", "hook_z")))
        assert cache["blocks.1.attn.hook_pattern"].shape == (1, model.cfg.n_heads, 4, 4)
        assert cache["blocks.0.attn.hook_z"].shape == (1, 4, model.cfg.n_heads, model.cfg.d_head)


def test_tiny_tokenizer_items_are_single_tokens(tiny_llama):
    assert len(single_token_vocabulary(tiny_llama.tokenizer)) == 62
    with pytest.raises(ValueError, match="not single tokens"):
        item_token_ids(tiny_llama.tokenizer, ["abcdefgh"])


def scores_from_logits(logits, batch):
    """Scores from logits at every position, read at each prompt's answer positions."""
    return AnswerScores.from_rows(answer_rows(gather_positions(logits, AnswerPositions.of(batch).positions), batch))


def test_teacher_forced_exact_match_logic():
    p = EncodedPrompt(prompt_ids=(1, 2, 3), answer_ids=(4, 5), end=AnswerEnd(frozenset({9})))
    logits = torch.zeros(1, 5, 10)
    logits[0, 2, 4] = logits[0, 3, 5] = logits[0, 4, 9] = 1.0  # positions 2,3 predict answer, 4 the end
    assert scores_from_logits(logits, [p]).correct.tolist() == [True]
    logits[0, 4, 9], logits[0, 4, 6] = 0.0, 1.0  # keeps going after a correct copy: not exact
    scores = scores_from_logits(logits, [p])
    assert scores.correct.tolist() == [False] and scores.token_accuracy.tolist() == [1.0]


def test_hooks_pass_through_evaluation(tiny_llama):
    prompts = task_prompts(tiny_llama, "UF", 6, 4, prompt_config=PromptConfig(n_shots=1))
    fired = []
    hook = ("blocks.0.attn.hook_z", lambda z, hook: fired.append(hook.name) or z * 0)
    clean = evaluate_prompts(tiny_llama, prompts, progress=False)
    ablated = evaluate_prompts(tiny_llama, prompts, fwd_hooks=[hook], progress=False)
    assert fired and not torch.allclose(clean.mean_logprob, ablated.mean_logprob)


def test_teacher_forcing_equals_generation_tiny(tiny_llama):
    prompts = task_prompts(tiny_llama, "UR", 8, 6, prompt_config=PromptConfig(n_shots=1))
    tf = evaluate_prompts(tiny_llama, prompts, progress=False)
    gen, hits = generate_accuracy(tiny_llama, prompts, progress=False)
    assert hits == tf.correct.tolist()


@pytest.mark.embedded
def test_embedded_model_knows_paris(embedded):
    ids = torch.tensor([embedded.tokenizer.encode("The capital of France is")])
    assert embedded.tokenizer.decode(embedded(ids)[0, -1].argmax()) == " Paris"
    assert (embedded.cfg.n_layers, embedded.cfg.n_heads) == (30, 9)


@pytest.mark.embedded
def test_teacher_forcing_equals_generation_embedded(embedded):
    """Real examples: greedy string-level generation and teacher forcing agree example by example."""
    prompts = task_prompts(embedded, "UF", 8, 8, seed=5)
    tf = evaluate_prompts(embedded, prompts, progress=False)
    _, hits = generate_accuracy(embedded, prompts, progress=False)
    assert hits == tf.correct.tolist()
    assert 0 < sum(hits)  # the embedded model copies some of these: the check is not vacuous


def test_local_checkpoint_folder_loads_as_bridge(tmp_path):
    from interp.models import tiny_hf_model

    model, tokenizer = tiny_hf_model("tiny-gpt2")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    bridge = load_model(str(tmp_path), device="cpu")
    tokens = torch.tensor([[3, 7, 11, 5]])
    with torch.no_grad():
        expected = model(tokens).logits.log_softmax(-1)
        got = bridge(tokens).log_softmax(-1)  # compatibility mode centres the unembedding: compare log-probs
    assert torch.allclose(got, expected, atol=1e-4)
    assert "blocks.0.attn.hook_z" in bridge.hook_dict


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_processed_weight_cache_gives_the_same_bridge(tmp_path, name):
    """A bridge whose processed weights come from the cache equals one processed from scratch:
    logits, every hook (hook_pattern and hook_z included) and the state dict, bit for bit."""
    from interp.models.bridge import weights_processed
    from interp.models import bridge_from_hf, load_hf_model, processed_weights_file

    fresh = bridge_from_hf(*load_hf_model(name), name, torch.device("cpu"), processed_cache=tmp_path)
    stored = processed_weights_file(tmp_path, torch.float32, torch.device("cpu"))
    assert stored.exists() and weights_processed(fresh)
    model, tokenizer = load_hf_model(name)
    # The stored weights are the processed ones: the unembedding is centred over the vocabulary,
    # the raw one is not.
    vocab = len(tokenizer)
    processed_unembed = fresh.state_dict()["unembed.weight"]
    vocab_dim = list(processed_unembed.shape).index(vocab)
    assert processed_unembed.mean(vocab_dim).abs().max() < 1e-6
    assert model.lm_head.weight.mean(0).abs().max() > 1e-4
    cached = bridge_from_hf(model, tokenizer, name, torch.device("cpu"), processed_cache=tmp_path)
    assert weights_processed(cached)
    # Both paths lay every weight out contiguously, so they run the same kernels (GPT-2's split
    # c_attn is a transposed view after processing, and differed in the last bit before).
    assert all(p.is_contiguous() for p in fresh.parameters()) and all(p.is_contiguous() for p in cached.parameters())
    assert_same_bridge(cached, fresh)


def test_processed_weight_cache_rejects_another_model(tmp_path):
    from interp.models import bridge as tl
    from interp.models import bridge_from_hf, load_hf_model, processed_weights_file
    from interp.models.processed import read_processed_weights

    bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"), processed_cache=tmp_path)
    gpt2_weights = read_processed_weights(processed_weights_file(tmp_path, torch.float32, torch.device("cpu")))
    model, tokenizer = load_hf_model("tiny-llama")
    llama = tl.boot(model, tokenizer, "tiny-llama", torch.device("cpu"))
    tl.enable_compatibility(llama, process_weights=False)
    with pytest.raises(ValueError, match="do not match this model"):
        tl.install_processed_weights(llama, gpt2_weights)


@pytest.mark.embedded
def test_embedded_warm_load_equals_processing_again(embedded):
    """``load_model()`` takes the processed weights from the cache once they exist; the result is
    the bridge that processing the raw weights again gives, on the real model's hooks too."""
    from interp.models import EMBEDDED_MODEL, bridge_from_hf, load_hf_model

    warm = load_model(device="cpu")  # the fixture's load stored the processed weights
    reprocessed = bridge_from_hf(*load_hf_model(EMBEDDED_MODEL), EMBEDDED_MODEL, torch.device("cpu"))
    tokens = torch.tensor([embedded.tokenizer.encode("a b c d a b")])
    names = lambda n: n.endswith(("hook_pattern", "hook_z", "hook_resid_post"))  # noqa: E731
    warm_logits, warm_cache = warm.run_with_cache(tokens, names_filter=names)
    ref_logits, ref_cache = reprocessed.run_with_cache(tokens, names_filter=names)
    assert torch.equal(warm_logits, ref_logits)
    assert {f"blocks.{layer}.attn.{hook}" for layer in range(30) for hook in ("hook_pattern", "hook_z")} \
        <= set(ref_cache.keys())
    assert all(torch.equal(warm_cache[k], ref_cache[k]) for k in ref_cache.keys())
