"""Studies on a local Ray instance of 2 CPUs give the tables of the serial run: three studies, a
worker killed mid-cell, a driver stopped mid-study and run again."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from interp.core.executor import ModelSource, RayExecutor  # noqa: E402
from interp.core.journal import RowJournal  # noqa: E402
from interp.core.tables import write_table  # noqa: E402
from interp.data.tasks import get_task  # noqa: E402
from interp.experiments import (AblationConfig, ablation_prompt_sets, ablation_study, add_task_attention,  # noqa: E402
                                directional_bias)
from interp.experiments.head_ablation import ABLATION_COLUMNS, ABLATION_ROW_SHAPE  # noqa: E402
from interp.interventions.sweep import head_sweep  # noqa: E402
from interp.measure.encoding import encode_for  # noqa: E402
from interp.measure.evaluate import task_prompts  # noqa: E402
from interp.measure.head_scores import HeadScores, score_heads  # noqa: E402
from interp.models import load_model  # noqa: E402

TINY = ModelSource("tiny-llama cpu", partial(load_model, "tiny-llama", device="cpu"))
CONFIG = AblationConfig(tasks=("UF", "UB"), lengths=(5,), k=2, n_examples=6, kinds=("zero", "mean"), random_seeds=(0,))


@pytest.fixture(scope="module")
def executor():
    """One local Ray instance for the module, two single-threaded actors."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # The test module's own functions (the killing model source) travel by value to the workers.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    pool = RayExecutor(workers=2, cpus_per_worker=1).start()
    yield pool
    pool.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def scores(tiny_llama):
    return score_heads(tiny_llama, n_sequences=2, half_length=5, progress=False)


@pytest.fixture(scope="module")
def serial_ablation(tiny_llama, scores):
    return ablation_study(tiny_llama, scores, CONFIG, progress=False)


def _table_bytes(rows, folder: Path) -> bytes:
    written = write_table(rows, folder / "ablation_tiny-llama", ABLATION_COLUMNS)
    return b"".join(path.read_bytes() for path in written)


def test_three_studies_give_the_serial_tables(executor, tiny_llama, scores, serial_ablation, tmp_path):
    on_ray = ablation_study(tiny_llama, scores, CONFIG, progress=False, executor=executor, model_source=TINY)
    assert on_ray == serial_ablation
    assert _table_bytes(on_ray, tmp_path / "ray") == _table_bytes(serial_ablation, tmp_path / "serial")

    tasks, lengths = [get_task("UR"), get_task("UL"), get_task("UF")], [4, 6]
    serial = directional_bias(tiny_llama, tasks, lengths, n_examples=4, progress=False)
    assert directional_bias(tiny_llama, tasks, lengths, n_examples=4, progress=False, executor=executor,
                            model_source=TINY) == serial

    encoded = encode_for(tiny_llama, task_prompts(tiny_llama, "UF", 5, n_examples=5))
    serial_sweep = head_sweep(tiny_llama, encoded, progress=False).rows("UF", 5)
    assert head_sweep(tiny_llama, encoded, progress=False, executor=executor,
                      model_source=TINY).rows("UF", 5) == serial_sweep


def test_task_attention_scores_on_ray_write_the_serial_head_score_table(executor, tiny_llama, scores, tmp_path):
    """score_heads' task cells (one per task) on two actors: the same table, byte for byte."""
    prompt_sets = ablation_prompt_sets(tiny_llama, CONFIG)
    tables = []
    for name, kwargs in (("serial", {}), ("ray", {"executor": executor, "model_source": TINY})):
        with_attention = add_task_attention(tiny_llama, HeadScores(dict(scores.scores)), prompt_sets,
                                            CONFIG.prompt_config, **kwargs)
        assert {"attn_UF", "attn_UB"} <= set(with_attention.scores)
        written = write_table(with_attention.rows(), tmp_path / name / "head_scores_tiny-llama")
        tables.append(b"".join(path.read_bytes() for path in written))
    assert tables[0] == tables[1]


def _killing_load(marker: str):
    """The tiny model, in a worker that kills itself in its first forward pass (once in all)."""
    import torch

    model = load_model("tiny-llama", device="cpu")

    def die_once(module, args, output):
        handle.remove()
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return None
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    handle = torch.nn.modules.module.register_module_forward_hook(die_once)
    return model


def test_a_worker_killed_mid_cell_is_retried(executor, tiny_llama, scores, serial_ablation, tmp_path):
    marker = tmp_path / "killed"
    dying = ModelSource(f"tiny-llama dying {marker}", partial(_killing_load, str(marker)))
    pids = set(executor.worker_pids())
    rows = ablation_study(tiny_llama, scores, CONFIG, progress=False, executor=executor, model_source=dying)
    killed = int(marker.read_text())
    assert killed in pids and killed not in executor.worker_pids()  # that worker died and was replaced
    assert rows == serial_ablation


class DriverDies(BaseException):
    """The driver stopped between two cells (as a Ctrl-C or a kill would stop it)."""


def test_an_interrupted_driver_resumes_from_its_journal(executor, tiny_llama, scores, serial_ablation, tmp_path,
                                                          monkeypatch):
    stem = tmp_path / "ablation_tiny-llama"
    real_add = RowJournal.add

    def dies_after_three(journal, row):
        if len(journal.done()) == 3:
            raise DriverDies
        real_add(journal, row)

    monkeypatch.setattr(RowJournal, "add", dies_after_three)
    with pytest.raises(DriverDies), RowJournal(stem, {"run": "driver"}, ABLATION_ROW_SHAPE) as journal:
        ablation_study(tiny_llama, scores, CONFIG, progress=False, journal=journal, executor=executor, model_source=TINY)
    monkeypatch.setattr(RowJournal, "add", real_add)

    journal = RowJournal(stem, {"run": "driver"}, ABLATION_ROW_SHAPE)  # a new driver: the lock was released
    assert len(journal.done()) == 3
    resumed = ablation_study(tiny_llama, scores, CONFIG, progress=False, journal=journal, executor=executor,
                             model_source=TINY)
    assert resumed == serial_ablation
    assert len(journal.done()) == len(serial_ablation)  # only the missing cells were added
    journal.finish([asdict(row) for row in resumed], ABLATION_COLUMNS)
    assert not journal.path.exists()
