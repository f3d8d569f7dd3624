"""Two published circuits compared (UF against UB) from their `Circuit` files, heads traced to the answer, the
refusal of circuits that cannot be compared, copy routes with bootstrap shares, and the exact verification of a
circuit's top edges."""

import json
import math
import sys
from pathlib import Path

import pytest

from interp.core.tables import read_csv, write_table
from interp.experiments.circuit_difference import circuit_difference, head_wiring, wired_nodes
from interp.experiments.circuit_pair import heads_per_kv_head
from interp.experiments.circuit_routes import ROUTES, route_effects, route_preference, route_shares
from interp.interventions.circuits.circuit import Circuit, CircuitEdge as E
from interp.interventions.circuits.task import copying_task
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


def circuit(task, edges, model="m", length=5, method="masks", fmt="few-shot", grain="roles") -> Circuit:
    """A circuit as analyses/find_circuit.py builds one (the numbers beside its edges are not read here)."""
    return Circuit(model, task, method, grain, tuple(edges), recovered=0.9, accuracy=0.75, clean_accuracy=1.0,
                   clean_metric=3.0, empty_metric=-1.0, n_prompts=4, total_edges=500,
                   config={"length": length, "prompt_format": fmt, "n_shots": 3, "counterfactual": "corrupt"})


# a UF circuit that copies through head 1.0's value read of o+1 (its value written at the string by head 0.0), and
# a UB circuit in which head 0.1 writes into the query of head 1.1, which no path leaves
UF_EDGES = [E("residual", "logits", "a1.0", "c", score=-4.0), E("value", "a1.0", "a1.0.v", "c", "o+1", score=-2.0, sources="s"),
            E("residual", "a1.0.v", "a0.0", "s", score=-2.0), E("residual", "logits", "m1", "c", score=-1.0)]
UB_EDGES = [E("residual", "logits", "a1.0", "c", score=-3.0), E("residual", "m1.in", "a1.0", "c", score=-1.0),
            E("residual", "a1.1.q", "a0.1", "c", score=-1.0)]
UF, UB = circuit("UF", UF_EDGES), circuit("UB", UB_EDGES)


def test_difference_counts_shared_and_one_sided_edges_per_role_group():
    rows = {(r["position"], r["kind"], r["reader"], r["writer"]): r for r in circuit_difference(UF, UB, ("UF", "UB"))}
    logits = rows[("copy", "residual", "logits", "head")]
    assert (logits["edges_UF"], logits["edges_UB"], logits["shared"], logits["only_UF"], logits["only_UB"]) == (1, 1, 1, 0, 0)
    read = rows[("copy", "value", "head", "o+1")]  # an attention read, grouped by the role it reads
    assert (read["edges_UF"], read["only_UF"], read["edges_UB"]) == (1, 1, 0)
    assert math.isclose(read["share_UF"], 2 / 9, abs_tol=1e-6) and read["share_UB"] == 0
    assert math.isclose(sum(r["share_UF"] for r in rows.values()), 1, abs_tol=1e-5)
    assert math.isclose(sum(r["share_UB"] for r in rows.values()), 1, abs_tol=1e-5)
    first = circuit_difference(UF, UB, ("UF", "UB"))[0]  # the group the circuits weigh most differently comes first
    assert (first["position"], first["kind"], first["writer"]) == ("copy", "value", "o+1")


def test_difference_refuses_an_empty_circuit_and_a_repeated_edge():
    with pytest.raises(ValueError, match="UB circuit has no edges"):
        circuit_difference(UF, circuit("UB", []), ("UF", "UB"))
    with pytest.raises(ValueError, match="appears twice"):
        circuit_difference(circuit("UF", UF_EDGES + UF_EDGES[:1]), UB)


def test_a_path_runs_through_reads_from_their_source_roles_and_queries_in_place():
    edges = [E("residual", "logits", "a1.0", "c"), E("value", "a1.0", "a1.0.v", "c", "o", sources="s"),
             E("residual", "a1.0.v", "a0.0", "s"), E("residual", "a1.0.v", "a0.1", "sep"),  # no read of sep keys
             E("residual", "a1.0.q", "a0.2", "c"), E("residual", "a1.0.q", "a0.3", "sep")]
    live = wired_nodes(circuit("UB", edges))
    assert ("a0.0", "s") in live        # its value at s is read from c, where head 1.0 writes the logits
    assert ("a0.1", "sep") not in live  # a value no read of the circuit takes
    assert ("a0.2", "c") in live        # the query at the head's own role
    assert ("a0.3", "sep") not in live  # a query at sep feeds head 1.0 at sep, which reaches nothing


def test_without_reads_a_key_value_input_feeds_its_group_at_its_role_and_later():
    def wired(heads_per_kv, *edges):
        return wired_nodes(circuit("UB", edges, grain="positions"), heads_per_kv)

    logits = E("residual", "logits", "a1.2", "c1")
    assert ("a0.0", "s0") not in wired(2, logits, E("residual", "a1.0.v", "a0.0", "s0"))  # key/value head 0: heads 1.0, 1.1
    assert ("a0.0", "s0") in wired(3, logits, E("residual", "a1.0.v", "a0.0", "s0"))      # ... or 1.0 - 1.2; s0 before c1
    assert ("a0.0", "c1") in wired(2, logits, E("residual", "a1.1.k", "a0.0", "c1"))      # its own position
    assert ("a0.0", "c2") not in wired(2, logits, E("residual", "a1.1.k", "a0.0", "c2"))  # a key after the output
    late = E("residual", "a1.1.v", "a0.0", "prompt@4")
    assert ("a0.0", "prompt@4") not in wired(2, E("residual", "logits", "a1.2", "prompt@1"), late)  # 4 after 1
    assert ("a0.0", "prompt@4") in wired(2, E("residual", "logits", "a1.2", "prompt@6"), late)


def test_head_wiring_names_heads_present_but_not_wired_to_the_answer():
    rows = head_wiring({"UF": UF, "UB": UB}, ["a0.0", "a0.1", "a1.0"])
    got = {(r["circuit"], r["head"]): (r["edges_out"], r["reads"], r["wired"]) for r in rows}
    assert got[("UF", "a0.0")] == (1, 0, True)
    assert got[("UB", "a0.0")] == (0, 0, False)
    assert got[("UB", "a0.1")] == (1, 0, False)   # in the UB circuit, but the query head 1.1 it feeds reaches nothing
    assert got[("UF", "a1.0")] == (1, 1, True) and got[("UB", "a1.0")] == (2, 0, True)


def test_query_heads_per_key_value_head_come_from_the_reads():
    assert heads_per_kv_head([E("value", "a18.6", "a18.2.v", "c", "o")], 9) == 3  # SmolLM2: 9 query heads on 3
    assert heads_per_kv_head([E("value", "a1.1", "a1.1.v", "c", "o")], 4) == 1
    assert heads_per_kv_head([E("key", "a0.3", "a0.1.k", "c", "o+1")], 4) == 2
    assert heads_per_kv_head([E("residual", "a1.3.v", "embed", "s")], 4) == 1    # no read: as many key/value heads as needed


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


def test_find_circuit_verifies_the_top_edges_exactly_and_leaves_the_rest_empty(planted):
    from interp.interventions.circuits.find import find_circuit

    found = find_circuit(planted["planted-ub"], "UB", length=3, n=2, method="top-k", steps=1, n_random=0, minimality=False,
                         fractions=(0.0, 0.01, 1.0), verify=3)
    assert len(found) > 3 and [e.exact is not None for e in found.edges] == [True] * 3 + [False] * (len(found) - 3)
    assert all(e.exact < 0 for e in found.edges[:3])
    # the planted route runs through every one of them: removing one alone loses most of the gap
    assert all(-e.exact > 0.5 * (found.clean_metric - found.empty_metric) for e in found.edges[:3])


# --------------------------------------------------------------------------- the script, on published circuits


def _publish(folder: Path, found: Circuit, variant: str = "few-shot") -> Path:
    """``found`` as analyses/find_circuit.py publishes it: the edge table with the circuit as its JSON's metadata."""
    parts = [found.task] + ([variant] if variant else []) + [f"L{found.config['length']}", found.method]
    write_table(found.rows(), folder / f"circuit_{found.model}_{'_'.join(parts)}", metadata=found.to_json())
    return folder / f"circuit_{found.model}_{'_'.join(parts)}.json"


def _published(folder: Path, uf=UF, ub=UB, variant="few-shot", scores=None) -> Path:
    """Model m's two circuits and its head scores (a full 2 x 2 grid), as find_circuit and score_heads publish them."""
    for found in (uf, ub):
        _publish(folder, found, variant)
    write_table(scores or [{"model": "m", "layer": layer, "head": h, "induction": 0.1 * h + 0.2 * layer, "anti_induction": 0.0,
                            "duplicate_v_composition": 0.5 - 0.1 * h} for layer in range(2) for h in range(2)],
                folder / "head_scores_m")
    out = folder / "out"
    out.mkdir(exist_ok=True)
    return out


@pytest.mark.parametrize("argv,message", [(["--tasks", "UF"], "--tasks"), (["--heads", "8.0"], "--heads"),
                                          (["--model", "nothing-here"], "--model")])
def test_circuit_difference_refuses_bad_arguments_in_one_line(argv, message, tmp_path, capsys):
    import circuit_difference
    from interp.cli import run

    base = ["--model", "scratch-ub", "--tasks", "UF,UB", "--out", str(tmp_path), "--results", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        run(circuit_difference.main, base + argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err.strip().splitlines()[-1] and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--heads", "8.0"], ["--tasks", "UF"], ["--method", "best"], ["--length", "0"]])
def test_bad_arguments_are_refused_before_torch_is_imported(argv, tmp_path):
    import subprocess

    script = Path(__file__).resolve().parents[1] / "analyses" / "circuit_difference.py"
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['circuit_difference.py', '--model', 'm', '--out', {str(tmp_path)!r}, *{argv!r}]; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and f"argument {argv[0]}" in done.stderr.strip().splitlines()[-1], done.stderr
    assert "Traceback" not in done.stderr and not list(tmp_path.iterdir())


def test_circuit_difference_script_writes_both_tables_and_says_the_difference(tmp_path, capsys):
    import circuit_difference

    out = _published(tmp_path)
    assert circuit_difference.main(["--model", "m", "--results", str(tmp_path), "--out", str(out), "--quiet",
                                    "--heads", "a0.0,a0.1"]) == 0
    wiring = {(r["circuit"], r["head"]): r["wired"] for r in read_csv(out / "circuit_wiring_m_UF-UB_few-shot_L5_masks.csv")}
    assert wiring == {("UF", "a0.0"): True, ("UF", "a0.1"): False, ("UB", "a0.0"): False, ("UB", "a0.1"): False}
    difference = read_csv(out / "circuit_difference_m_UF-UB_few-shot_L5_masks.csv")
    assert {(r["position"], r["kind"], r["writer"]) for r in difference} >= {("copy", "value", "o+1"), ("copy", "residual", "head")}
    words = " ".join(capsys.readouterr().out.split())
    assert "UF against UB on m (few-shot, length 5, masks): UF: 4 of 500 role edges keep 0.90 of the gap" in words
    assert "UF leans more on value reads from the copy to o+1 (0.22 of its |score|, UB 0.00)" in words
    assert "Wired to the logits in UF only: head 0.0; in neither: head 0.1." in words
    assert "In the UB circuit but not wired to the logits: head 0.1." in words


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


def test_the_pair_is_the_one_both_tasks_have_else_the_error_lists_them(tmp_path, capsys):
    import circuit_difference

    out = _published(tmp_path)  # one pair: no --variant, --length or --method needed
    assert circuit_difference.main(["--model", "m", "--results", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    for path in out.iterdir():
        path.unlink()
    line = _refused(tmp_path, capsys, "--variant", "")
    assert "--variant: no pair of circuits with format and counterfactual ''; pairs there: 'few-shot' L5 masks" in line
    for task, edges in (("UF", UF_EDGES), ("UB", UB_EDGES)):  # a second length, and a method only UB has
        _publish(tmp_path, circuit(task, edges[:2], length=4))
    _publish(tmp_path, circuit("UB", UB_EDGES, method="top-k"))
    line = _refused(tmp_path, capsys)
    assert "--length: both circuits are published under several lengths (4, 5); name one with --length" in line
    assert circuit_difference.main(["--model", "m", "--results", str(tmp_path), "--out", str(out), "--quiet", "--length", "4"]) == 0
    assert (out / "circuit_wiring_m_UF-UB_few-shot_L4_masks.csv").exists()
    for path in out.iterdir():
        path.unlink()
    line = _refused(tmp_path, capsys, "--method", "top-k")
    assert "--method: no pair of circuits with method 'top-k'; pairs there: 'few-shot' L4 masks, 'few-shot' L5 masks" in line
    line = _refused(tmp_path, capsys, "--tasks", "UF,UR")
    assert "--model: no UF and UR circuits of m at one format, length and method" in line and "UR: none" in line


def _edit(path: Path, change) -> None:
    """Apply ``change`` to the circuit saved in a published JSON (its metadata)."""
    data = json.loads(path.read_text())
    change(data["metadata"])
    path.write_text(json.dumps(data))


def _uf(d: Path) -> Path:
    return d / "circuit_m_UF_few-shot_L5_masks.json"


def _ub(d: Path) -> Path:
    return d / "circuit_m_UB_few-shot_L5_masks.json"


def _every_score(value):
    def change(meta):
        for edge in meta["edges"]:
            edge["score"] = value
    return change


def _set_edge(index, **fields):
    def change(meta):
        meta["edges"][index].update(fields)
    return change


@pytest.mark.parametrize("damage, fragment", [
    # the UB circuit is UF's file copied over it: the circuit still says UF
    (lambda d: _ub(d).write_text(_uf(d).read_text()),
     "circuit_m_UB_few-shot_L5_masks.json: task is 'UF', expected 'UB', the task the file name says"),
    # ... and with its task edited to match
    (lambda d: (_ub(d).write_text(_uf(d).read_text()), _edit(_ub(d), lambda m: m.update(task="UB"))),
     "circuit_m_UB_few-shot_L5_masks.json holds the edges and scores of"),
    # another model's circuit under m's name
    (lambda d: _edit(_uf(d), lambda m: m.update(model="other")),
     "circuit_m_UF_few-shot_L5_masks.json: model is 'other', expected 'm', the model the file name says"),
    # a circuit of another length under this length's name
    (lambda d: _edit(_uf(d), lambda m: m["config"].update(length=4)),
     "circuit_m_UF_few-shot_L5_masks.json: length is 4, expected 5, the length the file name says"),
    # every score NaN, or not measured
    (lambda d: _edit(_uf(d), _every_score(float("nan"))),
     "circuit_m_UF_few-shot_L5_masks.json, edge 1 ('logits <- a1.0 @ c'): score is nan, expected a finite number"),
    (lambda d: _edit(_ub(d), _every_score(None)),
     "circuit_m_UB_few-shot_L5_masks.json, edge 1 ('logits <- a1.0 @ c'): score is None, expected a finite number"),
    # a reader of a layer and head the model does not have
    (lambda d: _edit(_uf(d), _set_edge(2, reader="a99.99.q")),
     "edge 3 ('a99.99.q <- a0.0 @ s'): reader is 'a99.99.q', expected a reader of the model"),
    (lambda d: _edit(_ub(d), _set_edge(2, writer="a0.7")),
     "circuit_m_UB_few-shot_L5_masks.json, edge 3 ('a1.1.q <- a0.7 @ c'): writer is 'a0.7', expected a writer of the model"),
    # an attention read by a head the model does not have, or of another head's value
    (lambda d: _edit(_uf(d), _set_edge(1, reader="a1.5")), "edge 2 ('a1.5 @ c reads o+1 by value'): reader a1.5 is not a head"),
    (lambda d: _edit(_uf(d), _set_edge(1, writer="a1.1.v")),
     "writer is 'a1.1.v', expected the value input a1.0.v that head a1.0 reads"),
    # no edges, or one edge twice
    (lambda d: _edit(_ub(d), lambda m: m.update(edges=[])), "circuit_m_UB_few-shot_L5_masks.json: the circuit has no edges"),
    (lambda d: _edit(_ub(d), lambda m: m.update(edges=m["edges"] + m["edges"][:1])),
     "circuit_m_UB_few-shot_L5_masks.json, edge 4 ('logits <- a1.0 @ c') appears twice"),
    # not a circuit, and not JSON
    (lambda d: _uf(d).write_text('{"metadata": {}, "rows": []}'), "circuit_m_UF_few-shot_L5_masks.json: not a saved circuit"),
    (lambda d: _uf(d).write_text('{"metadata": '), "circuit_m_UF_few-shot_L5_masks.json: not readable as JSON"),
    # a NaN head score (the default heads are chosen by them)
    (lambda d: (d / "head_scores_m.csv").write_text((d / "head_scores_m.csv").read_text().replace("m,0,1,0.1,", "m,0,1,nan,")),
     "head_scores_m.csv, line 3: induction is nan, expected a number in [0, 1]"),
    # no head scores to check the heads against
    (lambda d: (d / "head_scores_m.csv").unlink(), "--model: no head_scores_m.csv in"),
])
def test_circuit_difference_refuses_impossible_circuits_in_one_line(tmp_path, capsys, damage, fragment):
    _published(tmp_path)
    damage(tmp_path)
    line = _refused(tmp_path, capsys)
    assert fragment in line, line


@pytest.mark.parametrize("heads, fragment", [("a999.0", "--heads: a999.0 is not a head of the model (layers 0-1, heads 0-1"),
                                             ("a0.0,a1.2", "--heads: a1.2 is not a head")])
def test_circuit_difference_refuses_heads_the_model_lacks(tmp_path, capsys, heads, fragment):
    _published(tmp_path)
    assert fragment in _refused(tmp_path, capsys, "--heads", heads)
