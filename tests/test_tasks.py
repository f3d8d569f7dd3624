
import pytest

from interp.data.paper_files import copying_example
from interp.prompts import PromptConfig, build_prompt, build_prompts
from interp.data.tasks import (ALNUM, LETTERS, TASKS, TaskExample, copying_is_ambiguous, generate_example, generate_examples,
                          get_task, parse_tasks)

RETRIEVAL = ["UL", "UR", "NLFirst", "NRFirst", "NLLast", "NRLast"]


def neighbour_by_hand(context, query, task):
    """Independent reference: find the occurrence with str methods, step left or right."""
    positions = [i for i, x in enumerate(context) if x == query]
    chosen = positions[-1] if task.endswith("Last") else positions[0]
    left = task in ("UL", "NLFirst", "NLLast")
    return context[chosen - 1] if left else context[chosen + 1]


def test_hand_worked_retrieval_examples():
    # context "a q b c q d", query q: first occurrence at 1, last at 4
    ctx = tuple("aqbcqd")
    for task, answer in {"NLFirst": "a", "NRFirst": "b", "NLLast": "c", "NRLast": "d"}.items():
        assert neighbour_by_hand(ctx, "q", task) == answer
    assert neighbour_by_hand(tuple("xyqz"), "q", "UL") == "y"
    assert neighbour_by_hand(tuple("xyqz"), "q", "UR") == "z"


@pytest.mark.parametrize("task", RETRIEVAL)
@pytest.mark.parametrize("length", [7, 10, 20, 50])
def test_retrieval_generator_matches_hand_reference(task, length):
    spec = get_task(task)
    for ex in generate_examples(task, length, 200, seed=3):
        assert ex.length == length and len(ex.context) == length - 1
        occurrences = [i for i, x in enumerate(ex.context) if x == ex.query]
        assert occurrences == list(ex.query_positions)
        if spec.unique:
            assert len(occurrences) == 1 and 1 <= occurrences[0] <= length - 3
        else:
            assert 2 <= len(occurrences) <= max(2, (length - 1) // 5)
            assert all(b - a >= 2 for a, b in zip(occurrences, occurrences[1:]))  # non-adjacent
            assert occurrences[0] >= 2 and occurrences[-1] <= length - 3
        assert ex.target == (neighbour_by_hand(ex.context, ex.query, task),)
        assert ex.context[ex.answer_positions[0]] == ex.target[0]


def test_first_and_last_differ_and_ambiguity_flag():
    differ = 0
    for seed in range(50):
        first = generate_example("NRFirst", 30, seed)
        last = generate_example("NRLast", 30, seed)
        assert first.context == last.context  # same seed, same instance; only the question differs
        differ += first.target != last.target
        neighbours = {first.context[p + 1] for p in first.query_positions}
        assert first.ambiguous == (len(neighbours) > 1)
    assert differ > 10


@pytest.mark.parametrize("length", [5, 10, 30, 52])
def test_unique_copying_forward_and_backward(length):
    fwd = generate_examples("UF", length, 20, seed=1)
    bwd = generate_examples("UB", length, 20, seed=1)
    for f, b in zip(fwd, bwd):
        assert len(set(f.context)) == length and f.target == f.context
        assert b.target == tuple(reversed(b.context))
        assert [b.context[i] for i in b.answer_positions] == list(b.target)
        assert not f.ambiguous and not b.ambiguous


def test_nonunique_copying_pool():
    for ex in generate_examples("NB", 30, 20, seed=2):
        pool = set(ex.context)
        assert len(pool) == 10  # max(2, 30 // 3)
        assert all(ex.context.count(x) >= 2 for x in pool)
        assert ex.target == tuple(reversed(ex.context))


def test_hand_worked_copying():
    record = {"input": "CnSjrAHmQt", "UF": "CnSjrAHmQt", "UB": "tQmHArjSnC"}
    assert "".join(copying_example(record, "UB")[0].target) == "tQmHArjSnC"
    assert "".join(copying_example(record, "UF")[0].target) == "CnSjrAHmQt"
    example, follows_rule = copying_example({"input": "abc", "UB": "abc"}, "UB")  # a wrong recorded copy is flagged
    assert not follows_rule and example.target == tuple("cba")
    assert copying_is_ambiguous(list("abac"), "forward")  # a -> b and a -> c
    assert not copying_is_ambiguous(list("abcab"), "forward")
    assert copying_is_ambiguous(list("bacab"), "backward")  # reversed: b a c a b: a -> c and a -> b


def test_determinism_by_seed():
    for task in TASKS:
        a = generate_examples(task, 20, 10, seed=7)
        assert a == generate_examples(task, 20, 10, seed=7)
        assert a != generate_examples(task, 20, 10, seed=8)
    pa = build_prompts(generate_examples("UR", 10, 5, seed=1), PromptConfig(n_shots=3), seed=1)
    pb = build_prompts(generate_examples("UR", 10, 5, seed=1), PromptConfig(n_shots=3), seed=1)
    assert [p.text for p in pa] == [p.text for p in pb]


def test_vocabulary_error_is_clear():
    with pytest.raises(ValueError, match=r"vocabulary of 52 items is too small for UF at length 60"):
        generate_examples("UF", 60, 1, vocabulary=LETTERS)
    with pytest.raises(ValueError, match="too short"):
        generate_examples("NRFirst", 6, 1)
    with pytest.raises(ValueError, match="unknown task 'XX'"):
        get_task("XX")
    assert len(generate_examples("UF", 62, 1, vocabulary=ALNUM)[0].context) == 62


def test_prompt_formats_follow_the_paper():
    ex = TaskExample("UR", tuple("abcd"), ("c",), query="b", query_positions=(1,), answer_positions=(2,))
    demo = TaskExample("UR", tuple("xyz"), ("z",), query="y", query_positions=(1,), answer_positions=(2,))
    p = build_prompt(ex, [demo])
    assert p.text == " x y z | y: z\n\n a b c d | b:" and p.answer_text == " c"
    cp = TaskExample("UB", tuple("abc"), tuple("cba"), answer_positions=(2, 1, 0))
    p = build_prompt(cp, [TaskExample("UB", tuple("xy"), tuple("yx"), answer_positions=(1, 0))])
    assert p.text == "<bos> x y : y x <eos>\n<bos> a b c :" and p.answer_text == " c b a"
    assert parse_tasks("all") == list(TASKS.values())


def test_theory_predictions_match_the_paper():
    expressible = {name for name, spec in TASKS.items() if spec.length_generalizable}
    assert expressible == {"UL", "UR", "NLFirst", "NRFirst", "UF", "UB"}


def test_line_markers_stay_text_for_a_tokenizer_whose_special_tokens_they_name():
    """Gemma's tokenizer has ``<bos>`` / ``<eos>`` as special tokens: the copying lines' literal
    markers must still encode as text (the same ids as for a tokenizer without them), never as BOS."""
    import copy

    from interp.measure.evaluate import task_prompts
    from interp.models import tiny_tokenizer
    from interp.prompts import encode_prompt, prompt_layout

    plain = tiny_tokenizer()
    gemma_like = copy.deepcopy(plain)
    gemma_like.add_special_tokens({"additional_special_tokens": ["<bos>", "<eos>"]})
    marker_ids = set(gemma_like.convert_tokens_to_ids(["<bos>", "<eos>"]))
    prompt = task_prompts(None, "UF", 4, 1, seed=0)[0]
    assert "<bos>" in prompt.text and "<eos>" in prompt.text
    encoded = encode_prompt(gemma_like, prompt, prepend_bos=False)
    assert not marker_ids & set(encoded.prompt_ids)
    assert encoded == encode_prompt(plain, prompt, prepend_bos=False)
    assert prompt_layout(gemma_like, prompt, False) == prompt_layout(plain, prompt, False)
