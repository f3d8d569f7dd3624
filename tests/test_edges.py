"""Edge patching (interp.interventions.edges): batched hooks against the per-query reference, on tiny Llama (MHA and 12/2 GQA),
Qwen2 and GPT-2 models; the branched forward; the protocol's prompts; analyses/patch_edges.py."""

import importlib.util
import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from transformer_lens.utilities import get_act_name
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from interp.interventions.ablation import HookCounter
from interp.interventions.edges import EdgePatch, Edges, attention_layout, capture_source_hooks, copying_prompts, cut, edge_patch_hooks
from interp.interventions.edges.branching import branch, run_branched
from interp.figures.edges import edge_figures, edge_layer_figure, edge_patching_figure
from interp.interventions.edges.reference import ReferencePatch, reference_run
from interp.experiments.edge_study import (CONDITIONS, EDGE_COLUMNS, EDGE_SWEEP_COLUMNS, Branch, EdgeRow, EdgeStudyConfig,
                                          EdgeSweepRow, branch_logits, edge_study)
from interp.experiments.edge_tables import upgrade_row
from interp.core.stats import binomial_stderr, mean_and_sem, wilson_interval
from interp.models import bridge_from_hf, tiny_tokenizer
from interp.core.tables import read_csv

ROOT = Path(__file__).resolve().parents[1]
ATOL = 1e-5
# Weights larger than the HF default (0.02) make attention peaked enough that every patch visibly moves the
# logits, so a misplaced edge would show far above ATOL.
INIT = 0.15


def tiny(arch: str):
    """Two-layer seeded models: Llama 4/4 heads, Llama 12/2 (Qwen2.5-1.5B's 6 query heads per key/value head),
    Qwen2 12/2 (with q/k/v biases) and GPT-2 4 heads (absolute positions, value biases)."""
    tok = tiny_tokenizer()
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    if arch == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                                           initializer_range=INIT, **ids))
    else:
        heads, kv = (4, 4) if arch == "llama" else (12, 2)
        config_class, model_class = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (LlamaConfig, LlamaForCausalLM)
        model = model_class(config_class(vocab_size=len(tok), hidden_size=8 * heads, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv,
                                         max_position_embeddings=256, initializer_range=INIT, tie_word_embeddings=False,
                                         **ids))
    return bridge_from_hf(model.eval(), tok, f"edges-{arch}", torch.device("cpu"))


@pytest.fixture(scope="module")
def models():
    built = {}

    def get(arch: str):
        if arch not in built:
            built[arch] = tiny(arch)
        return built[arch]

    return get


@pytest.fixture(scope="module")
def llama(models):
    return models("llama")


@pytest.fixture(scope="module")
def gpt2(models):
    return models("gpt2")


def random_tokens(seed: int, shape=(2, 12)) -> torch.Tensor:
    return torch.randint(5, 300, shape, generator=torch.Generator().manual_seed(seed))


# Different edges per row; row 0 has a query reading two sources, row 1 a self-edge.
EDGES = Edges(torch.tensor([[5, 7, 7, 11], [4, 6, 9, 9]]), torch.tensor([[2, 3, 6, 4], [1, 0, 5, 9]]))


def counterfactual(model, layout, tokens, positions):
    """Keys and values of another run at ``positions``: as scored (batched) and as hooked (reference)."""
    hooks, store = capture_source_hooks(layout, positions)
    names = [get_act_name(n, layer) for layer in range(layout.n_layers) for n in ("k", "v")]
    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=hooks)
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
    return store, cache


def reference_rows(cache, kind: str, n_layers: int) -> dict:
    return {layer: cache[get_act_name("k" if kind == "key" else "v", layer)] for layer in range(n_layers)}


@pytest.mark.parametrize("kind", ["key", "value"])
@pytest.mark.parametrize("arch,scope", [("llama", "all"), ("gqa", "all"), ("gqa", "subset"), ("qwen2", "all"),
                                        ("gpt2", "all"), ("gpt2", "subset")])
def test_batched_edges_equal_per_query_reference(models, arch, scope, kind):
    model = models(arch)
    layout = attention_layout(model)
    tokens, other = random_tokens(0), random_tokens(1)
    # heads 0 and n-1 sit in different key/value groups, so a subset also leaves heads that share their kv head
    layers, heads = (None, None) if scope == "all" else ((1,), (0, layout.n_heads - 1))
    store, cache = counterfactual(model, layout, other, EDGES.source)
    counter = HookCounter()
    patch = EdgePatch(kind, EDGES, store.at(kind, EDGES.source), layers, heads)
    with torch.no_grad():
        clean = model(tokens)
        batched = model.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(layout, [patch], counter))
    reference, _ = reference_run(model, tokens, [ReferencePatch(kind, EDGES, reference_rows(cache, kind, layout.n_layers),
                                                                layers, heads)])
    assert (batched - reference).abs().max() < ATOL
    assert (batched - clean).abs().max() > 1e-3  # the patch did something the comparison could miss
    expected = {"key": ("q", "attn_scores"), "value": ("v", "pattern", "z")}[kind]
    if layout.rotary and kind == "key":
        expected = ("rot_q", "attn_scores")
    assert counter.calls == {get_act_name(n, layer): 1 for layer in (layers or range(layout.n_layers)) for n in expected}


def test_counterfactual_cut_equals_reference(llama):
    """The cut alone (the study's pipeline tests cover it on GPT-2 too), with the values kept at the sources."""
    model = llama
    layout = attention_layout(model)
    prompts = copying_prompts(model.tokenizer, "UB", 3, 1, n_shots=2)
    edges = prompts.previous_token_edges()
    positions = torch.arange(prompts.string_start, prompts.copy_start).expand(1, -1)
    capture, store = capture_source_hooks(layout, positions)
    with torch.no_grad():
        batched = model.run_with_hooks(prompts.tokens, fwd_hooks=edge_patch_hooks(layout, [cut(edges)]) + capture)
        clean = model(prompts.tokens)
    names = [get_act_name("v", layer) for layer in range(layout.n_layers)]
    reference, cache = reference_run(model, prompts.tokens, [ReferencePatch("value", edges)], cache_names=names)
    assert (batched - reference).abs().max() < ATOL
    assert (batched - clean).abs().max() > 1e-2
    for layer in range(layout.n_layers):
        assert torch.allclose(store.values[layer], cache[names[layer]][:, prompts.string_start : prompts.copy_start], atol=ATOL)


def reference_protocol_logits(model, prompts) -> dict[str, torch.Tensor]:
    """The protocol done the slow way on whole prompts: logits at the scored positions per condition."""
    n_layers = model.cfg.n_layers
    names = [get_act_name(n, layer) for layer in range(n_layers) for n in ("k", "v")]
    _, cf = reference_run(model, prompts.tokens, [ReferencePatch("value", prompts.previous_token_edges())], names)
    scored = prompts.scored_positions()
    logits = {"none": model(prompts.tokens)[:, scored]}
    for condition, (edge_set, kind) in ((c, v) for c, v in CONDITIONS.items() if v is not None):
        patch = ReferencePatch(kind, prompts.edges(edge_set), reference_rows(cf, kind, n_layers))
        logits[condition] = reference_run(model, prompts.tokens, [patch])[0][:, scored]
    return logits


@pytest.mark.parametrize("fixture,task", [("llama", "UB"), ("gpt2", "UF")])
def test_study_pipeline_equals_reference(fixture, task, request):
    """Counterfactual + branched pass (trunk once, one branch per condition) = the protocol on whole prompts."""
    model = request.getfixturevalue(fixture)
    layout = attention_layout(model)
    prompts = copying_prompts(model.tokenizer, task, 3, 1, n_shots=2)
    branches = [Branch(condition) for condition in CONDITIONS]
    fast = branch_logits(model, layout, prompts, slice(None), branches)
    slow = reference_protocol_logits(model, prompts)
    for spec in branches:
        assert (fast[spec] - slow[spec.condition]).abs().max() < ATOL, spec
    for spec in branches[1:]:
        assert (fast[spec] - fast[branches[0]]).abs().max() > 1e-3, spec


@pytest.mark.parametrize("arch", ["gqa", "gpt2"])
def test_noop_patch_changes_nothing_and_every_hook_fires(models, arch):
    model = models(arch)
    layout = attention_layout(model)
    tokens = random_tokens(2)
    store, _ = counterfactual(model, layout, tokens, EDGES.source)  # the clean run's own keys and values
    patches = [EdgePatch(kind, EDGES, store.at(kind, EDGES.source)) for kind in ("key", "value")]
    counter = HookCounter()
    with torch.no_grad():
        clean = model(tokens)
        patched = model.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(layout, patches, counter))
    assert (patched - clean).abs().max() < 1e-5
    names = ("rot_q" if layout.rotary else "q", "attn_scores", "v", "pattern", "z")
    assert counter.calls == {get_act_name(n, layer): 1 for layer in range(layout.n_layers) for n in names}


def test_branches_equal_separate_runs(llama):
    layout = attention_layout(llama)
    tokens = random_tokens(3, (2, 14))
    trunk, continuation = tokens[:, :10], tokens[:, 10:]
    branched = branch(trunk, continuation, 3)
    edges = Edges(torch.tensor([[11, 12], [10, 13]]), torch.tensor([[3, 9], [0, 5]]))
    store, _ = counterfactual(llama, layout, random_tokens(4, (2, 14)), edges.source)
    patch = EdgePatch("key", edges, store.at("key", edges.source))
    with torch.no_grad():
        plain = llama(tokens)
        plain_patched = llama.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(layout, [patch]))
        moved = EdgePatch("key", branched.in_branch(edges, 2), patch.replacement)
        logits = run_branched(llama, branched, edge_patch_hooks(layout, [moved]), logits_start=0)
    assert (logits[:, :10] - plain[:, :10]).abs().max() < ATOL
    for index, expected in enumerate((plain, plain, plain_patched)):
        start = branched.branch_start(index)
        assert (logits[:, start : start + 4] - expected[:, 10:]).abs().max() < ATOL
    assert (plain_patched - plain).abs().max() > 1e-3
    with pytest.raises(ValueError, match="trunk"):
        branched.in_branch(Edges(torch.tensor([[12]]), torch.tensor([[11]])), 0)


@pytest.mark.parametrize("task", ["UF", "UB"])
def test_prompts_follow_the_protocol(task):
    tokenizer = tiny_tokenizer()
    prompts = copying_prompts(tokenizer, task, 4, 3, n_shots=3, prepend_bos=True)
    text = tokenizer.decode(prompts.tokens[0])
    assert text.startswith(tokenizer.bos_token) and text.endswith(tokenizer.eos_token)
    assert text.count(",") == 3 and text.count(".") == 2
    assert prompts.tokens.shape == (3, 1 + 3 * 10 - 1 + 1) and prompts.copy_start == 1 + 2 * 10 + 5
    string = prompts.strings[0]
    copy = tokenizer.decode(prompts.targets()[0]).replace(" ", "")
    assert copy == (string if task == "UF" else string[::-1]) and len(set(string)) == 4
    tokens = prompts.tokens[0]
    for query, source in zip(prompts.induction_edges().query[0], prompts.induction_edges().source[0]):
        assert tokens[source - 1] == tokens[query]  # the token after the earlier occurrence
    for query, source in zip(prompts.anti_induction_edges().query[0], prompts.anti_induction_edges().source[0]):
        assert tokens[source] == tokens[query] and prompts.string_start <= source < prompts.copy_start - 1
    previous = prompts.previous_token_edges()
    assert previous.query[0].tolist() == list(range(1, prompts.copy_start))
    other = copying_prompts(tokenizer, "UB" if task == "UF" else "UF", 4, 3, n_shots=3, prepend_bos=True)
    assert other.strings == prompts.strings  # UF and UB copy the same strings
    with pytest.raises(ValueError, match="length 27"):
        copying_prompts(tokenizer, task, 27, 1)
    with pytest.raises(ValueError, match="task 'NF'"):
        copying_prompts(tokenizer, "NF", 4, 1)


def test_intervals():
    assert wilson_interval(0, 10)[0] == 0.0 and 0.25 < wilson_interval(0, 10)[1] < 0.35
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(1 - hi) and 0.2 < lo < 0.3
    assert wilson_interval(10, 10)[1] == 1.0
    mean, se = mean_and_sem([1.0, 2.0, 3.0])
    assert mean == 2.0 and se == pytest.approx(1 / math.sqrt(3))


def _old_columns(row: dict) -> dict:
    """``row`` as the edge study wrote it before ``AnswerScores``/``Accuracy`` (n, accuracy_lo/hi, loss, ...)."""
    old = {}
    for key, value in row.items():
        if key == "n_examples":
            old |= {"n": value, "accuracy": row["accuracy"], "accuracy_lo": row["ci_low"], "accuracy_hi": row["ci_high"],
                    "loss": -row["mean_logprob"], "loss_se": row["mean_logprob_se"], "token_accuracy": row["token_accuracy"]}
        elif key == "delta_mean_logprob":
            old["delta_loss"] = -value
        elif key not in ("accuracy", "stderr", "ci_low", "ci_high", "mean_logprob", "mean_logprob_se", "token_accuracy"):
            old[key] = value
    return old


def test_study_rows_and_layer_sweep(llama):
    config = EdgeStudyConfig(tasks=("UF",), lengths=(3,), n=3, n_shots=2, batch_size=2, sweep_n=2)
    main_rows, sweep_rows = edge_study(llama, config, model_label="m", progress=False)
    assert all(isinstance(r, EdgeRow) for r in main_rows) and all(isinstance(r, EdgeSweepRow) for r in sweep_rows)
    def as_table_row(row, columns):
        values = asdict(row)
        return {c: values[c] for c in columns}

    main = [as_table_row(r, EDGE_COLUMNS) for r in main_rows]  # as the table's rows
    sweep = [as_table_row(r, EDGE_SWEEP_COLUMNS) for r in sweep_rows]
    assert [r["condition"] for r in main] == ["none", "induction", "anti_induction"] and all(r["n_examples"] == 3 for r in main)
    assert all(r["ci_low"] <= r["accuracy"] <= r["ci_high"] for r in main)
    for r in main:  # Accuracy's columns, the one interval convention
        assert (r["ci_low"], r["ci_high"]) == wilson_interval(round(r["accuracy"] * 3), 3)
        assert r["stderr"] == pytest.approx(binomial_stderr(r["accuracy"], 3)) and r["mean_logprob"] < 0
    assert {(r["edge"], r["layer"]) for r in sweep} == {(e, l) for e in ("induction", "anti_induction") for l in (0, 1)}
    assert all(r["n_examples"] == 2 for r in sweep)
    assert any(abs(r["delta_mean_logprob"]) > 1e-4 for r in sweep)
    # a table with the earlier columns upgrades to exactly the columns a run writes now
    for fresh in (main[0], sweep[0]):
        assert list(upgrade_row(_old_columns(fresh))) == list(fresh)
        assert upgrade_row(_old_columns(fresh)) == pytest.approx(fresh, nan_ok=True)
    with pytest.raises(ValueError, match="layer"):
        edge_study(llama, EdgeStudyConfig(tasks=("UF",), lengths=(3,), n=1, layers=(5,)), progress=False)


# --------------------------------------------------------------------------- the script


def load_script():
    spec = importlib.util.spec_from_file_location("patch_edges_script", ROOT / "analyses" / "patch_edges.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv,flag", [
    (["--tasks", "UF,NF"], "--tasks"), (["--lengths", "1"], "--lengths"), (["--lengths", "27"], "--lengths"),
    (["--n", "0"], "--n"), (["--layers", "x"], "--layers"), (["--model", "tiny-llama", "--layers", "2"], "--layers"),
    (["--model", "tiny-llama", "--heads", "0,4"], "--heads"), (["--sweep-n", "5", "--n", "2"], "--sweep-n"),
    (["--model", "tiny-llama", "--lengths", "26"], "--lengths"), (["--out", "/proc/no-such-dir"], "--out"),
])
def test_script_rejects_bad_input_before_loading(argv, flag, capsys, monkeypatch, tmp_path):
    script = load_script()
    monkeypatch.setattr(script, "load_model_from_args", lambda args: pytest.fail("model loaded despite bad input"))
    argv = ["--out", str(tmp_path), *argv] if "--out" not in argv else argv
    with pytest.raises(SystemExit) as exit_info:
        script.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in err and "error: argument" in err


def test_script_writes_tables_and_an_interrupted_run_keeps_them(tmp_path, capsys, monkeypatch):
    script = load_script()
    argv = ["--model", "tiny-llama", "--tasks", "UF", "--lengths", "3", "--n", "2", "--shots", "2", "--out", str(tmp_path),
            "--sweep-n", "1", "--quiet"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert "no intervention" in out and "per-layer sweep" in out
    table = tmp_path / "edge_patching_tiny-llama.csv"
    rows = read_csv(table)
    assert len(rows) == 3 and not list(tmp_path.glob("*.partial.jsonl"))
    before = table.read_bytes()
    figures, errors = edge_figures(tmp_path)
    assert not errors and {stem for stem, _ in figures} == {"edge_patching_tiny-llama", "edge_patching_layers_tiny-llama"}

    real_study = script.edge_study

    def interrupted(model, config, journal=None, **kwargs):
        journal.add({"task": "UF", "length": 3, "main": [dict(r, accuracy=0.5) for r in rows], "sweep": []})
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "edge_study", interrupted)
    with pytest.raises(KeyboardInterrupt):
        script.main(argv)
    assert table.read_bytes() == before  # the finished table stays finished
    assert {stem for stem, _ in edge_figures(tmp_path)[0]} == {"edge_patching_tiny-llama", "edge_patching_layers_tiny-llama"}
    monkeypatch.setattr(script, "edge_study", real_study)
    assert script.main(argv) == 0  # resumes: the journal's cell is taken as finished
    assert [r["accuracy"] for r in read_csv(table)] == [0.5, 0.5, 0.5]


def test_figures_draw_every_condition():
    rows = [{"model": "m", "adapter": "ub", "task": t, "length": n, "condition": c, "n_examples": 10, "accuracy": 0.5,
             "ci_low": 0.2, "ci_high": 0.8, "mean_logprob": -1.0, "mean_logprob_se": 0.1, "token_accuracy": 0.5}
            for t in ("UF", "UB") for n in (3, 5) for c in CONDITIONS]
    fig = edge_patching_figure(rows)
    assert len(fig.data) == 2 * 2 * 3 and "adapter ub" in fig.layout.title.text
    assert fig.data[0].error_y.array[0] == pytest.approx(30.0)
    assert fig.data[1].y[0] == pytest.approx(1.0)  # the loss, -mean_logprob
    layer_rows = [{"model": "m", "task": "UF", "length": 5, "edge": e, "layer": l, "delta_accuracy": -0.1,
                   "delta_mean_logprob": -0.2, "mean_logprob_se": 0.05} for e in ("induction", "anti_induction") for l in range(3)]
    fig = edge_layer_figure(layer_rows)
    assert len(fig.data) == 4 and fig.data[0].y[0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="lacks column"):
        edge_patching_figure([{"model": "m"}])
    with pytest.raises(ValueError, match="edge_tables upgrade"):
        edge_patching_figure([_old_columns(rows[0])])


@pytest.mark.embedded
def test_embedded_model_batched_equals_reference(embedded):
    """SmolLM2 (30 layers, 9 query / 3 key-value heads): one query reading two sources, through keys and through
    values, in early, induction-head and last layers, against the reference."""
    layout = attention_layout(embedded)
    assert (layout.n_heads, layout.n_kv_heads, layout.rotary) == (9, 3, True)
    tokens, other = random_tokens(5, (1, 12)), random_tokens(6, (1, 12))
    edges, layers = Edges(torch.tensor([[11, 11]]), torch.tensor([[4, 6]])), (0, 17, 18, 29)
    store, cache = counterfactual(embedded, layout, other, edges.source)
    with torch.no_grad():
        clean = embedded(tokens)
    for kind in ("key", "value"):
        with torch.no_grad():
            batched = embedded.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(
                layout, [EdgePatch(kind, edges, store.at(kind, edges.source), layers)]))
        rows = reference_rows(cache, kind, layout.n_layers)
        reference, _ = reference_run(embedded, tokens, [ReferencePatch(kind, edges, rows, layers)])
        assert (batched - reference).abs().max() < 1e-4
        assert (batched - clean).abs().max() > 1e-2


def test_layer_and_head_choices_are_checked_against_the_model():
    from interp.interventions.edges.layout import check_heads, check_layers

    assert check_layers([3, 1, 3], 4) == (1, 3) and check_heads(None, 3) == (0, 1, 2)
    with pytest.raises(ValueError, match=r"--heads: query head\(s\) \[5\] out of range; the model has query heads 0-3"):
        check_heads([5], 4, "--heads")
    with pytest.raises(ValueError, match="layers: no layers given"):
        check_layers([], 4)
