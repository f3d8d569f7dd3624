"""What counts as a correct answer under each protocol and task family, read two ways: teacher
forcing (token level) and greedy generation (string level, the paper's rule). A scripted model
whose output is known checks each rule; the embedded model and excerpts of the paper's own data
files check that the two readings agree record by record."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from interp.data.paper_files import read_paper_jsonl
from interp.measure.evaluate import evaluate_prompts, generate_accuracy, generate_answers, task_prompts
from interp.prompts import AnswerEnd, AnswerRule, PromptConfig, answer_rule, encode_prompts, prompt_rule

EXCERPTS = Path(__file__).parent / "fixtures" / "paper_excerpts"
UNIQUE_RETRIEVAL = EXCERPTS / "retrieval_unique_sample_1500_len_10_seed_2025.first60.jsonl"
NONUNIQUE_RETRIEVAL = EXCERPTS / "retrieval_nonunique_sample_1500_len_20_seed_20.first32.jsonl"
UNIQUE_COPYING = EXCERPTS / "copying_unique_N1500_L10_seed121.first32.jsonl"


class ScriptedModel(torch.nn.Module):
    """A language model whose greedy output is known: a row that so far equals the start of one
    of ``sequences`` predicts that sequence's next token; anything else predicts EOS."""

    def __init__(self, tokenizer, sequences: list[list[int]]):
        super().__init__()
        self.tokenizer = tokenizer
        self.sequences = sequences
        self.cfg = SimpleNamespace(device="cpu", n_ctx=4096, default_prepend_bos=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, len(self.tokenizer))
        for row, ids in enumerate(tokens.tolist()):
            for t in range(len(ids)):
                following = [s[t + 1] for s in self.sequences if len(s) > t + 1 and s[: t + 1] == ids[: t + 1]]
                logits[row, t, following[0] if following else self.tokenizer.eos_token_id] = 1.0
        return logits


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


# (protocol, family) -> [(answer text is the right one?, what follows the answer, expected exact match)]
CASES = {
    ("interp", "retrieval"): [(True, "\n", True), (True, "\n\n", True), (True, " x", False), (False, "\n", False)],
    ("paper", "retrieval"): [(True, "\n\n", True), (True, " x y", True), (True, "\n", True), (False, "\n", False)],
    ("interp", "copying"): [(True, " <eos>", True), (True, "\n", True), (True, " x", False), (False, " <eos>", False)],
    ("paper", "copying"): [(True, " <eos>", True), (True, "\n\n", True), (True, "\n x", False), (False, " <eos>", False)],
}


@pytest.mark.parametrize("protocol,family", sorted(CASES))
def test_each_protocol_scores_right_answers_right_and_wrong_ones_wrong(tiny_llama, protocol, family):
    """Teacher forcing and string-level generation both give the expected verdict for every
    continuation; under the paper's retrieval rule a right symbol followed by a blank line
    counts (it used to be scored wrong: no end token could ever satisfy an empty end set)."""
    tokenizer = tiny_llama.tokenizer
    config = PromptConfig(n_shots=1) if protocol == "interp" else PromptConfig.paper(n_shots=2)
    task = "UR" if family == "retrieval" else "UF"
    prompt = task_prompts(tiny_llama, task, 6, 1, seed=3, prompt_config=config)[0]
    (encoded,) = encode_prompts(tokenizer, [prompt], prepend_bos=False)
    wrong = " " + " ".join("z" if item != "z" else "y" for item in prompt.example.target)
    for right, suffix, expected in CASES[(protocol, family)]:
        answer = list(encoded.answer_ids) if right else _encode(tokenizer, wrong)
        model = ScriptedModel(tokenizer, [list(encoded.prompt_ids) + answer + _encode(tokenizer, suffix)])
        forced = evaluate_prompts(model, [prompt], config, progress=False).correct.item()
        _, (generated,) = generate_accuracy(model, [prompt], config, progress=False)
        assert (forced, generated) == (expected, expected), (right, suffix)


def test_answer_end_states_when_no_end_is_required():
    assert AnswerEnd.not_required().accepts(12345)
    assert not AnswerEnd(frozenset({1})).accepts(2)
    with pytest.raises(ValueError, match="needs at least one end token"):
        AnswerEnd(frozenset())
    with pytest.raises(ValueError, match="family='copy'"):
        answer_rule("paper", "copy")


@pytest.mark.parametrize("protocol,family,text,target,settled", [
    ("paper", "retrieval", "  ", "t", False), ("paper", "retrieval", " q", "t", True), ("paper", "retrieval", " t", "t", True),
    ("interp", "copying", " a b", "abc", False), ("interp", "copying", " a x", "abc", True),
    ("interp", "copying", " a b c <eo", "abc", False), ("interp", "copying", " a b c\n", "abc", True),
    ("paper", "copying", " a b c\n", "abc", False), ("paper", "copying", " a b c\nx", "abc", True),
])
def test_settled_means_no_continuation_changes_the_verdict(protocol, family, text, target, settled):
    assert AnswerRule(protocol, family).settled(text, target) is settled


def _agreement(model, path: Path, task: str, config: PromptConfig, n: int) -> tuple[list[bool], list[bool], list[str]]:
    data = read_paper_jsonl(path, [task])
    prompts = task_prompts(model, task, data.lengths(task)[0], n, seed=0, prompt_config=config, source=data)
    forced = evaluate_prompts(model, prompts, config, progress=False).correct.tolist()
    texts = generate_answers(model, prompts, config, progress=False)
    generated = [prompt_rule(p).read(t, p.end_text) == p.answer_string for p, t in zip(prompts, texts)]
    return forced, generated, texts


@pytest.mark.embedded
# Records per case: 30 of each retrieval file; 8 of the copying one, whose every record is a full
# copy generated token by token without a KV cache (30 of them cost 1.5 min of the suite's 8).
@pytest.mark.parametrize("protocol,path,task,n", [
    ("interp", UNIQUE_RETRIEVAL, "UR", 30), ("paper", UNIQUE_RETRIEVAL, "UR", 30),
    ("interp", UNIQUE_COPYING, "UF", 8), ("paper", UNIQUE_COPYING, "UF", 8),
    ("paper", NONUNIQUE_RETRIEVAL, "NRFirst", 30),
])
def test_teacher_forcing_agrees_with_the_papers_generation_record_by_record(embedded, protocol, path, task, n):
    """``n`` records of the paper's own files, embedded model: teacher-forced exact match equals
    greedy generation read by the protocol's rule on every record, except where the generation
    reaches the right string through another token split (counted, and each one checked to be
    exactly that)."""
    config = PromptConfig(n_shots=5) if protocol == "interp" else PromptConfig.paper("simple_rule" if task != "UF" else "obey")
    forced, generated, texts = _agreement(embedded, path, task, config, n)
    split = [i for i, (f, g) in enumerate(zip(forced, generated)) if f != g]
    for i in split:  # only another tokenization of the same right answer may disagree
        assert generated[i] and not forced[i], (i, texts[i])
    print(f"{protocol} {task}: teacher forcing {sum(forced)}/{n}, generation {sum(generated)}/{n}, "
          f"{len(split)} records right only through another token split")
    assert len(split) <= 2
    assert any(generated) or task == "NRFirst"  # not vacuous where the model can do the task
