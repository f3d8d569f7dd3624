"""The route table (interp.experiments.routes): which reads a copy needs, on the planted models whose
routes are known. planted-ub's backward copier 1.1 finds ``o`` by its key (the token) and carries the
previous token through its value (written there by the previous-token head 0.0); planted-uf's induction
head 1.0 finds ``o + 1`` by its key (the previous token, from 0.0) and carries the token through its value."""

from __future__ import annotations

import math

import pytest
import torch

from interp.core.executor import SerialExecutor
from interp.experiments.circuit_routes import route_edges
from interp.experiments.routes import (READ_KINDS, REMOVAL_ONLY, ROUTE_COUNTERFACTUALS, ROUTES, Removal, RouteCell,
                                       RouteRead, RouteStudyConfig, answer_scores, is_share_row,
                                       layer_head_set, other_entries, read_entries, route_removals, route_rows,
                                       route_shares, route_study, route_summary, summary_lines, verdict)
from interp.interventions.circuits.task import copying_task
from interp.models import load_model, tiny_tokenizer

# (route, kind) reads each planted copy runs through, and those whose cargo a previous-token head wrote
PLANTED = {"planted-ub": ("UB", {("o", "value"), ("o", "key")}, {("o", "value")}),
           "planted-uf": ("UF", {("o+1", "key"), ("o+1", "value")}, {("o+1", "key")})}
LAYER_1 = {1: [0, 1, 2, 3]}  # the planted copy heads' layer (layer 0 holds the previous-token head)


@pytest.fixture(scope="module")
def planted():
    return {name: load_model(name, device="cpu") for name in PLANTED}


@pytest.fixture(scope="module")
def summaries(planted):
    """Every removal under every counterfactual, in layer 1's heads, 8 prompts of length 4 per model."""
    out = {}
    for name, (task, _, _) in PLANTED.items():
        model = planted[name]
        rows = route_rows(model, copying_task(model.tokenizer, task, 4, 8), heads=LAYER_1, head_set="layers_1")
        out[name] = (rows, {(s.route, s.kind, s.test, s.counterfactual): s for s in route_summary(rows, n_boot=200)})
    return out


# --------------------------------------------------------------------------- reads and their entries


def test_a_read_before_the_prompt_is_skipped_and_counted_not_an_error():
    """``o - 1`` of a UF string at position 0 (few-shot, one shot, no BOS) is position -1."""
    task = copying_task(tiny_tokenizer(), "UF", 4, 2, fmt="few-shot", n_shots=1, prepend_bos=False)
    assert task.prompts.string_start == 0
    edges = route_edges(task, -1)  # raised "edges: source positions must be >= 0"
    assert edges.source[0].tolist() == [0, 1] and edges.query[0].tolist() == [6, 7]
    entries = read_entries(task.prompts, [RouteRead("o-1", "value")])
    assert entries.skipped == 1 and len(entries) == 2
    joint = read_entries(task.prompts, [RouteRead("o-1", "key"), RouteRead("o", "key")])
    assert joint.skipped == 1 and len(joint) == 5
    kept = other_entries(task.prompts, RouteRead("o-1", "value"))
    assert kept.skipped == 1 and len(kept) == (5 + 1) + (6 + 1) + (7 + 1) - 2  # c0 keeps nothing


def test_sufficiency_removes_every_other_read_of_the_copy_positions():
    prompts = copying_task(tiny_tokenizer(), "UB", 4, 1, fmt="few-shot", n_shots=2).prompts
    read = RouteRead("o", "value")
    kept, others = read_entries(prompts, [read]), other_entries(prompts, read)
    pairs = {(int(t), int(s)) for t, s in zip(others.query, others.source)}
    mine = {(int(t), int(s)) for t, s in zip(kept.query, kept.source)}
    every = {(t, s) for t in prompts.copy_positions()[:-1].tolist() for s in range(t + 1)}
    assert pairs | mine == every and not pairs & mine and others.skipped == 0


def test_removals_keep_kinds_apart_and_name_their_routes():
    names = [(r.route, r.kind, r.test) for r in route_removals()]
    assert len(names) == len(set(names)) == 2 * (3 + 1 + 3)
    assert ("o-1+o", "key", "necessity") in names and ("o+1", "value", "sufficiency") in names
    with pytest.raises(ValueError, match="all of one kind"):
        Removal((RouteRead("o", "value"), RouteRead("o", "key")))
    with pytest.raises(ValueError, match="exactly one"):
        Removal((RouteRead("o", "value"), RouteRead("o-1", "value")), "sufficiency")
    with pytest.raises(ValueError, match=r"route 'o\+2'"):
        RouteRead("o+2", "value")


def test_answer_scores_see_the_strongest_competitor_and_the_whole_copy():
    task = copying_task(tiny_tokenizer(), "UF", 3, 2)
    logits = torch.zeros(2, task.clean.shape[1], len(tiny_tokenizer()))
    rows = torch.arange(2)[:, None]
    logits[rows, task.positions, task.targets] = 2.0
    used = set(task.clean.flatten().tolist()) | set(task.corrupt.flatten().tolist())
    third = next(i for i in range(logits.shape[-1]) if i not in used)
    logits[1, task.positions[-1], third] = 5.0  # prompt 1: a third token wins the last answer
    logits[0, task.positions[0], third] = 3.0  # prompt 0: the first answer (at the separator) lost
    s = answer_scores(task, logits)
    assert s.logit_diff.tolist() == [2.0, 2.0]  # answer minus counterfactual answer: blind to the third token
    assert s.margin.tolist() == [2.0, (2.0 - 3.0) / 2]  # answers after the first: 2 and 2 - 5
    assert s.correct.tolist() == [False, False]  # every answer, the first included
    assert torch.allclose(s.logprob, logits[:, task.positions[1:]].log_softmax(-1).gather(
        -1, task.targets[:, 1:, None])[..., 0].mean(-1))


# --------------------------------------------------------------------------- the planted routes


@pytest.mark.parametrize("name", list(PLANTED))
def test_each_planted_read_is_needed_and_enough_and_every_other_read_neither(summaries, name):
    _, planted_reads, previous_token_reads = PLANTED[name]
    _, by = summaries[name]
    assert all(s.clean_accuracy == 1.0 and s.n == 8 for s in by.values())
    for route in ROUTES:
        for kind in READ_KINDS:
            planted_read = (route, kind) in planted_reads
            for counterfactual in ("mean", "zero", "corrupt"):  # each takes a read's cargo and position away
                assert by[(route, kind, "necessity", counterfactual)].verdict == ("needed" if planted_read else "not needed")
                assert by[(route, kind, "sufficiency", counterfactual)].verdict == ("enough" if planted_read else "not enough")
            # the paper's cut takes away only what a previous-token head wrote
            cut = by[(route, kind, "necessity", "previous_token_cut")]
            assert cut.verdict == ("needed" if (route, kind) in previous_token_reads else "not needed")
            if kind in {k for _, k in previous_token_reads}:
                kept = by[(route, kind, "sufficiency", "previous_token_cut")]
                assert kept.verdict == ("enough" if planted_read else "not enough")
    joint_needed = any(route in ("o", "o-1") for route, _ in planted_reads)
    for kind in READ_KINDS:
        for counterfactual in ("mean", "zero", "corrupt"):
            assert by[("o-1+o", kind, "necessity", counterfactual)].verdict == ("needed" if joint_needed else "not needed")


def test_planted_uf_finds_o_plus_1_by_its_key_and_carries_the_token_by_its_value(summaries):
    _, by = summaries["planted-uf"]
    # the previous-token cut empties the key the induction head finds o + 1 by, not the token it carries
    assert by[("o+1", "key", "necessity", "previous_token_cut")].accuracy == 0.0
    assert by[("o+1", "value", "necessity", "previous_token_cut")].accuracy == 1.0
    # removing the carried token leaves no copy either; the key read alone moves less of the logit gap
    assert by[("o+1", "value", "necessity", "zero")].accuracy == 0.0
    assert by[("o+1", "value", "necessity", "corrupt")].share > 0.95
    assert by[("o+1", "key", "necessity", "corrupt")].share < 0.6


def test_corrupt_patching_brings_in_a_competitor_only_the_margin_sees(summaries):
    """planted-ub with the key at o patched to the corrupt prompt's: the copier looks elsewhere, a third
    token wins; answer and counterfactual answer tie, so the two-token metric reads half the gap."""
    rows, by = summaries["planted-ub"]
    key_o = [r for r in rows if (r.route, r.kind, r.test, r.counterfactual) == ("o", "key", "necessity", "corrupt")]
    assert all(not r.patched_correct and abs(r.patched_metric) < 1.0 and r.patched_margin < -10.0 for r in key_o)
    s = by[("o", "key", "necessity", "corrupt")]
    assert s.accuracy == 0.0 and 0.4 < s.share < 0.6 and s.margin_hi < -10.0


def test_value_shares_come_from_the_share_rows_of_the_full_table(summaries):
    rows, _ = summaries["planted-ub"]
    share_rows = [r for r in rows if is_share_row(r.as_row())]
    assert len(share_rows) == 8 * len(ROUTES) and {r.counterfactual for r in share_rows} == {"corrupt"}
    shares = route_shares(rows, n_boot=200)
    assert shares == route_shares(share_rows, n_boot=200)
    assert shares["o"].share > 0.99 and abs(shares["o-1"].share) < 0.01 and abs(shares["o+1"].share) < 0.01
    zero = route_shares(rows, n_boot=200, counterfactual="zero")  # zero sits half way to the corrupt prompt
    assert math.isclose(zero["o"].share, 0.5, abs_tol=0.02)


def test_every_layer_heads_also_remove_the_copy_positions_previous_token_read(planted):
    """With every layer's heads, keeping only the value at o also removes each copy position's own
    previous-token read in layer 0, which planted-ub's copier needs to find o: no longer enough."""
    model = planted["planted-ub"]
    task = copying_task(model.tokenizer, "UB", 4, 4)
    kept = [Removal((RouteRead("o", "value"),), "sufficiency")]
    every = route_rows(model, task, removals=kept, counterfactuals=["zero"])
    layer_1 = route_rows(model, task, heads=LAYER_1, removals=kept, counterfactuals=["zero"])
    assert not any(r.patched_correct for r in every) and all(r.patched_correct for r in layer_1)
    assert {r.heads for r in every} == {"all"} and {r.heads for r in layer_1} == {"1.0;1.1;1.2;1.3"}


# --------------------------------------------------------------------------- summary, study, heads


def test_summary_intervals_and_verdicts():
    base = {"model": "m", "task": "UB", "length": 4, "format": "single-shot", "shots": 1, "head_set": "all",
            "route": "o", "kind": "value", "test": "sufficiency", "counterfactual": "mean", "clean_metric": 2.0,
            "counterfactual_metric": -2.0, "clean_margin": 1.0, "clean_logprob": -0.5, "correct": True}
    rows = [{**base, "prompt": i, "patched_metric": float(i % 2), "patched_margin": float(i % 2),
             "patched_logprob": -1.0, "patched_correct": i < 9} for i in range(10)]
    s = route_summary(rows, n_boot=500)[0]
    assert (s.accuracy, s.n, s.verdict) == (0.9, 10, "enough")
    assert s.accuracy_lo < 0.9 < s.accuracy_hi and s.margin_lo < 0.5 < s.margin_hi and s.logprob == -1.0
    assert math.isclose(s.share, (2.0 - 0.5) / 4.0) and "kept alone (mean): 9/10 exact copies" in summary_lines([s])[0]
    assert verdict("necessity", 0.9, 0.3, 0.6) == "unclear" and verdict("necessity", 0.1, 0.0, 0.0) == "cannot test"
    with pytest.raises(ValueError, match="twice"):
        route_summary(rows + rows[:1])
    with pytest.raises(ValueError, match="lack kind, test, counterfactual"):  # a table of shares alone
        route_summary([{k: v for k, v in r.items() if k not in ("kind", "test", "counterfactual")} for r in rows])


def test_the_study_keeps_the_cells_order_whatever_order_they_finish_in(planted):
    class Backwards(SerialExecutor):
        def map(self, cell, items, model=None, shared=None, local_model=None):
            for index in reversed(range(len(items))):
                yield index, cell(local_model, shared, items[index])

    model = planted["planted-uf"]
    config = RouteStudyConfig("UF", n=2, counterfactuals=("zero",), kinds=("key",), model_label="uf")
    cells = [RouteCell(3), RouteCell(4, layer_head_set([1], 4))]
    rows = route_study(model, config, cells, executor=Backwards())
    assert rows == route_study(model, config, cells)
    assert [(r.length, r.head_set) for r in rows[:1] + rows[-1:]] == [(3, "all"), (4, "layers_1")]
    assert {r.model for r in rows} == {"uf"} and {r.kind for r in rows} == {"key"}


def test_counterfactual_names_are_checked():
    assert set(REMOVAL_ONLY) < set(ROUTE_COUNTERFACTUALS) and "corrupt" not in REMOVAL_ONLY
    with pytest.raises(ValueError, match="counterfactual 'noise'"):
        RouteStudyConfig("UB", counterfactuals=("noise",))
    with pytest.raises(ValueError, match="kinds query"):
        RouteStudyConfig("UB", kinds=("query",))
