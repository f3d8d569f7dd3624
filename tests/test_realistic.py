"""Realistic tasks: Lorem Ipsum copying analysis and git commit-history prompts."""

from __future__ import annotations

import json
import random

import pytest

from interp.prompts import AnswerEnd, EncodedPrompt
from interp.experiments.realistic.alignment import (ambiguous_positions, base_rate, departure_from_predictions, edit_transitions,
                                        needleman_wunsch, successors, transition_index)
from interp.experiments.realistic.common import (TextPrompt, encode_text_prompt, greedy_answers, split_is_natural,
                                     teacher_forced_scores)
from interp.experiments.realistic.git_history import (GIT_ACTIONS, GIT_TOPICS, GitConfig, History, answer_text, evaluate_git,
                                          expected_lines, git_examples, git_prompt, lines_match, parse_answer_lines,
                                          random_history, run_git, write_git_table, GitRow)
from interp.experiments.realistic.lorem import analyse_copy, echo_prompt, run_lorem, summarize_copies, write_lorem_tables
from interp.experiments.realistic.lorem_text import (ECHO_DEMOS, LoremConfig, lorem_paragraph, lorem_paragraphs,
                                                     scramble_round, truncate)
from interp.experiments.realistic.lorem_words import LOREM_WORDS

# --------------------------------------------------------------------------- ambiguity and transitions

SOURCE = "a b c a d".split()  # a -> {b, d}; b -> {c}; c -> {a}; d -> {end}


def test_successors_include_the_end_of_the_source():
    following = successors(SOURCE)
    assert following["a"] == {"b", "d"}
    assert following["c"] == {"a"}
    assert len(following["d"]) == 1 and "d" not in following["d"]  # only the end follows d


def test_ambiguous_positions_hand_made():
    # position t is ambiguous when SOURCE[t-1] has several successors; position 0 never is
    assert ambiguous_positions(SOURCE) == [False, True, False, False, True, False]
    assert base_rate(SOURCE) == pytest.approx(2 / 6)


def test_last_token_is_ambiguous_when_it_also_occurs_inside():
    # "b" is followed by "c" inside and by the end at the end: where the copy should stop is ambiguous
    assert ambiguous_positions("a b c b".split()) == [False, False, True, False, True]


def test_a_repeat_with_the_same_successor_is_not_ambiguous():
    # x occurs twice, always followed by y: the positions after x are not ambiguous (y's are)
    assert ambiguous_positions("x y x y z".split()) == [False, False, True, False, True, False]
    assert not any(ambiguous_positions("p q r s".split()))


@pytest.mark.parametrize("copy, expected", [
    ("a b c a d", None),            # exact copy
    ("a b c a b c a d", 4),          # loops back after the ambiguous "a" (the induction error)
    ("a b x a d", 2),                # substitution
    ("a b c", 3),                    # stops early: departs where "a" was due
    ("a b c a d d", 5),              # does not stop: departs at the end position
    ("", 0),
    ("q b c a d", 0),
])
def test_transition_index_hand_made(copy, expected):
    assert transition_index(SOURCE, copy.split()) == expected


def test_transition_at_the_classic_induction_error_is_ambiguous():
    copy = "a b c a b c a d".split()
    t = transition_index(SOURCE, copy)
    assert ambiguous_positions(SOURCE)[t] is True


def test_departure_from_predictions_matches_transition_index():
    reference = [5, 6, 7, 5, 8]
    end = AnswerEnd(frozenset({99}))
    assert departure_from_predictions(reference, [5, 6, 7, 5, 8, 99], end) is None
    assert departure_from_predictions(reference, [5, 6, 7, 5, 6, 99], end) == 4
    assert departure_from_predictions(reference, [5, 6, 7, 5, 8, 5], end) == 5   # does not stop
    assert departure_from_predictions(reference, [9, 6, 7, 5, 8, 99], end) == 0
    with pytest.raises(ValueError, match="predictions"):
        departure_from_predictions(reference, [5, 6], end)


def test_needleman_wunsch_alignments():
    ops = needleman_wunsch("abc", "axc")
    assert [o.op for o in ops] == ["match", "substitute", "match"]
    ops = needleman_wunsch("abcd", "abd")
    assert [(o.op, o.ref, o.hyp) for o in ops] == [("match", 0, 0), ("match", 1, 1), ("delete", 2, None), ("match", 3, 2)]
    ops = needleman_wunsch("ab", "abzz")
    assert [o.op for o in ops] == ["match", "match", "insert", "insert"]
    assert needleman_wunsch("", "") == []


def test_edit_transitions_group_cascades_and_use_positions():
    # one cascade of edits (substitution followed by insertion) counts once, at its start
    assert edit_transitions(SOURCE, "a b x y a d".split()) == [2]
    # a copy that loops: extra "b c a" inserted after position 4
    assert edit_transitions(SOURCE, "a b c a b c a d".split()) == [4]
    assert edit_transitions(SOURCE, SOURCE) == []
    assert edit_transitions(SOURCE, "a b c a d d".split()) == [5]       # failed to stop
    assert edit_transitions(SOURCE, "z b c a d".split()) == [0]         # wrong from the start
    assert edit_transitions(SOURCE, "a x c a y".split()) == [1, 4]


def test_analyse_copy_classifies_each_kind_of_departure():
    reference = [5, 6, 7, 5, 8]      # positions 1 and 4 are ambiguous (token 5 precedes 6 and 8)
    end = AnswerEnd(frozenset({99}))
    decode = lambda ids: "".join(f"<{i}>" for i in ids)
    # wrong at 0, at 4 and fails to stop; right elsewhere
    result = analyse_copy(0, reference, [1, 6, 7, 5, 6, 3], end, decode)
    assert (result.transition_index, result.at_ambiguous, result.exact) == (0, False, False)
    assert (result.primed_transition_index, result.primed_at_ambiguous) == (4, True)
    assert (result.n_tf_departures, result.n_tf_departures_ambiguous) == (3, 1)
    assert result.n_ambiguous_positions == 2 and result.base_rate == pytest.approx(2 / 6)
    assert result.tf_accuracy_ambiguous == pytest.approx(1 / 2)
    assert result.tf_accuracy_unambiguous == pytest.approx(2 / 4)
    assert result.expected == repr("<5>") and result.produced == repr("<1>") and result.last_copied == "'<start>'"
    exact = analyse_copy(1, reference, [5, 6, 7, 5, 8, 99], end, decode, generated=reference)
    assert exact.exact and exact.transition_index is None and exact.n_edits == 0
    looped = analyse_copy(2, reference, [5, 6, 7, 5, 6, 99], end, decode, generated=[5, 6, 7, 5, 6, 7, 5, 8])
    assert (looped.transition_index, looped.at_ambiguous, looped.last_copied) == (4, True, repr("<5>"))
    assert looped.generated_transition_index == 4 and looped.n_edits_ambiguous == looped.n_edits == 1

    summary = summarize_copies([result, exact, looped], LoremConfig(n_paragraphs=3), "hand")
    assert summary.accuracy == pytest.approx(1 / 3)
    assert summary.n_departures == 2 and summary.share_departures_ambiguous == pytest.approx(1 / 2)
    assert summary.base_rate == pytest.approx(6 / 18)
    assert summary.n_tf_departures == 4 and summary.share_tf_departures_ambiguous == pytest.approx(2 / 4)
    assert summary.n_edits == 1 and summary.share_edits_ambiguous == 1.0


# --------------------------------------------------------------------------- lorem paragraphs


def test_lorem_word_list_is_the_packages_own():
    assert len(LOREM_WORDS) == len(set(LOREM_WORDS)) == 27
    assert "etincidunt" in LOREM_WORDS and "quiquia" in LOREM_WORDS
    lorem_data = pytest.importorskip("lorem.data")
    assert tuple(lorem_data.WORDS) == LOREM_WORDS


def test_lorem_paragraphs_are_seeded_and_prefix_stable():
    config = LoremConfig(n_paragraphs=4, max_tokens=60)
    first = lorem_paragraphs(config)
    assert first == lorem_paragraphs(config)
    assert lorem_paragraphs(LoremConfig(n_paragraphs=2, max_tokens=60)) == first[:2]
    assert lorem_paragraphs(LoremConfig(n_paragraphs=4, max_tokens=60, seed=1)) != first
    assert len(set(first)) == 4
    for text in first:
        words = text.replace(".", "").split()
        assert len(words) == 60  # without a tokenizer the budget counts words
        assert {w.lower() for w in words} <= set(LOREM_WORDS)
        assert text[0].isupper()


def test_scramble_round_repeats_sentences_and_words():
    config = LoremConfig(duplicate_sentence_prob=1.0, duplicate_word_prob=1.0, shuffle_words_prob=1.0)
    sentences = [("Alpha", "beta", "gamma"), ("Delta", "epsilon"), ("Zeta", "eta", "theta")]
    out = scramble_round(sentences, random.Random(0), config)
    assert len(out) == len(sentences) + config.duplicate_count
    assert any(out.count(s) > config.duplicate_count for s in set(out))
    assert any(len(s) >= 1 + config.duplicate_count and len(set(s[-config.duplicate_count:])) == 1 for s in out)
    assert all(s[0][0].isupper() for s in out)  # capitalised first words stay first


def test_truncate_keeps_whole_words_within_budget():
    text = "one two three four five"
    count = lambda t: 2 * len(t.split())
    assert truncate(text, count, 6) == "one two three"
    assert truncate(text, count, 100) == text
    assert truncate(text, count, 1) == "one"  # at least one word


def test_lorem_config_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_shots"):
        LoremConfig(n_shots=3)
    with pytest.raises(ValueError, match="min_sentences"):
        LoremConfig(duplicate_sentence_prob=0.0)
    with pytest.raises(ValueError, match="sentence_words"):
        LoremConfig(sentence_words=(5, 2))
    with pytest.raises(ValueError, match="max_tokens"):
        LoremConfig(max_tokens=0)


def test_echo_prompt_is_the_papers():
    prompt = echo_prompt("Dolor sit amet.")
    assert prompt.text.startswith("# RULE : Paragraphs are repeated **exactly** as is, whenever an Echo is seen.\n\n")
    for demo in ECHO_DEMOS:
        assert f"Paragraph:\n<start> {demo} <end>\nEcho:\n<start> {demo} <end>" in prompt.text
    assert prompt.text.endswith("Paragraph:\n<start> Dolor sit amet. <end>\nEcho:\n<start>")
    assert (prompt.answer_text, prompt.end_text) == (" Dolor sit amet.", " <end>")
    assert echo_prompt("x", n_shots=0, rule=False).text == "Paragraph:\n<start> x <end>\nEcho:\n<start>"


# --------------------------------------------------------------------------- git histories

HAND_MADE = History.from_lines(["a1b2c3d Fix API", "0f0f0f0 Add tests", "ffff123 Bug fix UI"])


def test_git_expected_answers_hand_made():
    assert expected_lines(HAND_MADE, "revert") == ("a1b2c3d Fix API", "0f0f0f0 Add tests", "ffff123 Bug fix UI")
    assert expected_lines(HAND_MADE, "cherry-pick") == ("ffff123 Bug fix UI", "0f0f0f0 Add tests", "a1b2c3d Fix API")
    assert answer_text(HAND_MADE, "cherry-pick") == "\nffff123 Bug fix UI\n0f0f0f0 Add tests\na1b2c3d Fix API\n"
    with pytest.raises(ValueError, match="task"):
        expected_lines(HAND_MADE, "rebase")
    with pytest.raises(ValueError, match="lines"):
        History.from_lines(["nohash"])


def test_git_prompt_hand_made():
    demo = History.from_lines(["1234567 Update CLI", "89abcde Merge search"])
    prompt = git_prompt(HAND_MADE, "cherry-pick", [demo])
    assert prompt.text.startswith("Below is a part of a Git commit history (newest at the top, oldest at the bottom).")
    assert "**from oldest to newest**" in prompt.text
    assert ("=== NEW HISTORY ===\n1234567 Update CLI\n89abcde Merge search\n=== ANSWER ===\n"
            "<start>\n89abcde Merge search\n1234567 Update CLI\n<end>") in prompt.text
    assert prompt.text.endswith("=== NEW HISTORY ===\na1b2c3d Fix API\n0f0f0f0 Add tests\nffff123 Bug fix UI\n"
                                "=== ANSWER ===\n<start>")
    assert prompt.end_text == "<end>"
    revert = git_prompt(HAND_MADE, "revert", [demo], instruction=False)
    assert revert.text.startswith("=== NEW HISTORY ===\n1234567 Update CLI\n89abcde Merge search\n=== ANSWER ===\n"
                                  "<start>\n1234567 Update CLI\n89abcde Merge search\n<end>\n\n")
    assert revert.answer_text == "\na1b2c3d Fix API\n0f0f0f0 Add tests\nffff123 Bug fix UI\n"


def test_git_histories_are_seeded_and_well_formed():
    history = random_history(random.Random(3), 12)
    assert history == random_history(random.Random(3), 12)
    assert len({c.sha for c in history.commits}) == 12
    for commit in history.commits:
        assert len(commit.sha) == 7 and set(commit.sha) <= set("0123456789abcdef")
        action, topic = next((a, commit.message[len(a) + 1:]) for a in GIT_ACTIONS if commit.message.startswith(a + " "))
        assert action in GIT_ACTIONS and topic in GIT_TOPICS
    examples = git_examples(5, 4, n_shots=2, seed=7)
    assert examples == git_examples(5, 4, n_shots=2, seed=7)
    assert git_examples(5, 2, n_shots=2, seed=7) == examples[:2]
    assert all(len(e.demos) == 2 and len(e.history.commits) == 5 for e in examples)
    assert git_examples(5, 4, n_shots=2, seed=8) != examples


def test_git_answer_parsing_is_line_wise():
    expected = ["a1b2c3d Fix API", "0f0f0f0 Add tests"]
    assert lines_match("\na1b2c3d Fix API\n 0f0f0f0 Add tests \n\n<end>\n=== NEW", expected)
    assert not lines_match("\n0f0f0f0 Add tests\na1b2c3d Fix API\n", expected)
    assert parse_answer_lines("x\n\ny<end>z") == ["x", "y"]


def test_git_config_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_commits"):
        GitConfig(n_commits=(0,))
    with pytest.raises(ValueError, match="task"):
        GitConfig(tasks=("revert", "squash"))


# --------------------------------------------------------------------------- tiny model


@pytest.fixture(scope="module")
def tiny():
    from interp.models import load_model

    return load_model("tiny-llama", device="cpu")


def test_teacher_forced_departure_equals_greedy_generation(tiny):
    """The one-pass transition index is where greedy generation first departs: take the model's
    own greedy continuation as the reference, then corrupt one token of it."""
    tokenizer = tiny.tokenizer
    prompt_ids = tuple(tokenizer.encode("Paragraph:\n<start> a b c <end>\nEcho:\n<start>"))
    probe = EncodedPrompt(prompt_ids, (0,) * 8, AnswerEnd.not_required())
    own = greedy_answers(tiny, [probe], slack=1, progress=False)[0][:8]
    assert len(own) == 8
    stop = AnswerEnd(frozenset({tokenizer.eos_token_id}))
    exactly = EncodedPrompt(prompt_ids, own, stop)
    forced = teacher_forced_scores(tiny, [exactly], progress=False, keep_predictions=True).predictions[0]
    assert forced[:8] == own
    assert departure_from_predictions(own, forced, stop) in (None, 8)
    corrupted_ids = own[:3] + ((own[3] + 1) % len(tokenizer),) + own[4:]
    corrupted = EncodedPrompt(prompt_ids, corrupted_ids, stop)
    forced_bad = teacher_forced_scores(tiny, [corrupted, exactly], batch_size=2, progress=False,
                                       keep_predictions=True).predictions
    assert departure_from_predictions(corrupted_ids, forced_bad[0], stop) == 3
    generated = greedy_answers(tiny, [corrupted], slack=1, progress=False)[0]
    assert transition_index(corrupted_ids, generated) == 3
    assert forced_bad[1] == forced  # batching and padding change nothing


def test_encoded_split_is_natural_for_both_prompts(tiny):
    tokenizer = tiny.tokenizer
    assert split_is_natural(tokenizer, echo_prompt("Dolor sit amet. Sed ut.", n_shots=1))
    assert split_is_natural(tokenizer, git_prompt(HAND_MADE, "revert", [HAND_MADE]))
    encoded = encode_text_prompt(tokenizer, TextPrompt("ab", " cd", "."), AnswerEnd(frozenset({1})), prepend_bos=True)
    assert encoded.prompt_ids[0] == tokenizer.bos_token_id and encoded.answer_start == len(encoded.prompt_ids)


def test_pipelines_on_tiny_model(tiny, tmp_path):
    # free generation costs one forward pass per token: keep it to a few tokens
    lorem_config = LoremConfig(n_paragraphs=2, max_tokens=6, n_shots=1, rule=False)
    run = run_lorem(tiny, lorem_config, generate=True, progress=False, model_name="tiny-llama")
    assert len(run.results) == 2 and run.natural_split == 1.0
    for result, paragraph in zip(run.results, run.paragraphs):
        assert 0 < result.n_tokens <= 6 or len(paragraph.split()) == 1  # the budget keeps at least one word
        # free generation departs exactly where teacher forcing says it does
        assert result.generated_transition_index == result.transition_index
        assert result.n_edits is not None and result.n_edits >= 1
    assert run.summary.n_paragraphs == 2 and 0 <= run.summary.base_rate <= 1
    paths = write_lorem_tables(run, tmp_path, metadata={"model": "tiny-llama"})
    # the model is in every name, so a second model's run never overwrites the first one's
    assert {p.name for p in paths} == {f"lorem_ipsum_tiny-llama{s}" for s in (".csv", ".json", ".md")} | {
        f"lorem_ipsum_summary_tiny-llama{s}" for s in (".csv", ".json", ".md")}
    rows = json.loads((tmp_path / "lorem_ipsum_tiny-llama.json").read_text())["rows"]
    assert len(rows) == 2 and "transition_index" in rows[0]
    assert "share_departures_ambiguous" in (tmp_path / "lorem_ipsum_summary_tiny-llama.csv").read_text()

    git_config = GitConfig(n_commits=(2, 3), n_examples=2, n_shots=1, instruction=False)
    git_rows = run_git(tiny, git_config, progress=False, model_name="tiny-llama")
    # both orders of a length before the next length: a run cut short still leaves paired cells
    assert [(r.task, r.order, r.n_commits) for r in git_rows] == [
        ("revert", "forward", 2), ("cherry-pick", "reversed", 2), ("revert", "forward", 3), ("cherry-pick", "reversed", 3)]
    for row in git_rows:
        assert row.n_examples == 2 and 0 <= row.accuracy <= 1 and row.generate_accuracy is None
        assert row.natural_split == 1.0
    generated = evaluate_git(tiny, "cherry-pick", 1, GitConfig(n_examples=1, n_shots=0, instruction=False),
                             generate=True, progress=False)
    assert generated.generate_accuracy in (0.0, 1.0)
    write_git_table(git_rows, tmp_path)
    header = (tmp_path / "git_history_tiny-llama.csv").read_text().splitlines()[0].split(",")
    assert header[:7] == ["model", "task", "order", "n_commits", "n_examples", "accuracy", "stderr"]


def test_git_run_resumes_from_its_journal(tiny, tmp_path, monkeypatch):
    from interp.core.journal import RowJournal
    from interp.experiments.realistic import git_history

    config = GitConfig(n_commits=(2, 3), n_examples=2, n_shots=0, instruction=False)
    with RowJournal(tmp_path / "git_history_tiny-llama", {"run": 1}, git_history.GIT_ROW_SHAPE) as journal:
        first = run_git(tiny, config, progress=False, model_name="tiny-llama", journal=journal)
        assert len(journal.done()) == 4
    calls = []
    real = git_history.evaluate_git
    monkeypatch.setattr(git_history, "evaluate_git", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    with RowJournal(tmp_path / "git_history_tiny-llama", {"run": 1}, git_history.GIT_ROW_SHAPE) as journal:
        journal._rows = journal._rows[:2]  # as if killed after the first length
        again = run_git(tiny, config, progress=False, model_name="tiny-llama", journal=journal)
    assert again == first and calls == [3, 3]  # only the unfinished length ran again


def test_git_script_resumes_a_killed_run_asked_for_more_lengths(tmp_path, monkeypatch):
    """Each (task, length) cell is seeded on its own: a run extended with another length reuses
    the cells a killed run finished and computes only the new ones."""
    import importlib.util

    from interp.experiments.realistic import git_history

    spec = importlib.util.spec_from_file_location("git_history_script", "analyses/git_history.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    common = ["--model", "tiny-llama", "--device", "cpu", "--out", str(tmp_path), "--examples", "2", "--shots", "0",
              "--no-instruction", "--quiet"]
    real, calls = git_history.evaluate_git, []

    def killed_at_3(model, task, n, *args, **kwargs):
        if n == 3:
            raise KeyboardInterrupt
        return real(model, task, n, *args, **kwargs)

    monkeypatch.setattr(git_history, "evaluate_git", killed_at_3)
    with pytest.raises(KeyboardInterrupt):
        script.main(["--commits", "2,3", *common])
    monkeypatch.setattr(git_history, "evaluate_git", lambda m, task, n, *a, **k: calls.append((task, n)) or real(m, task, n, *a, **k))
    assert script.main(["--commits", "2,3,4", *common]) == 0
    assert calls == [("revert", 3), ("cherry-pick", 3), ("revert", 4), ("cherry-pick", 4)]
    rows = json.loads((tmp_path / "git_history_tiny-llama.json").read_text())["rows"]
    assert [(r["task"], r["n_commits"]) for r in rows][:2] == [("revert", 2), ("cherry-pick", 2)] and len(rows) == 6
    assert not (tmp_path / "git_history_tiny-llama.partial.jsonl").exists()


def test_lorem_run_resumes_from_its_journal(tiny, tmp_path, monkeypatch):
    from interp.core.journal import RowJournal
    from interp.experiments.realistic import lorem

    config = LoremConfig(n_paragraphs=3, max_tokens=30, n_shots=0, rule=False)
    with RowJournal(tmp_path / "lorem_ipsum_tiny-llama", {"run": 1}, lorem.COPY_ROW_SHAPE) as journal:
        first = run_lorem(tiny, config, batch_size=2, progress=False, model_name="tiny-llama", journal=journal)
        assert [row["paragraph"] for row in journal.done()] == [0, 1, 2]
    sizes = []
    real = lorem.teacher_forced_scores
    monkeypatch.setattr(lorem, "teacher_forced_scores", lambda m, batch, *a, **k: sizes.append(len(batch)) or real(m, batch, *a, **k))
    with RowJournal(tmp_path / "lorem_ipsum_tiny-llama", {"run": 1}, lorem.COPY_ROW_SHAPE) as journal:
        journal._rows = journal._rows[:2]  # as if killed after the first batch
        again = run_lorem(tiny, config, batch_size=2, progress=False, model_name="tiny-llama", journal=journal)
    same = lambda a, b: json.dumps(a) == json.dumps(b)  # NaN (no ambiguous position) reads back as NaN
    assert same([r.as_row() for r in again.results], [r.as_row() for r in first.results])
    assert same(again.summary.as_row(), first.summary.as_row()) and sizes == [1]
    n = first.summary.n_ambiguous_positions + first.summary.n_unambiguous_positions
    assert n == sum(r.n_tokens + 1 for r in first.results) and first.summary.n_ambiguous_positions > 0


# --------------------------------------------------------------------------- published tables: claims and figures


def _git_row(task: str, n_commits: int, hits: int, n: int = 20, model: str = "m") -> GitRow:
    from interp.experiments.realistic.git_history import ORDER

    return GitRow(model=model, task=task, order=ORDER[task], n_commits=n_commits, n_examples=n, accuracy=hits / n,
                  stderr=0.0, token_accuracy=0.5, mean_logprob=-1.0, generate_accuracy=None, natural_split=1.0,
                  n_shots=2, seed=0)


@pytest.fixture
def realistic_results(tmp_path):
    from interp.core.tables import write_table
    from interp.experiments.realistic.lorem import LoremSummary

    write_git_table([_git_row("revert", 10, 18), _git_row("cherry-pick", 10, 2),   # forward wins clearly
                     _git_row("revert", 20, 0), _git_row("cherry-pick", 20, 0),    # both at 0
                     _git_row("revert", 35, 1), _git_row("cherry-pick", 35, 15)], tmp_path)  # reversed
    summary = LoremSummary(model="m", n_paragraphs=16, max_tokens=200, mean_tokens=190.0, accuracy=0.25, stderr=0.1,
                           base_rate=0.1, n_departures=12, share_departures_ambiguous=0.5, share_stderr=0.1, p_value=0.01,
                           mean_transition_index=50.0, n_primed_departures=12, share_primed_departures_ambiguous=0.5,
                           primed_p_value=0.01, n_tf_departures=60, share_tf_departures_ambiguous=0.5, tf_p_value=0.01,
                           tf_accuracy_ambiguous=270 / 300, tf_accuracy_unambiguous=2730 / 2760, n_edits=None,
                           share_edits_ambiguous=None, n_shots=2, seed=0, n_ambiguous_positions=300,
                           n_unambiguous_positions=2760)
    write_table([summary.as_row()], tmp_path / "lorem_ipsum_summary_m")
    return tmp_path


def test_realistic_claims_per_length_and_position_kind(realistic_results):
    from interp.core.stats import difference_interval
    from interp.figures.claims import claim_rows

    claims = {c.claim: c for c in claim_rows(realistic_results)}
    git = {int(name.rsplit("N=", 1)[1]): c for name, c in claims.items() if name.startswith("git history")}
    assert {n: c.verdict for n, c in git.items()} == {10: "supports", 20: "cannot test", 35: "contradicts"}
    d, lo, hi = difference_interval((18, 20), (2, 20))
    assert (git[10].estimate, git[10].lo, git[10].hi, git[10].n) == (pytest.approx(d), pytest.approx(lo), pytest.approx(hi), 40)
    assert git[10].value == "revert 0.90 vs cherry-pick 0.10" and git[10].source == "git_history_m.csv"
    (lorem_claim,) = [c for name, c in claims.items() if name.startswith("Lorem Ipsum")]
    d, lo, hi = difference_interval((2730, 2760), (270, 300))
    assert lorem_claim.verdict == "supports" and lorem_claim.n == 3060
    assert (lorem_claim.estimate, lorem_claim.lo, lorem_claim.hi) == (pytest.approx(d), pytest.approx(lo), pytest.approx(hi))
    assert "unambiguous 0.9891 vs ambiguous 0.9000" in lorem_claim.value and ".9996 / .9643" in lorem_claim.value
    assert lorem_claim.value.endswith("exact copies 4/16")


def test_realistic_figures_are_built_from_the_tables(realistic_results):
    from interp.figures.build import build_figures

    figures, errors = build_figures(realistic_results, log=lambda line: None)
    figures = dict(figures)
    assert errors == [] and {"git_history_m", "lorem_ipsum"} <= set(figures)
    revert, cherry = figures["git_history_m"].data
    assert list(revert.x) == [10, 20, 35] and list(revert.y) == [90.0, 0.0, 5.0] and list(cherry.y) == [10.0, 0.0, 75.0]
    unambiguous, ambiguous = figures["lorem_ipsum"].data
    assert list(unambiguous.x) == ["m", "Llama-3.1-8B (paper)"] and ambiguous.y[-1] == pytest.approx(96.43)
    (realistic_results / "git_history_m.csv").write_text("model,task,n_commits,n_examples,accuracy\nm,revert,10,20,7.5\n")
    figures, errors = build_figures(realistic_results, log=lambda line: None)
    assert "git_history_m" not in dict(figures) and len(errors) == 1 and "git_history_m.csv" in errors[0]


def test_context_overflow_is_a_clear_error(tiny):
    with pytest.raises(ValueError, match="n_ctx"):
        run_lorem(tiny, LoremConfig(n_paragraphs=1, max_tokens=600), progress=False)


# --------------------------------------------------------------------------- embedded model


@pytest.mark.embedded
def test_embedded_model_echo_prompt_tokenization():
    from interp.models import load_model

    model = load_model(device="cpu")
    tokenizer = model.tokenizer
    paragraph = lorem_paragraph(0, LoremConfig(max_tokens=40), count_tokens=lambda t: len(tokenizer.encode(" " + t)))
    assert split_is_natural(tokenizer, echo_prompt(paragraph))
    assert split_is_natural(tokenizer, git_prompt(HAND_MADE, "cherry-pick", [HAND_MADE]))
