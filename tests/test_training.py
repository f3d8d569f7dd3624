"""Fine-tuning, resume, the memory check, adapters and from-scratch training, on tiny models."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from interp.models.adapters import AdapterNotFoundError, LoraSettings, add_lora, merge_adapter, resolve_adapter, save_adapter
from interp.models import TinyModelConfig, tiny_hf_model
from interp.experiments.from_scratch import PRESETS, scratch_items, scratch_tokenizer, spread, train_one, usable_lengths, verdict
from interp.data.tasks import get_task
from interp.training import (GIB, HFForward, InsufficientMemoryError, TrainConfig, check_memory, collate,
                             estimate_training_memory, train, training_items, training_prompts)
from interp.experiments.finetune import finetune
from interp.models.shape import ModelShape
from interp.data.vocab import single_token_vocabulary


def tiny(name: str = "tiny-gpt2", seed: int = 0):
    return tiny_hf_model(name, TinyModelConfig(n_layers=1, n_heads=2, d_model=32, n_ctx=256, seed=seed))


def small_config(**overrides) -> TrainConfig:
    base = dict(task="UF", train_lengths=(3, 4, 5), id_lengths=(4,), ood_lengths=(8,), steps=6, batch_size=8,
                lr=3e-3, warmup_frac=0.0, n_shots=1, eval_every=3, eval_examples=8, eval_batch_size=8,
                checkpoint_every=2, seed=0)
    return TrainConfig(**(base | overrides))


def test_training_data_is_a_function_of_seed_and_step():
    _, tokenizer = tiny()
    vocab = single_token_vocabulary(tokenizer)
    config = small_config()
    first = training_items(config, 3, tokenizer, vocab, prepend_bos=True)
    assert first == training_items(config, 3, tokenizer, vocab, prepend_bos=True)
    assert first != training_items(config, 4, tokenizer, vocab, prepend_bos=True)
    assert first != training_items(small_config(seed=1), 3, tokenizer, vocab, prepend_bos=True)
    batch = collate(first, pad_id=0, with_positions=False)
    # labels cover exactly the answer items and the end marker of every row
    lengths = [len(ex.target) + 1 for ex in (p.example for p in training_prompts(config, 3, vocab))]
    assert [len(it.ids) - it.answer_start for it in first] == lengths
    assert batch.n_targets == sum(lengths)


def test_finetuning_lowers_the_loss_on_the_task():
    model, tokenizer = tiny()
    result = train(model, tokenizer, small_config(steps=20, eval_every=20, ood_lengths=(), n_shots=0), progress=False)
    first = sum(loss for _, loss in result.losses[:5]) / 5
    last = sum(loss for _, loss in result.losses[-5:]) / 5
    assert last < first - 0.5, (first, last)
    before, after = result.evaluations(0)[0], result.evaluations()[0]
    assert after.step == 20 and after.loss < before.loss


def test_resume_after_a_kill_ends_with_the_same_weights(tmp_path):
    config = small_config()  # dropout is on in tiny-gpt2: the RNG state must be restored too
    model_a, tokenizer = tiny()
    uninterrupted = train(model_a, tokenizer, config, tmp_path / "a", progress=False)

    class Killed(Exception):
        pass

    def kill_at_5(step, loss):
        if step == 5:
            raise Killed

    model_b, _ = tiny()
    with pytest.raises(Killed):
        train(model_b, tokenizer, config, tmp_path / "b", progress=False, on_step=kill_at_5)
    model_c, _ = tiny()  # a fresh process: initial weights again, then the checkpoint of step 4
    resumed = train(model_c, tokenizer, config, tmp_path / "b", progress=False)

    assert resumed.resumed_from == 4 and resumed.final_step == config.steps
    for (name, a), (_, c) in zip(model_a.named_parameters(), model_c.named_parameters()):
        assert torch.equal(a, c), name
    assert resumed.losses == uninterrupted.losses
    assert [r.accuracy for r in resumed.history] == [r.accuracy for r in uninterrupted.history]

    with pytest.raises(ValueError, match="different configuration"):
        train(tiny()[0], tokenizer, small_config(lr=1e-2), tmp_path / "b", progress=False)


def test_gradient_accumulation_equals_the_full_batch():
    weights = []
    for accum in (1, 4):
        model, tokenizer = tiny("tiny-llama")
        train(model, tokenizer, small_config(steps=2, grad_accum=accum, eval_examples=0, checkpoint_every=10),
              progress=False)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(weights[0], weights[1], atol=1e-6)


GPT2_XL = ModelShape(n_layers=48, n_heads=25, d_model=1600, vocab_size=50257, n_params=1_557_611_200)


def test_memory_estimate_refuses_an_impossible_configuration():
    full = estimate_training_memory(GPT2_XL, GPT2_XL.n_params, seq_len=200, micro_batch=8, precision="bf16",
                                    gradient_checkpointing=True)
    assert 23 * GIB < full.weights + full.grads + full.optimizer < 24 * GIB  # 16 bytes a parameter
    with pytest.raises(InsufficientMemoryError, match=r"needs ~2\d\.\d GiB \(weights 5\.8 \+ grads 5\.8 \+ AdamW 11\.6") as err:
        check_memory(full, torch.device("cuda:0"), budget_bytes=16 * GIB, what="gpt2-xl full fine-tuning")
    assert "16.0 GiB" in str(err.value) and "--lora" in str(err.value)
    check_memory(full, torch.device("cuda:0"), budget_bytes=80 * GIB)  # an H100 is enough
    lora = estimate_training_memory(GPT2_XL, 10_000_000, seq_len=200, micro_batch=8, precision="bf16",
                                    gradient_checkpointing=True)
    check_memory(lora, torch.device("cuda:0"), budget_bytes=16 * GIB)


def test_finetune_refuses_gpt2_xl_before_loading_any_weight(tmp_path):
    """A GPT-2 XL checkpoint folder with no weights in it: the plan is refused from the config
    alone (built on the meta device), so the check runs before gigabytes are read."""
    from transformers import GPT2Config

    folder = tmp_path / "gpt2-xl"
    GPT2Config(n_embd=1600, n_layer=48, n_head=25, vocab_size=50257).save_pretrained(folder)
    tiny()[1].save_pretrained(folder)
    config = small_config(precision="bf16", gradient_checkpointing=True)
    with pytest.raises(InsufficientMemoryError, match=r"gpt2-xl full fine-tuning needs ~2\d\.\d GiB \(weights 5\.8"):
        finetune(str(folder), config, run_dir=tmp_path / "run", results_dir=tmp_path, device="cpu",
                 memory_budget_gib=16, progress=False)
    assert not (tmp_path / "run").exists()


def test_lora_adapter_trains_saves_and_merges(tmp_path):
    model, tokenizer = tiny("tiny-llama")
    wrapped = add_lora(model, LoraSettings(rank=4))
    trainable = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    train(wrapped, tokenizer, small_config(steps=3, lr=1e-2, eval_examples=0, checkpoint_every=10), progress=False)
    path = save_adapter(wrapped, tmp_path / "uf", info={"seed": 0}, base_model="tiny-llama")
    tokens = torch.tensor([tokenizer.encode(" a b c : a b")])
    with torch.no_grad():
        expected = wrapped(input_ids=tokens).logits
        fresh, _ = tiny("tiny-llama")
        plain = fresh(input_ids=tokens).logits
        merged = merge_adapter(fresh, path)(input_ids=tokens).logits
    assert not torch.allclose(plain, expected)  # the adapter changed the model ...
    assert torch.allclose(merged, expected, atol=1e-5)  # ... and merging keeps exactly that change
    with pytest.raises(AdapterNotFoundError, match="available there"):
        resolve_adapter("no-such-adapter")


def test_hf_forward_scores_like_the_bridge():
    from interp.measure.evaluate import evaluate_task
    from interp.models import bridge_from_hf

    model, tokenizer = tiny("tiny-llama")
    view = HFForward(model, tokenizer, prepend_bos=True)
    bridge = bridge_from_hf(model, tokenizer, "tiny-llama")
    kwargs = dict(n_examples=6, seed=3, progress=False)
    from interp.prompts import PromptConfig

    config = PromptConfig(n_shots=1, prepend_bos=True)
    a = evaluate_task(view, "UF", 4, prompt_config=config, **kwargs)
    b = evaluate_task(bridge, "UF", 4, prompt_config=config, **kwargs)
    assert a.mean_logprob == pytest.approx(b.mean_logprob, abs=1e-4)


def test_scratch_tokenizer_makes_every_item_and_format_piece_one_token():
    items = scratch_items(150)
    assert len(set(items)) == 150 and items[:3] == ("a", "b", "c")
    tokenizer = scratch_tokenizer(items)
    unk = tokenizer.unk_token_id
    for item in items:
        assert len(tokenizer.encode(" " + item)) == 1
    assert unk not in tokenizer.encode("<bos> a b aa : aa b a <eos>\n a b | a:\n\n")
    assert usable_lengths(get_task("NLLast"), range(1, 10), items)[0] == 7
    assert spread(21, 40, 4) == (21, 27, 34, 40)


def test_from_scratch_quick_run_produces_table_rows():
    config = replace(PRESETS["quick"], steps=8, eval_every=4, eval_examples=4, table_examples=8)
    rows, result = train_one("UL", "absolute", config, progress=False)
    assert {r.split for r in rows} == {"id", "ood"} and result.final_step <= config.steps
    assert all(0.0 <= r.accuracy <= 1.0 and r.expressible for r in rows)
    (summary,) = verdict(rows)
    assert summary.task == "UL" and summary.predicted == "generalizes"
    iid = [r.accuracy for r in rows if r.split == "id"][0]
    ood = min(r.accuracy for r in rows if r.split == "ood")
    assert summary.observed == ("not learned" if iid < 0.9 else "generalizes" if ood >= 0.9 else "fails OOD")
    id_row, ood_row = (next(r for r in rows if r.split == s) for s in ("id", "ood"))
    for id_acc, ood_acc, observed, agrees in ((1.0, 0.2, "fails OOD", False), (1.0, 0.95, "generalizes", True),
                                              (0.5, 1.0, "not learned", None)):
        (case,) = verdict([replace(id_row, accuracy=id_acc), replace(ood_row, accuracy=ood_acc)])
        assert (case.observed, case.agrees) == (observed, agrees)


def test_a_finetune_table_records_the_thread_count_its_trajectory_depends_on(tmp_path):
    from interp.core.tables import read_table_metadata

    threads = torch.get_num_threads()
    out = finetune("tiny-gpt2", small_config(steps=2, eval_examples=2, checkpoint_every=10), run_dir=tmp_path / "run",
                   results_dir=tmp_path, device="cpu", progress=False)
    stem = out.table[0].with_suffix("")
    assert read_table_metadata(stem)["torch_threads"] == threads and out.info["final_step"] == 2
