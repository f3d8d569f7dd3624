"""C-RASP[pos] interpreter: primitives on hand-worked sequences, programs against the generators."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from interp import crasp
from interp.crasp import (AMBIGUOUS, NONE, PREVIOUS, PROGRAMS, STOP, Distance, Symbols, Vocabulary, buckets, count,
                          decode_argmax, decode_next, encode, encode_batch, initial, lookup, symbols)
from interp.data.tasks import ALNUM, TASKS, TaskExample, generate_examples
from interp.experiments.theory_table import disagreements, theory_rows, vocabulary_for

ROOT = Path(__file__).resolve().parents[1]

# <bos> a b a <sep> a  ->  ids 0 2 3 2 1 2
AB = Vocabulary(("a", "b"))
A, B_ = AB.id("a"), AB.id("b")
SEQ = torch.tensor([[0, A, B_, A, 1, A]])


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tensors here are small: one thread avoids oversubscribing a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def row(x: torch.Tensor) -> list:
    return x[0].tolist()


# --------------------------------------------------------------------------- primitives

def test_initial_and_prefix_count():
    assert row(initial(SEQ, A)) == [False, True, False, True, False, True]
    assert row(count(initial(SEQ, A))) == [0, 1, 1, 2, 2, 3]
    assert row(count(crasp.true(SEQ))) == [1, 2, 3, 4, 5, 6]


def test_count_with_positional_relations():
    qa = initial(SEQ, A)
    assert row(count(qa, PREVIOUS)) == [0, 0, 1, 0, 1, 0]  # "a at i - 1"
    assert row(count(qa, Distance((0, 2)))) == [0, 1, 0, 2, 0, 2]  # a at i, plus a at i - 2
    assert row(crasp.exists(qa, Distance((2,)))) == [False, False, False, True, False, True]


def test_periodic_positions_are_one_based():
    assert row(crasp.periodic(SEQ, 2, {0})) == [False, True, False, True, False, True]
    assert row(crasp.periodic(SEQ, 3, {1})) == [True, False, False, True, False, False]


def test_boolean_comparison_and_conditional():
    qa, qb = initial(SEQ, A), initial(SEQ, B_)
    assert row(crasp.disj(qa, qb)) == [False, True, True, True, False, True]
    assert row(crasp.conj(qa, crasp.negate(crasp.eq(count(qa), 1)))) == [False, False, False, True, False, True]
    assert row(crasp.le(count(qb), count(qa))) == [True, True, True, True, True, True]
    assert row(crasp.ge(count(qb), crasp.one(SEQ))) == [False, False, True, True, True, True]
    assert row(crasp.conditional(qa, count(qa), count(qb) - 1)) == [-1, 1, 0, 2, 0, 3]


def test_symbols_family_operations():
    q = symbols(SEQ, AB)
    assert row(q.previous().ids) == [NONE, 0, A, B_, A, 1]
    assert row(q.where(initial(SEQ, A)).ids) == [NONE, A, NONE, A, NONE, A]
    assert row(q.previous().holds(A)) == [False, False, True, False, True, False]
    each = q.count_each()
    assert each.shape == (1, 6, 4)
    assert each[0, :, A].tolist() == [0, 1, 1, 2, 2, 3] and each[0, -1].tolist() == [1, 1, 3, 1]
    pair = q.pair(buckets(count(initial(SEQ, A)), 2))  # (symbol, #a so far) numbered symbol * 3 + count
    assert pair.size == 12 and row(pair.ids) == [0, A * 3 + 1, B_ * 3 + 1, A * 3 + 2, 1 * 3 + 2, NONE]
    assert q.one_hot()[0, 2].tolist() == [False, False, False, True]


def test_buckets_spell_out_a_bounded_count():
    c = torch.tensor([[0, 1, 1, 2, 2, 3]])
    assert row(buckets(c, 2).ids) == [0, 1, 1, 2, 2, NONE]
    assert row(buckets(c - 1, 2).ids) == [NONE, 0, 0, 1, 1, 2]


def test_lookup_by_hand():
    q = symbols(SEQ, AB)
    assert row(lookup(q, q)) == [1, 1, 1, 2, 1, 3]  # which occurrence of its own symbol
    # successors of the symbol at i: a is followed by b (j=2) and by <sep> (j=4), visible from i=3 and i=5
    succ = lookup(query=q, key=q.previous(), value=q)
    assert succ[0].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0], [0, 1, 0, 1]]
    assert row(decode_next(succ >= 1)) == [STOP, STOP, STOP, B_, STOP, AMBIGUOUS]


def test_decoders():
    nxt = torch.tensor([[[False, False], [False, True], [True, True]]])
    assert row(decode_next(nxt)) == [STOP, 1, AMBIGUOUS]
    assert row(decode_argmax(torch.tensor([[[0, 0], [1, 2], [2, 2]]]))) == [STOP, 1, AMBIGUOUS]


def test_encoding():
    vocab = Vocabulary(("x", "y", "z"))
    ur = TaskExample("UR", ("x", "y", "z"), ("z",), query="y", query_positions=(1,), answer_positions=(2,))
    assert encode(ur, vocab) == [0, 2, 3, 4, 1, 3]
    ub = TaskExample("UB", ("x", "y"), ("y", "x"))
    assert encode(ub, vocab) == [0, 2, 3, 1]
    assert encode(ub, vocab, with_target=True) == [0, 2, 3, 1, 3, 2, 1]
    assert Vocabulary.covering([ur, ub]).items == ("x", "y", "z")


@pytest.mark.parametrize("make", [
    lambda: Distance((-1,)),
    lambda: Distance(()),
    lambda: crasp.periodic(SEQ, 0, {0}),
    lambda: crasp.periodic(SEQ, 2, {2}),
    lambda: buckets(SEQ, -1),
    lambda: lookup(symbols(SEQ, AB), buckets(SEQ, 1)),
    lambda: symbols(torch.tensor([[0, 9]]), AB),
    lambda: Symbols(torch.tensor([[5]]), 2),
    lambda: Vocabulary(("a", "a")),
    lambda: Vocabulary(("a", "<sep>")),
    lambda: encode(TaskExample("UF", ("q",), ("q",)), AB),
    lambda: encode_batch([TaskExample("UF", ("a",), ("a",)), TaskExample("UF", ("a", "b"), ("a", "b"))], AB),
    lambda: crasp.exact_match(PROGRAMS["UF"], [TaskExample("UF", ("a",), ("a",)), TaskExample("UB", ("a",), ("a",))]),
    lambda: crasp.exact_match(PROGRAMS["UF"], [TaskExample("UF", ("a",), ("a",))], mode="greedy"),
    lambda: crasp.program_for("NF"),
    lambda: crasp.bounded_program("UF", 3),
    lambda: crasp.not_expressible_reason("UR"),
])
def test_bad_input_raises_value_error(make):
    with pytest.raises(ValueError):
        make()


# --------------------------------------------------------------------------- programs by hand

def test_retrieval_programs_by_hand():
    vocab = Vocabulary(tuple("wxyzq"))
    # <bos> w q x y <sep> q : UR -> x, UL -> w
    tokens = torch.tensor([[0] + [vocab.id(c) for c in "wqxy"] + [1, vocab.id("q")]])
    assert vocab.symbol(int(crasp.run_program(PROGRAMS["UR"], tokens, vocab)[0, -1])) == "x"
    assert vocab.symbol(int(crasp.run_program(PROGRAMS["UL"], tokens, vocab)[0, -1])) == "w"
    # <bos> w q x q y z <sep> q : first occurrence at 1 -> NRFirst x, NLFirst w
    tokens = torch.tensor([[0] + [vocab.id(c) for c in "wqxqyz"] + [1, vocab.id("q")]])
    assert vocab.symbol(int(crasp.run_program(PROGRAMS["NRFirst"], tokens, vocab)[0, -1])) == "x"
    assert vocab.symbol(int(crasp.run_program(PROGRAMS["NLFirst"], tokens, vocab)[0, -1])) == "w"
    # the bounded last-occurrence programs find the second occurrence
    assert vocab.symbol(int(crasp.run_program(crasp.bounded_program("NRLast", 2), tokens, vocab)[0, -1])) == "y"
    assert vocab.symbol(int(crasp.run_program(crasp.bounded_program("NLLast", 2), tokens, vocab)[0, -1])) == "x"


@pytest.mark.parametrize("task,expected", [("UF", "cab"), ("UB", "bac")])
def test_copy_generation_by_hand(task, expected):
    vocab = Vocabulary(tuple("abc"))
    example = TaskExample(task, tuple("cab"), tuple(expected))
    [emitted] = crasp.generate(PROGRAMS[task], [example], vocab)
    assert [vocab.symbol(t) for t in emitted] == list(expected) + ["<sep>", "<stop>"]


# --------------------------------------------------------------------------- programs vs generators

def _mismatches(program, examples, mode="teacher-forced"):
    hits = crasp.exact_match(program, examples, Vocabulary(vocabulary_for(examples[0].task, examples[0].length)),
                             mode)
    return [ex for ex, ok in zip(examples, hits) if not ok]


RETRIEVAL_LENGTHS = {"UL": (4, 10, 37, 150, 320), "UR": (4, 10, 37, 150, 320),
                     "NLFirst": (7, 12, 41, 150, 320), "NRFirst": (7, 12, 41, 150, 320)}


@pytest.mark.parametrize("task", list(RETRIEVAL_LENGTHS))
def test_retrieval_program_matches_generator(task):
    for length in RETRIEVAL_LENGTHS[task]:
        examples = generate_examples(task, length, 200, seed=length, vocabulary=vocabulary_for(task, length))
        bad = _mismatches(PROGRAMS[task], examples)
        assert not bad, f"{task} at {length}: {len(bad)} mismatches, e.g. {bad[0]}"


@pytest.mark.parametrize("task", ["UF", "UB"])
def test_copy_program_matches_generator_teacher_forced(task):
    for length in (1, 2, 9, 53, 130, 260):
        examples = generate_examples(task, length, 60, seed=length, vocabulary=vocabulary_for(task, length))
        bad = _mismatches(PROGRAMS[task], examples)
        assert not bad, f"{task} at {length}: {len(bad)} mismatches, e.g. {bad[0]}"


@pytest.mark.parametrize("task", ["UF", "UB"])
def test_copy_program_generates_the_target_autoregressively(task):
    for length in (1, 6, 24, 70):
        items = vocabulary_for(task, length)
        examples = generate_examples(task, length, 20, seed=7, vocabulary=items)
        vocab = Vocabulary(items)
        for example, emitted in zip(examples, crasp.generate(PROGRAMS[task], examples, vocab)):
            assert tuple(vocab.symbol(t) for t in emitted) == example.target + ("<sep>", "<stop>")


def test_autoregressive_and_teacher_forced_agree_on_failures_too():
    """Causality makes the two modes agree example by example, also where a program fails."""
    program = crasp.bounded_program("NB", 8)
    for length in (6, 12):
        examples = generate_examples("NB", length, 20, seed=3)
        vocab = Vocabulary(ALNUM)
        tf = crasp.exact_match(program, examples, vocab, "teacher-forced")
        ar = crasp.exact_match(program, examples, vocab, "autoregressive")
        assert tf == ar
        assert all(tf) == (length <= 8)
    examples = generate_examples("UR", 20, 30, seed=1)
    assert crasp.exact_match(PROGRAMS["UR"], examples, mode="autoregressive") == [True] * 30


@pytest.mark.parametrize("task,bound,within,beyond", [
    ("NLLast", 3, 16, 80), ("NRLast", 3, 16, 80), ("NF", 10, 10, 20), ("NB", 10, 10, 20),
])
def test_bounded_programs_are_exact_only_up_to_their_bound(task, bound, within, beyond):
    assert crasp.bound_needed(task, within) <= bound < crasp.bound_needed(task, beyond)
    program = crasp.bounded_program(task, bound)
    assert not program.length_independent
    assert not _mismatches(program, generate_examples(task, within, 60, seed=2))
    assert len(_mismatches(program, generate_examples(task, beyond, 60, seed=2))) > 10


def test_non_unique_tasks_defeat_the_unique_programs():
    """The induction program for UF copies non-unique strings wrongly: the successor is ambiguous."""
    examples = generate_examples("NF", 30, 30, seed=0)
    assert crasp.accuracy(PROGRAMS["UF"], examples) < 0.2


# --------------------------------------------------------------------------- registry and table

def test_registry_follows_the_theory_table():
    assert set(PROGRAMS) == {name for name, spec in TASKS.items() if spec.expressible}
    assert set(crasp.PAPER_LEMMA) == set(TASKS)
    for name, spec in TASKS.items():
        if spec.expressible:
            assert PROGRAMS[name].length_independent and PROGRAMS[name].summary
        else:
            with pytest.raises(ValueError, match="not expressible"):
                crasp.program_for(name)
            reason = crasp.not_expressible_reason(name)
            assert ("later occurrence" in reason) if spec.occurrence == "last" else ("alignment" in reason)
    with pytest.raises(ValueError, match="is expressible"):
        crasp.not_expressible_reason("UF")


def test_theory_rows_agree_with_the_paper():
    rows = theory_rows(lengths=(10, 30), n=12, seed=0, train_length=10)
    assert [r.task for r in rows] == list(TASKS)
    assert all(r.agrees for r in rows), disagreements(rows)
    for r in rows:
        if r.expressible:
            assert r.accuracy_at(10) == r.accuracy_at(30) == 1.0
        else:
            assert r.accuracy_at(10) == 1.0 and r.accuracy_at(30) < 1.0
    assert not disagreements(rows)


def test_theory_table_script_writes_its_tables(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("theory_table_script", ROOT / "analyses" / "theory_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--lengths", "8,20", "--n", "5", "--train-length", "8", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "| task |" in printed and "all rows agree" in printed
    for suffix in ("csv", "json", "md"):
        assert (tmp_path / f"theory_table.{suffix}").exists()
