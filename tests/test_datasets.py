"""The paper's data and protocol: its JSONL files (fixtures written in its format) read and
evaluated for every task, items of several tokens, the paper's prompt templates, and the two
styles of non-unique copying strings."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from interp.data.paper_files import Generated, read_paper_jsonl
from interp.measure.evaluate import evaluate_prompts, task_prompts
from interp.prompts import PromptConfig, encode_prompts, prompt_layout
from interp.data.tasks import LETTERS, TASK_NAMES, generate_examples, get_task

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "fixtures" / "paper_data"
FILES = sorted(DATA.glob("*.jsonl"))


def test_every_task_is_read_with_its_length():
    data = read_paper_jsonl(FILES)
    assert data.tasks() == list(TASK_NAMES)
    assert {t: data.lengths(t) for t in ("UL", "NRLast", "UF", "NB")} == {"UL": [6], "NRLast": [7], "UF": [5], "NB": [10]}
    (first,) = data.examples("UL", 6, 1)
    assert (first.context, first.query, first.target, first.answer_positions) == (tuple("Qa7bx"), "a", ("Q",), (0,))
    nb = data.examples("NB", 10)[1]
    assert "".join(nb.target) == "RcHnCbCsjc" and nb.ambiguous
    # the record whose query opens the context has a left neighbour only by wrapping around
    assert data.disagreements[("UL", 6)] == 1 and data.disagreements[("UR", 6)] == 0
    with pytest.raises(ValueError, match="holds no UL records of length 9"):
        data.examples("UL", 9)
    with pytest.raises(ValueError, match="--n 5: the data holds only 4"):
        data.examples("UL", 6, 5)


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input_no_space": "abcb", "UL": "a"}\n{"text": 1}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not a record"):
        read_paper_jsonl(bad)
    with pytest.raises(FileNotFoundError, match="is not a file"):
        read_paper_jsonl(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("task", TASK_NAMES)
def test_records_are_evaluated_exactly_for_every_task(tiny_llama, task):
    data = read_paper_jsonl(FILES)
    (length,) = data.lengths(task)
    records = data.examples(task, length)
    prompts = task_prompts(tiny_llama, task, length, len(records), source=data)
    assert [p.example for p in prompts] == records  # the records themselves, in file order
    scores = evaluate_prompts(tiny_llama, prompts, progress=False)
    assert len(scores) == len(records) and 0.0 <= scores.accuracy <= 1.0
    encoded = encode_prompts(tiny_llama.tokenizer, prompts, prepend_bos=False)
    several = [(p, e) for p, e in zip(prompts, encoded) if any(s in p.answer_string for s in "éß")]
    if several:  # items of several tokens: exact match needs every token, attention reads their first
        prompt, enc = several[0]
        assert len(enc.answer_ids) > len(prompt.example.target)
        layout = prompt_layout(tiny_llama.tokenizer, prompt, prepend_bos=False, encoded=enc)
        for (predicting, source), start, item in zip(layout.source_pairs(), enc.answer_item_starts, prompt.example.target):
            assert predicting == enc.answer_start - 1 + start
            text = tiny_llama.tokenizer.decode([layout.ids[source]])
            assert text.strip() == item or (item in "éß" and text.strip() in ("", "\ufffd"))


def test_layout_finds_each_item_at_its_first_own_token(tiny_llama):
    """'é' is three byte tokens for the tiny tokenizer: the item sits at the first of them."""
    data = read_paper_jsonl(DATA / "retrieval_unique_len6.jsonl")
    prompt = task_prompts(tiny_llama, "UR", 6, 3, source=data)[2]
    layout = prompt_layout(tiny_llama.tokenizer, prompt, prepend_bos=False)
    tokens = [tiny_llama.tokenizer.decode([i]) for i in layout.ids]
    assert [tokens[p].strip() for p in layout.context_positions[1:]] == list("xyzw")
    assert tiny_llama.tokenizer.decode(list(layout.ids[layout.context_positions[0]:layout.context_positions[1]])) == "é"
    assert tiny_llama.tokenizer.decode([layout.ids[layout.context_positions[0] - 1]]) == " "  # its space is a token of its own


def test_paper_retrieval_prompt_is_the_papers_text(tiny_llama):
    data = read_paper_jsonl(DATA / "retrieval_nonunique_len7.jsonl")
    config = PromptConfig.paper("simple_rule_explained")
    prompt = task_prompts(tiny_llama, "NRLast", 7, 1, source=data, prompt_config=config)[0]
    head, *lines = prompt.text.split("\n\n")
    assert head.startswith("Each line is written as context|query: target. The vertical bar | marks the query token.\n"
                           "All strings below follow this rule:\nWhen the query appears multiple times, the answer is "
                           "the token just to the right of its last appearance.")
    explanation = next(line for line in lines if line.startswith("Worked example"))
    assert "• it occurs 0 time(s) in the context" in explanation  # the paper's count, quirk included
    demos = [line for line in lines if line.endswith(tuple("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
             and "|" in line and not line.startswith(("Worked", "•"))]
    assert len(demos) == 5 - 1  # five drawn, the first explains the rule
    assert prompt.text.endswith(" u E 5 L 5 A | 5:") and prompt.answer_text == " A"
    math = PromptConfig.paper("math_rule")
    text = task_prompts(tiny_llama, "UL", 6, 1, source=read_paper_jsonl(FILES), prompt_config=math)[0].text
    assert text.startswith(r"Let $X = x_1 \ldots x_n$") and r"$q$.\n" + '"\n        r"In the context $x_1 \\ldots x_{n-1}$' in text


def test_paper_protocol_ends_and_bos(tiny_llama):
    from interp.measure.encoding import resolve_prepend_bos

    config = PromptConfig.paper("obey")
    prompt = task_prompts(tiny_llama, "UF", 5, 1, prompt_config=config)[0]
    assert prompt.text.startswith("Here are some samples of the format <bos> input : output <eos> where the rule being "
                                  "followed is - The output is exactly the same sequence as the input.\n\n<bos> ")
    assert resolve_prepend_bos(tiny_llama, config) is False
    tokenizer = tiny_llama.tokenizer
    (paper,) = encode_prompts(tokenizer, [prompt], False)
    (ours,) = encode_prompts(tokenizer, task_prompts(tiny_llama, "UF", 5, 1), False)
    newline = tokenizer.encode("\n", add_special_tokens=False)[0]
    assert ours.end.accepts(newline) and not paper.end.accepts(newline)  # a copy followed by one newline fails the paper
    retrieval = encode_prompts(tokenizer, task_prompts(tiny_llama, "UR", 6, 1, prompt_config=PromptConfig.paper()), False)[0]
    assert not retrieval.end.required and retrieval.end.accepts(newline)  # the paper reads the answer's first symbol only
    with pytest.raises(ValueError, match="not a template of the 'paper' protocol"):
        PromptConfig(protocol="paper", template="xyz")
    with pytest.raises(ValueError, match="does not apply to retrieval tasks"):
        PromptConfig.paper("hint").template_for("retrieval")


def test_nonunique_copying_styles():
    """'pool' repeats few items many times; 'sparse' is mostly distinct, like the paper's files at 10 and 20."""
    pool = generate_examples("NF", 10, 200, seed=1)
    sparse = generate_examples("NF", 10, 200, seed=1, repeats="sparse")
    assert all(len(set(ex.context)) == 3 for ex in pool)  # max(2, 10 // 3) items
    distinct = Counter(len(set(ex.context)) for ex in sparse)
    assert max(distinct) == 9 and distinct[9] / 200 > 0.6 and all(k < 10 for k in distinct)
    assert Generated(repeats="sparse").examples("NF", 10, 200, 1) == generate_examples("NF", 10, 200, 1, LETTERS, "sparse")
    with pytest.raises(ValueError, match="repeats='dense'"):
        generate_examples("NF", 10, 2, repeats="dense")


def test_directional_bias_script_on_the_papers_files(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "analyses"))
    import directional_bias

    argv = ["--model", "tiny-llama", "--device", "cpu", "--quiet", "--out", str(tmp_path), "--n", "2", "--tasks", "UL,UR",
            "--protocol", "paper", "--shots", "2"]
    for path in FILES:
        argv += ["--data", str(path)]
    assert directional_bias.main(argv) == 0
    printed = capsys.readouterr().out
    from interp.core.tables import read_csv

    rows = read_csv(tmp_path / "directional_bias_tiny-llama.csv")
    assert {(r["task"], r["length"]) for r in rows} == {("UL", 6), ("UR", 6)}
    assert sorted({r["template"] for r in rows}) == sorted(PromptConfig.paper().templates_for("retrieval"))
    assert (tmp_path / "directional_templates_tiny-llama.csv").exists() and "template_sd" in printed
    assert get_task("UL").family == "retrieval"
