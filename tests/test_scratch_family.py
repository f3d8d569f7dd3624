"""The from-scratch family (interp.experiments.scratch_family*): names and loading by name, the model kept
at an intermediate step being a shorter run's model, route and edge rows from a tiny configuration, and a
killed study that continues without training or measuring twice."""

from dataclasses import replace

import pytest
import torch

from interp.core.journal import RowJournal
from interp.experiments import scratch_family, scratch_family_train
from interp.experiments.scratch_family import FAMILY_ROW_SHAPE, family_study, summary_rows
from interp.experiments.scratch_family_measure import MeasureConfig
from interp.experiments.scratch_family_train import FAMILY_SCRATCH, FamilyConfig, FamilyRun, family_root, train_run
from interp.models import ModelNotFoundError, load_hf_model, load_model
from interp.models.trained import FamilyName, trained_folder

TINY = replace(FAMILY_SCRATCH, d_model=16, n_heads=2, train_range=(1, 5), test_bins=((6, 6),), batch_size=4,
               eval_every=2, eval_examples=2, warmup_frac=0.0)
MEASURE = MeasureConfig(route_lengths=(3,), route_n=4, edge_lengths=(3,), edge_n=4, batch_size=4)


def tiny_family(**changes) -> FamilyConfig:
    return replace(FamilyConfig(tasks=("UB",), positionals=("nope",), seeds=(1,), durations=(2, 4), scratch=TINY,
                                id_examples=2), **changes)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_family_name_reads_back_and_a_missing_model_names_the_script(cache):
    name = FamilyName("UB", "absolute", 2, 600)
    assert FamilyName.parse(name.name) == name and name.name == "scratch-ub-absolute-s2-600"
    assert FamilyName.parse("scratch-ub-alibi-s1-600") is None and FamilyName.parse("scratch-ub-rope-s1-0") is None
    with pytest.raises(ModelNotFoundError, match=r"analyses/scratch_family.py --tasks UB --positionals absolute --seeds 2"):
        load_model(name.name, device="cpu")
    assert trained_folder.__module__ == "interp.models.trained"
    with pytest.raises(ModelNotFoundError, match="was not found"):  # other names go on to the hub lookup as before
        load_model("scratch-ub-alibi-s1-600", device="cpu")


def test_a_tiny_family_trains_saves_loads_by_name_and_yields_route_and_edge_rows(cache):
    tables = family_study(tiny_family(), MEASURE)
    names = [row["model"] for row in tables["models"]]
    assert names == ["scratch-ub-nope-s1-2", "scratch-ub-nope-s1-4"]
    assert all((family_root() / name / "config.json").exists() for name in names)
    assert not (family_root() / "runs" / "scratch-ub-nope-s1").exists()  # its checkpoints go once its models are built
    removals = {(r["route"], r["kind"], r["test"], r["counterfactual"]) for r in tables["routes"]}
    assert len(removals) == 2 * (3 + 1 + 3) * 4  # (value, key) x (3 alone, o-1+o, 3 kept alone) x 4 counterfactuals
    assert sorted({r["model"] for r in tables["routes"]}) == names and len(tables["routes"]) == 2 * len(removals)
    assert all(r["n"] == 4 and r["length"] == 3 and r["accuracy_lo"] <= r["accuracy"] <= r["accuracy_hi"]
               for r in tables["routes"])
    assert [(r["model"], r["condition"]) for r in tables["edges"]] == [
        (n, c) for n in names for c in ("none", "induction", "anti_induction")]
    assert tables["circuits"] == []  # the hook yields nothing until the circuit pipeline lands
    summary = summary_rows(tables["models"], tables["routes"], tables["edges"])
    assert [(r["model"], r["length"]) for r in summary] == [(n, 3) for n in names]
    assert all({"share_om1_lo", "need_om1_o_hi", "acc_anti_hi", "learned_route", "carrying_routes", "edges_needed"}
               <= set(r) for r in summary)
    assert {r["learned_route"] for r in summary} == {"not learned"}  # 4 steps teach nothing; reported, not dropped
    # loaded by name: the saved model, with its position table still zero (no position encoding)
    hf, _ = load_hf_model("scratch-ub-nope-s1-4")
    assert torch.count_nonzero(hf.transformer.wpe.weight) == 0
    assert load_model("scratch-ub-nope-s1-2", device="cpu").cfg.n_layers == TINY.n_layers


def test_the_model_kept_at_a_step_is_the_model_a_run_of_that_many_steps_ends_with(tmp_path, monkeypatch):
    run = FamilyRun("UF", "absolute", 3)
    weights = {}
    for durations in ((2, 4), (2,)):
        monkeypatch.setenv("INTERP_CACHE", str(tmp_path / str(len(durations))))
        train_run(run, tiny_family(durations=durations))
        weights[durations] = load_hf_model("scratch-uf-absolute-s3-2")[0].state_dict()
    assert weights[(2, 4)].keys() == weights[(2,)].keys()
    assert all(torch.equal(weights[(2, 4)][k], weights[(2,)][k]) for k in weights[(2,)])


def test_a_killed_study_continues_and_built_models_are_not_trained_again(cache, tmp_path, monkeypatch):
    family = tiny_family(positionals=("rope", "nope"), durations=(4,))
    stem = tmp_path / "scratch_family"
    calls = {"fit": [], "measure": []}
    real_fit, real_measure = scratch_family_train.fit, scratch_family.measure_model

    def counting_fit(task, positional, *args, **kwargs):
        calls["fit"].append(positional)
        return real_fit(task, positional, *args, **kwargs)

    def measure(model, name, task, config):
        calls["measure"].append(name)
        if name.startswith("scratch-ub-nope") and len(calls["measure"]) == 2:
            raise KeyboardInterrupt  # killed while measuring the second run: its models are built, not journalled
        return real_measure(model, name, task, config)

    monkeypatch.setattr(scratch_family_train, "fit", counting_fit)
    monkeypatch.setattr(scratch_family, "measure_model", measure)
    with pytest.raises(KeyboardInterrupt), RowJournal(stem, {"v": 1}, FAMILY_ROW_SHAPE) as journal:
        family_study(family, MEASURE, journal=journal)
    assert calls == {"fit": ["rope", "nope"], "measure": ["scratch-ub-rope-s1-4", "scratch-ub-nope-s1-4"]}
    calls = {"fit": [], "measure": []}
    with RowJournal(stem, {"v": 1}, FAMILY_ROW_SHAPE) as journal:
        tables = family_study(family, MEASURE, journal=journal)
    # the first run comes from the journal; the second is measured again but not trained again
    assert calls == {"fit": [], "measure": ["scratch-ub-nope-s1-4"]}
    assert [row["model"] for row in tables["models"]] == ["scratch-ub-rope-s1-4", "scratch-ub-nope-s1-4"]
    with pytest.raises(ValueError, match="another configuration"):  # a built model of another recipe is refused
        train_run(FamilyRun("UB", "nope", 1), replace(family, scratch=replace(TINY, lr=5e-4)))


@pytest.mark.parametrize("kill", ["before the snapshot of step 2", "at step 3"])
def test_a_run_killed_mid_training_ends_with_the_models_of_an_uninterrupted_one(tmp_path, monkeypatch, kill):
    run, family = FamilyRun("UB", "rope", 2), tiny_family()
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "whole"))
    train_run(run, family)
    whole = {steps: load_hf_model(f"scratch-ub-rope-s2-{steps}")[0].state_dict() for steps in (2, 4)}

    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "killed"))
    real_keep = scratch_family_train._keep_snapshots

    def killing(run_dir, steps):
        keep = real_keep(run_dir, steps)

        def on_step(step, model):
            if kill.startswith("before") and step == 2:
                raise KeyboardInterrupt  # after step 2's checkpoint, before its snapshot
            keep(step, model)
            if step == 3:
                raise KeyboardInterrupt
        return on_step

    monkeypatch.setattr(scratch_family_train, "_keep_snapshots", killing)
    with pytest.raises(KeyboardInterrupt):
        train_run(run, family)
    assert (family_root() / "runs" / run.label / "checkpoint.safetensors").exists()
    monkeypatch.setattr(scratch_family_train, "_keep_snapshots", real_keep)
    train_run(run, family)
    for steps in (2, 4):
        got = load_hf_model(f"scratch-ub-rope-s2-{steps}")[0].state_dict()
        assert all(torch.equal(got[k], whole[steps][k]) for k in whole[steps]), steps
