"""How weak a planted circuit each instrument still finds: the planted models of
[`interp.models.planted`][interp.models.planted] at falling ``strength`` (planted weights mixed with seeded random
ones), each instrument asked to find the heads put there.

One row per (circuit, strength, noise seed, instrument): ``found`` (did the instrument name the
planted head(s)), ``value`` (what it measured for them), ``runner_up`` (the best other head, where
the instrument ranks heads) and the circuit's clean accuracy. Instruments:

* ``score:<name>``: the head score ranks the planted head first (``interp.measure.head_scores``,
  ``interp.measure.mechanism_scores``);
* ``ablation:zero`` / ``ablation:mean``: ablating the head that carries the task halves its
  accuracy or worse (and the model solved it at least half the time to begin with);
* ``sweep``: the exact single-head sweep (``interp.interventions.sweep``) ranks the heads the task needs first;
* ``screen:<name>``: an attribution screen (``interp.interventions.attribution``) does the same; `SCREENS`
  holds the screens, so a new one (``first-order`` plain attribution patching, ``atp*`` with the QK fix) is one more entry;
* ``edges``: cutting the paper's edges (``interp.interventions.edges``: induction keys for UF, anti-induction
  values for UB) halves the accuracy or worse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.executor import Executor, SerialExecutor
from interp.interventions.ablation import ablation_hooks, compute_head_means
from interp.interventions.attribution import attribution_sweep
from interp.experiments.edge_study import EdgeStudyConfig, edge_study
from interp.measure.evaluate import evaluate_task, task_prompts
from interp.core.heads import Head
from interp.measure.mechanism_scores import all_head_scores
from interp.models.planted import BACKWARD_HEAD, HEAD_LEVEL_ANTI_HEAD, INDUCTION_HEAD, PREVIOUS_TOKEN_HEAD
from interp.prompts import EncodedPrompt, PromptConfig, encode_prompts
from interp.interventions.sweep import head_sweep
from interp.core.tables import as_mapping

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

Screen = Callable[["TransformerBridge", Sequence[EncodedPrompt]], Float[Tensor, "layer head_index"]]
ZERO_SHOT = PromptConfig(n_shots=0)


def _first_order_screen(model: TransformerBridge, encoded: Sequence[EncodedPrompt]) -> Float[Tensor, "layer head_index"]:
    """Plain attribution patching's estimate of each head's zero-ablation effect on the answer log-prob."""
    return attribution_sweep(model, encoded, "zero", progress=False, screen="first-order").delta_logprob()


def _atp_star_screen(model: TransformerBridge, encoded: Sequence[EncodedPrompt]) -> Float[Tensor, "layer head_index"]:
    """AtP*'s estimate (the QK fix through the softmax; the screen's default) of the same effect."""
    return attribution_sweep(model, encoded, "zero", progress=False, screen="atp*").delta_logprob()


SCREENS: dict[str, Screen] = {"first-order": _first_order_screen, "atp*": _atp_star_screen}


@dataclass(frozen=True)
class PlantedCircuit:
    """A planted model, its task, the heads the task needs, the head that carries it, the edge
    condition that should break it, and the head each score should rank first."""

    model: str
    task: str
    needed: tuple[Head, ...]
    carrier: Head
    edge_condition: str
    score_targets: tuple[tuple[str, Head], ...]


CIRCUITS: dict[str, PlantedCircuit] = {
    "UF": PlantedCircuit("planted-uf", "UF", (PREVIOUS_TOKEN_HEAD, INDUCTION_HEAD), INDUCTION_HEAD, "induction",
                         (("induction", INDUCTION_HEAD), ("previous_token", PREVIOUS_TOKEN_HEAD),
                          ("k_composition", INDUCTION_HEAD))),
    "UB": PlantedCircuit("planted-ub", "UB", (PREVIOUS_TOKEN_HEAD, BACKWARD_HEAD), BACKWARD_HEAD, "anti_induction",
                         (("anti_induction", HEAD_LEVEL_ANTI_HEAD), ("previous_token", PREVIOUS_TOKEN_HEAD),
                          ("duplicate_token", BACKWARD_HEAD), ("v_composition", BACKWARD_HEAD),
                          ("duplicate_v_composition", BACKWARD_HEAD))),
}


@dataclass(frozen=True)
class SensitivityConfig:
    strengths: tuple[float, ...] = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    circuits: tuple[str, ...] = ("UF", "UB")
    length: int = 10
    n_examples: int = 20
    n_sequences: int = 20  # probe sequences for the head scores
    edge_length: int = 5
    edge_n: int = 10

    def __post_init__(self) -> None:
        if not self.strengths or any(not 0.0 <= s <= 1.0 for s in self.strengths):
            raise ValueError(f"strengths={self.strengths}: give values between 0 and 1")
        unknown = set(self.circuits) - set(CIRCUITS)
        if unknown or not self.circuits:
            raise ValueError(f"circuits={self.circuits}: expected some of {tuple(CIRCUITS)}")
        for name in ("length", "n_examples", "n_sequences", "edge_n"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if not self.seeds:
            raise ValueError("seeds: give at least one noise seed")


@dataclass(frozen=True)
class InstrumentVerdict:
    """What one instrument made of one planted model: did it name the planted head(s), what it
    measured for them, and the best other head's value (NaN where the instrument ranks nothing)."""

    instrument: str
    target: str
    found: bool
    value: float
    runner_up: float


@dataclass(frozen=True)
class SensitivityRow:
    """One instrument on one planted model (circuit, strength, noise seed): a row of ``planted_sensitivity``."""

    circuit: str
    model: str
    strength: float
    seed: int
    instrument: str
    target: str
    found: bool
    value: float
    runner_up: float
    clean_accuracy: float


@dataclass(frozen=True)
class FoundShareRow:
    """Per circuit, instrument and strength: the share of noise seeds on which the plant was found."""

    circuit: str
    instrument: str
    strength: float
    n_seeds: int
    found: float
    mean_value: float
    mean_clean_accuracy: float


@dataclass(frozen=True)
class FoundDownToRow:
    """The lowest strength down to which an instrument found the plant on every seed (None: not even at full)."""

    circuit: str
    instrument: str
    found_down_to: float | None


def _ranked(table: Float[Tensor, "layer head_index"], descending: bool) -> list[Head]:
    order = torch.argsort(table.flatten(), descending=descending, stable=True)
    return [Head(int(i) // table.shape[1], int(i) % table.shape[1]) for i in order]


def _ranking(instrument: str, target: str, table: Float[Tensor, "layer head_index"], targets: Sequence[Head],
             descending: bool) -> InstrumentVerdict:
    """Found when every target ranks strictly above every other head (a tie finds nothing);
    value: the weakest target's, runner-up: the best other head's."""
    ranked = _ranked(table, descending)
    others = [h for h in ranked if h not in targets]
    values = [float(table[h]) for h in targets]
    weakest = min(values) if descending else max(values)
    runner_up = float(table[others[0]]) if others else float("nan")
    separated = weakest > runner_up if descending else weakest < runner_up
    return InstrumentVerdict(instrument, target, bool(separated), weakest, runner_up)


def _broken(clean: float, after: float) -> bool:
    return clean >= 0.5 and after <= 0.5 * clean


def _instrument_rows(model: TransformerBridge, circuit: PlantedCircuit,
                    config: SensitivityConfig) -> tuple[list[InstrumentVerdict], float]:
    """Every instrument's verdict on one planted model (see the module docstring), and the
    circuit's clean accuracy."""
    scores = all_head_scores(model, n_sequences=config.n_sequences, progress=False)
    rows = [_ranking(f"score:{name}", str(target), scores[name], [target], True) for name, target in circuit.score_targets]
    prompts = task_prompts(model, circuit.task, config.length, config.n_examples, prompt_config=ZERO_SHOT)
    encoded = encode_prompts(model.tokenizer, prompts, prepend_bos=False)
    clean = evaluate_task(model, circuit.task, config.length, config.n_examples, prompt_config=ZERO_SHOT,
                          progress=False).accuracy
    means = compute_head_means(model, encoded, progress=False)
    for kind in ("zero", "mean"):
        after = evaluate_task(model, circuit.task, config.length, config.n_examples, prompt_config=ZERO_SHOT,
                              fwd_hooks=ablation_hooks(model, [circuit.carrier], kind, means), progress=False).accuracy
        rows.append(InstrumentVerdict(f"ablation:{kind}", str(circuit.carrier), _broken(clean, after), after,
                                      float("nan")))
    sweep = head_sweep(model, encoded, progress=False)
    table = sweep.delta_logprob_table(model.cfg.n_layers, model.cfg.n_heads)
    needed = ";".join(map(str, circuit.needed))
    rows.append(_ranking("sweep", needed, table, circuit.needed, False))
    for name, screen in SCREENS.items():
        rows.append(_ranking(f"screen:{name}", needed, screen(model, encoded), circuit.needed, False))
    rows.append(_edge_verdict(model, circuit, config))
    return rows, clean


def _edge_verdict(model: TransformerBridge, circuit: PlantedCircuit, config: SensitivityConfig) -> InstrumentVerdict:
    """Cutting the circuit's edge condition halves the accuracy or worse; runner-up: the other condition's."""
    edge_config = EdgeStudyConfig(tasks=(circuit.task,), lengths=(config.edge_length,), n=config.edge_n, n_shots=1,
                                  prepend_bos=True)  # one string: the planted heads find the earliest occurrence
    edge_rows, _ = edge_study(model, edge_config, progress=False)
    by_condition = {row["condition"]: row["accuracy"] for row in map(as_mapping, edge_rows)}
    other = "anti_induction" if circuit.edge_condition == "induction" else "induction"
    return InstrumentVerdict("edges", circuit.edge_condition,
                             _broken(by_condition["none"], by_condition[circuit.edge_condition]),
                             by_condition[circuit.edge_condition], by_condition[other])


def sensitivity_study(config: SensitivityConfig = SensitivityConfig(), progress: bool = False,
                      executor: Executor | None = None) -> list[SensitivityRow]:
    """Rows for every circuit, strength and noise seed (see the module docstring); the cells run
    on ``executor`` (default: one after the other here), each building its own planted model.

    >>> rows = sensitivity_study(SensitivityConfig(strengths=(1.0, 0.5), seeds=(0,)))  # doctest: +SKIP
    """
    cells = [(c, s, seed) for c in config.circuits for s in config.strengths for seed in config.seeds]
    parts: dict[int, list[SensitivityRow]] = {}
    bar = tqdm(total=len(cells), desc="planted sensitivity", disable=not progress)
    for index, rows in (executor or SerialExecutor()).map(_sensitivity_cell, cells, shared=config):
        parts[index] = rows
        bar.update()
    bar.close()
    return [row for index in sorted(parts) for row in parts[index]]


def noisy_planted_model(model: str, strength: float, seed: int) -> TransformerBridge:
    """The planted model ``model`` at ``strength``, its noise drawn with ``seed`` (``load_model`` has no
    noise seed, so the bridge is built here), on the CPU.

    >>> noisy_planted_model("planted-ub", 0.5, seed=1).cfg.n_layers
    2
    """
    from interp.models.loading import bridge_from_hf
    from interp.models.planted import planted_hf_model

    name = f"{model}@{strength}"
    hf_model, tokenizer = planted_hf_model(name, seed=seed)
    return bridge_from_hf(hf_model, tokenizer, name, torch.device("cpu"))


def _sensitivity_cell(_model: None, config: SensitivityConfig, cell: tuple[str, float, int]) -> list[SensitivityRow]:
    """One circuit x strength x noise seed, on whichever worker runs it (module-level, so that it pickles)."""
    circuit_name, strength, seed = cell
    circuit = CIRCUITS[circuit_name]
    verdicts, clean = _instrument_rows(noisy_planted_model(circuit.model, strength, seed), circuit, config)
    return [SensitivityRow(circuit_name, circuit.model, strength, seed, v.instrument, v.target, v.found, v.value,
                           v.runner_up, clean) for v in verdicts]


def found_summary(rows: Sequence[SensitivityRow]) -> list[FoundShareRow]:
    """Per circuit, instrument and strength: the share of noise seeds on which the plant was found.

    >>> def row(strength, seed, found):
    ...     return SensitivityRow("UF", "planted-uf", strength, seed, "sweep", "0.1;1.0", found, -2.0, -0.1, 1.0)
    >>> rows = [row(1.0, 0, True), row(1.0, 1, True), row(0.5, 0, True), row(0.5, 1, False)]
    >>> [(r.strength, r.n_seeds, r.found) for r in found_summary(rows)]
    [(1.0, 2, 1.0), (0.5, 2, 0.5)]
    """
    groups: dict[tuple, list[SensitivityRow]] = {}
    for r in rows:
        groups.setdefault((r.circuit, r.instrument, float(r.strength)), []).append(r)
    return [FoundShareRow(c, i, s, len(g), sum(bool(r.found) for r in g) / len(g),
                          sum(float(r.value) for r in g) / len(g), sum(float(r.clean_accuracy) for r in g) / len(g))
            for (c, i, s), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[0][2]))]


def weakest_found(summary: Sequence[FoundShareRow]) -> list[FoundDownToRow]:
    """Per circuit and instrument, the lowest strength down to which every seed still found the
    plant at every strength tested (None when even full strength failed).

    >>> def row(strength, seed, found):
    ...     return SensitivityRow("UF", "planted-uf", strength, seed, "sweep", "0.1;1.0", found, -2.0, -0.1, 1.0)
    >>> rows = [row(1.0, 0, True), row(1.0, 1, True), row(0.5, 0, True), row(0.5, 1, False)]
    >>> weakest_found(found_summary(rows))  # at 0.5 one seed of two missed it
    [FoundDownToRow(circuit='UF', instrument='sweep', found_down_to=1.0)]
    """
    out: dict[tuple[str, str], float | None] = {}
    for row in summary:  # strengths descend within each (circuit, instrument)
        key = (row.circuit, row.instrument)
        if key not in out:
            out[key] = row.strength if row.found == 1.0 else None
        elif out[key] is not None and out[key] == _previous(summary, row) and row.found == 1.0:
            out[key] = row.strength
    return [FoundDownToRow(c, i, s) for (c, i), s in out.items()]


def _previous(summary: Sequence[FoundShareRow], row: FoundShareRow) -> float:
    strengths = [r.strength for r in summary if (r.circuit, r.instrument) == (row.circuit, row.instrument)]
    return strengths[strengths.index(row.strength) - 1]


__all__ = ["CIRCUITS", "SCREENS", "FoundDownToRow", "FoundShareRow", "InstrumentVerdict", "PlantedCircuit",
           "SensitivityConfig", "SensitivityRow", "found_summary", "noisy_planted_model", "sensitivity_study",
           "weakest_found"]
