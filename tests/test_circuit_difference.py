"""Circuits compared (UF against UB), heads traced to the answer, copy routes with bootstrap shares,
the claims read from them, and the exact verification of a circuit's top edges."""

import csv
import math
import sys
from pathlib import Path

import pytest

from interp.experiments.circuit_difference import (circuit_difference, circuit_value_heads, head_wiring, heads_per_kv_head,
                                                    wired_writers)
from interp.experiments.circuit_routes import ROUTES, route_effects, route_preference, route_shares
from interp.interventions.circuits.task import copying_task
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


def edge(pos, role, reader, writer, score):
    return {"pos": pos, "role": role, "reader": reader, "writer": writer, "score": score}


# a UF circuit that reads the string through head 1.0's values and a UB circuit where head 0.1 writes into
# a query no path leaves
UF = [edge(3, "s1", "a1.0.v", "a0.0", -2.0), edge(3, "s1", "a1.0.k", "embed", -1.0),
      edge(8, "c1", "logits", "a1.0", -4.0), edge(8, "c1", "logits", "m1", -1.0)]
UB = [edge(8, "c1", "logits", "a1.0", -3.0), edge(8, "c1", "m1.in", "a1.0", -1.0), edge(7, "c0", "a1.1.q", "a0.1", -1.0)]


def test_difference_counts_shared_and_one_sided_edges_per_role_group():
    rows = {(r["position"], r["reader"], r["writer"]): r for r in circuit_difference(UF, UB, ("UF", "UB"))}
    logits = rows[("copy", "logits", "head")]
    assert (logits["edges_UF"], logits["edges_UB"], logits["shared"], logits["only_UF"], logits["only_UB"]) == (1, 1, 1, 0, 0)
    string_v = rows[("string", "v", "head")]
    assert (string_v["edges_UF"], string_v["only_UF"], string_v["edges_UB"]) == (1, 1, 0)
    assert math.isclose(string_v["share_UF"], 2 / 8) and string_v["share_UB"] == 0
    assert math.isclose(sum(r["share_UF"] for r in rows.values()), 1) and math.isclose(sum(r["share_UB"] for r in rows.values()), 1)
    # the group the circuits weigh most differently comes first
    first = circuit_difference(UF, UB, ("UF", "UB"))[0]
    assert (first["position"], first["reader"], first["writer"]) == ("string", "v", "head")


def test_difference_refuses_an_empty_circuit_and_a_repeated_edge():
    with pytest.raises(ValueError, match="UB circuit has no edges"):
        circuit_difference(UF, [], ("UF", "UB"))
    with pytest.raises(ValueError, match="appears twice"):
        circuit_difference(UF + UF[:1], UB)


def test_a_path_follows_keys_and_values_forward_in_position_and_queries_in_place():
    rows = [edge(2, "s0", "a1.0.v", "a0.0", -1), edge(5, "c0", "a1.0.q", "a0.1", -1), edge(4, "c0", "a1.0.q", "a0.2", -1),
            edge(5, "c0", "logits", "a1.0", -1), edge(6, "c1", "a1.0.k", "a0.3", -1)]
    live = wired_writers(rows)
    assert ("a0.0", 2) in live        # value at 2 read by the head's output at 5
    assert ("a0.1", 5) in live        # query at the same position
    assert ("a0.2", 4) not in live    # a query at 4 feeds the output at 4, which no edge takes further
    assert ("a0.3", 6) not in live    # a key after the output's position cannot feed it


def test_key_value_readers_feed_every_query_head_of_their_group():
    rows = [edge(2, "s0", "a1.0.v", "a0.0", -1), edge(5, "c0", "logits", "a1.2", -1)]
    assert ("a0.0", 2) not in wired_writers(rows, heads_per_kv=2)   # kv head 0 feeds a1.0 and a1.1 only
    assert ("a0.0", 2) in wired_writers(rows, heads_per_kv=3)       # ... or a1.0 - a1.2
    assert heads_per_kv_head(["a1.8", "a1.2.k", "a1.0.v"]) == 3
    with pytest.raises(ValueError, match="multiple"):
        heads_per_kv_head(["a1.7", "a1.2.k"])
    assert circuit_value_heads(rows, heads_per_kv=3) == {1: [0, 1, 2]}


def test_head_wiring_names_heads_present_but_not_wired_to_the_answer():
    rows = head_wiring({"UF": UF, "UB": UB}, ["a0.0", "a0.1", "a1.0"])
    got = {(r["circuit"], r["head"]): (r["edges_out"], r["wired"]) for r in rows}
    assert got[("UF", "a0.0")] == (1, True)
    assert got[("UB", "a0.0")] == (0, False)
    assert got[("UB", "a0.1")] == (1, False)   # in the UB circuit, but its query head 1.1 reaches nothing
    assert got[("UF", "a1.0")] == (1, True) and got[("UB", "a1.0")] == (2, True)


def route_rows(drop_by_route, n=12, clean=3.0, counterfactual=-1.0, noise=0.2):
    """Synthetic per-prompt route effects: route r lowers the metric by drop * gap, +- noise alternating."""
    gap = clean - counterfactual
    return [{"prompt": i, "route": r, "clean_metric": clean, "counterfactual_metric": counterfactual,
             "patched_metric": clean - gap * drop + (noise if i % 2 else -noise), "correct": True}
            for i in range(n) for r, drop in drop_by_route.items()]


def test_route_shares_recover_known_shares_with_intervals_that_cover_them():
    rows = route_rows({"o-1": 0.8, "o": 0.05, "o+1": 0.1})
    shares = route_shares(rows, n_boot=500, seed=1)
    for route, expected in (("o-1", 0.8), ("o", 0.05), ("o+1", 0.1)):
        s = shares[route]
        assert math.isclose(s.share, expected, abs_tol=1e-9) and s.lo < expected < s.hi and s.n == 12
    assert route_shares(rows, n_boot=500, seed=1) == shares  # seeded
    wider = route_shares(route_rows({"o-1": 0.8, "o": 0.05, "o+1": 0.1}, noise=1.0), n_boot=500, seed=1)["o-1"]
    assert wider.hi - wider.lo > shares["o-1"].hi - shares["o-1"].lo
    with pytest.raises(ValueError, match="lacks some"):
        route_shares([r for r in rows if not (r["route"] == "o" and r["prompt"] == 3)])


def test_route_preference_is_the_margin_over_the_strongest_other_route():
    d = route_preference(route_rows({"o-1": 0.8, "o": 0.05, "o+1": 0.3}), "o-1", n_boot=500)
    assert math.isclose(d.share, 0.5, abs_tol=1e-9) and d.lo > 0
    d = route_preference(route_rows({"o-1": 0.1, "o": 0.05, "o+1": 0.9}), "o-1", n_boot=500)
    assert math.isclose(d.share, -0.8, abs_tol=1e-9) and d.hi < 0


@pytest.fixture(scope="module")
def planted():
    return {name: load_model(name, device="cpu") for name in ("planted-ub", "planted-uf")}


@pytest.mark.parametrize("name,task,expected", [("planted-ub", "UB", "o"), ("planted-uf", "UF", "o+1")])
def test_planted_models_copy_through_their_planted_route(planted, name, task, expected):
    model = planted[name]
    effects = route_effects(model, copying_task(model.tokenizer, task, 4, 6), batch_size=4)
    assert len(effects) == 6 * len(ROUTES)
    shares = route_shares(effects, n_boot=200)
    assert shares[expected].share > 0.9, shares
    assert all(abs(s.share) < 0.1 for r, s in shares.items() if r != expected), shares
    # the route's heads alone carry it; another layer's heads carry none of it
    layer = model.cfg.n_layers - 1
    alone = route_shares(route_effects(model, copying_task(model.tokenizer, task, 4, 6), {layer: range(model.cfg.n_heads)}), n_boot=200)
    other = route_shares(route_effects(model, copying_task(model.tokenizer, task, 4, 6), {0: range(model.cfg.n_heads)}), n_boot=200)
    assert alone[expected].share > 0.9 and abs(other[expected].share) < 0.1


def write_routes(path: Path, rows, task="UB", model="m", correct=True):
    fields = ["model", "task", "length", "format", "shots", "head_set", "prompt", "route", "heads", "clean_metric",
              "counterfactual_metric", "patched_metric", "correct"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({"model": model, "task": task, "length": 5, "format": "single-shot", "shots": 1,
                             "head_set": "all", "heads": "all", **r, "correct": correct})


def test_claims_read_route_tables_with_verdicts_and_refuse_damaged_ones(tmp_path):
    from interp.figures.claims import claim_rows

    write_routes(tmp_path / "circuit_routes_good_UB.csv", route_rows({"o": 0.8, "o-1": 0.05, "o+1": 0.1}), model="good")
    write_routes(tmp_path / "circuit_routes_other_UB.csv", route_rows({"o-1": 0.05, "o": 0.05, "o+1": 0.9}), model="other")
    write_routes(tmp_path / "circuit_routes_failing_UB.csv", route_rows({"o": 0.8, "o-1": 0.0, "o+1": 0.0}), model="failing",
                 correct=False)
    write_routes(tmp_path / "circuit_routes_fwd_UF.csv", route_rows({"o-1": 0.0, "o": 0.1, "o+1": 0.7}), task="UF", model="fwd")
    claims = {c.model: c for c in claim_rows(tmp_path)}
    assert claims["good"].verdict == "supports" and math.isclose(claims["good"].estimate, 0.7, abs_tol=1e-9)
    assert "anti-induction" in claims["good"].claim and "o 0.80" in claims["good"].value
    assert claims["other"].verdict == "contradicts" and claims["other"].hi < 0
    assert claims["failing"].verdict == "cannot test"
    assert claims["fwd"].verdict == "supports" and "induction route" in claims["fwd"].claim
    rows = route_rows({"o": 0.8, "o-1": 0.05, "o+1": 0.1})
    write_routes(tmp_path / "circuit_routes_good_UB.csv", rows + rows[:1], model="good")
    with pytest.raises(ValueError, match="twice"):
        claim_rows(tmp_path)


def test_find_circuit_verifies_the_top_edges_exactly_and_leaves_the_rest_empty():
    from interp.experiments.circuit_study import CircuitStudyConfig, circuit_study

    model = load_model("planted-ub", device="cpu")
    out = circuit_study(model, CircuitStudyConfig(lengths=(3,), n=2, steps=1, n_random=0, exact="none", verify=5,
                                                  edges_per_pass=8), model_label="planted-ub")
    summary = out["summary"][0]
    assert summary["verified_edges"] == 5 and -1 <= summary["pearson_top_eap_ig"] <= 1
    measured = [r for r in out["edges"] if r["exact"] is not None]
    assert len(measured) == 5
    top = sorted(out["edges"], key=lambda r: -abs(r["eap_ig"]))[:5]
    assert {(r["pos"], r["reader"], r["writer"]) for r in top} == {(r["pos"], r["reader"], r["writer"]) for r in measured}
    assert [r["exact"] is not None for r in out["circuit"]][:5] == [True] * 5


@pytest.mark.parametrize("argv,message", [(["--tasks", "UF"], "--tasks"), (["--heads", "8.0"], "--heads"),
                                          (["--model", "nothing-here"], "--model")])
def test_circuit_difference_refuses_bad_arguments_in_one_line(argv, message, tmp_path, capsys):
    import circuit_difference
    from interp.cli import run

    base = ["--model", "scratch-ub", "--tasks", "UF,UB", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        run(circuit_difference.main, base + argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err.strip().splitlines()[-1] and "Traceback" not in err


def _published(folder: Path, uf=UF, ub=UB, model="m", variant="few-shot", scores=None) -> Path:
    """The two circuits of model m and its head scores (a full 2 x 2 grid), as find_circuit and score_heads publish them."""
    from interp.core.tables import write_table

    suffix = f"_{variant}" if variant else ""
    for task, rows in (("UF", uf), ("UB", ub)):
        write_table([{"model": model, "task": task, "length": 5, "counterfactual": "corrupt", "rank": i + 1, **r}
                     for i, r in enumerate(rows)], folder / f"circuit_m_{task}{suffix}")
    write_table(scores or [{"model": "m", "layer": layer, "head": h, "induction": 0.1 * h + 0.2 * layer, "anti_induction": 0.0,
                            "duplicate_v_composition": 0.5 - 0.1 * h} for layer in range(2) for h in range(2)],
                folder / "head_scores_m")
    out = folder / "out"
    out.mkdir(exist_ok=True)
    return out


def test_circuit_difference_script_writes_both_tables_from_published_circuits(tmp_path):
    import circuit_difference
    from interp.core.tables import read_csv

    out = _published(tmp_path)
    assert circuit_difference.main(["--model", "m", "--variant", "few-shot", "--results", str(tmp_path), "--out", str(out),
                                    "--quiet", "--heads", "a0.0,a0.1"]) == 0
    wiring = {(r["circuit"], r["head"]): r["wired"] for r in read_csv(out / "circuit_wiring_m_few-shot.csv")}
    assert wiring == {("UF", "a0.1"): False, ("UF", "a0.0"): True, ("UB", "a0.1"): False, ("UB", "a0.0"): False}
    difference = read_csv(out / "circuit_difference_m_few-shot.csv")
    assert {(r["position"], r["reader"], r["writer"]) for r in difference} >= {("string", "v", "head"), ("copy", "logits", "head")}


def _refused(tmp_path: Path, capsys, *argv: str) -> str:
    """Run the script on tmp_path's tables: exit 2, one line, nothing written; that line."""
    import circuit_difference
    from interp.cli import run

    try:
        code = run(circuit_difference.main, ["--model", "m", "--results", str(tmp_path), "--out", str(tmp_path / "out"),
                                             "--quiet", *argv])
    except SystemExit as exit_info:
        code = exit_info.code
    err = capsys.readouterr().err.strip().splitlines()
    # one error line (an argument's comes after the parser's usage lines)
    assert code == 2 and [line for line in err if "error:" in line] == err[-1:] and "Traceback" not in str(err), err
    assert not any((tmp_path / "out").iterdir())
    return err[-1]


def test_the_variant_is_the_one_both_circuits_have(tmp_path, capsys):
    import circuit_difference

    out = _published(tmp_path)  # was: "no published circuit .../circuit_m_UF.csv" without --variant few-shot
    assert circuit_difference.main(["--model", "m", "--results", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    assert (out / "circuit_wiring_m_few-shot.csv").exists()
    for path in out.iterdir():
        path.unlink()
    line = _refused(tmp_path, capsys, "--variant", "")
    assert "--variant: no published circuit_m_UF.csv, circuit_m_UB.csv" in line and "UF: 'few-shot'; UB: 'few-shot'" in line
    _published(tmp_path, variant="")  # now two variants have both circuits
    line = _refused(tmp_path, capsys)
    assert "--variant: both circuits exist under several variants ('', 'few-shot'); name one with --variant" in line


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("damage, fragment", [
    # the UB circuit is UF's file copied over it: its rows still say UF
    (lambda d: (d / "circuit_m_UB_few-shot.csv").write_text((d / "circuit_m_UF_few-shot.csv").read_text()),
     "circuit_m_UB_few-shot.csv, line 2: task is 'UF', expected 'UB', the task the file name says"),
    # ... and with its task column edited to match
    (lambda d: (d / "circuit_m_UB_few-shot.csv").write_text((d / "circuit_m_UF_few-shot.csv").read_text().replace(",UF,", ",UB,")),
     "circuit_m_UB_few-shot.csv holds the edges and scores of"),
    # rows of another model in m's circuit
    (lambda d: _rewrite(d / "circuit_m_UF_few-shot.csv", "\nm,UF,5,corrupt,2,", "\nother,UF,5,corrupt,2,"),
     "circuit_m_UF_few-shot.csv, line 3: model is 'other', expected 'm'"),
    # every score NaN
    (lambda d: (d / "circuit_m_UF_few-shot.csv").write_text("\n".join(
        ",".join(cells[:-1] + ["nan"]) if i else line for i, line in enumerate((d / "circuit_m_UF_few-shot.csv").read_text().splitlines())
        for cells in [line.split(",")]) + "\n"),
     "circuit_m_UF_few-shot.csv, line 2: score is nan, expected a finite number"),
    # a reader of a layer and head the model does not have
    (lambda d: _rewrite(d / "circuit_m_UF_few-shot.csv", "a1.0.v", "a99.99.q"),
     "circuit_m_UF_few-shot.csv, line 2: reader is 'a99.99.q', expected a reader of the model"),
    (lambda d: _rewrite(d / "circuit_m_UB_few-shot.csv", ",a0.1,", ",a0.7,"),
     "circuit_m_UB_few-shot.csv, line 4: writer is 'a0.7', expected a writer of the model"),
    # a NaN head score (the default heads are chosen by them)
    (lambda d: _rewrite(d / "head_scores_m.csv", "m,0,1,0.1,", "m,0,1,nan,"),
     "head_scores_m.csv, line 3: induction is nan, expected a number in [0, 1]"),
    # no head scores to check the heads against
    (lambda d: (d / "head_scores_m.csv").unlink(), "--model: no head_scores_m.csv in"),
])
def test_circuit_difference_refuses_impossible_tables_in_one_line(tmp_path, capsys, damage, fragment):
    _published(tmp_path)
    damage(tmp_path)
    line = _refused(tmp_path, capsys)
    assert fragment in line, line


@pytest.mark.parametrize("heads, fragment", [("a999.0", "--heads: a999.0 is not a head of the model (layers 0-1, heads 0-1"),
                                             ("a0.0,a1.2", "--heads: a1.2 is not a head")])
def test_circuit_difference_refuses_heads_the_model_lacks(tmp_path, capsys, heads, fragment):
    _published(tmp_path)
    assert fragment in _refused(tmp_path, capsys, "--heads", heads)
