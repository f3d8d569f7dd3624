"""The one module that knows TransformerLens beyond its public API.

Every other module talks to a model through hook names (:func:`act_name`), ``run_with_hooks``,
``run_with_cache`` and ``model.hooks()``. What needs more lives here, each with a test in
``tests/test_bridge.py`` that fails loudly when a TransformerLens release renames it:

* booting a bridge around an already-loaded Hugging Face model (public:
  ``TransformerBridge.boot_transformers``);
* installing processed weights without redoing the arithmetic: the private flag
  ``_weights_processed``, ``real_components`` and the adapter's ``postprocess_weights``
  (:data:`PRIVATE_NAMES` lists them);
* swapping a block's wrapped module for a pass-through (public ``set_original_component``);
* stopping a forward pass once a hook has fired;
* building a bridge on an *empty* (meta-device) model and filling it from files without two
  copies of the weights ever being in memory: processed weights installed by assignment, or raw
  weights read and processed chunk by chunk (embeddings, final norm + unembedding, then block by
  block) by TransformerLens' own ``ProcessWeights.process_weights``. Whole-model processing clones
  every tensor three times while the raw copy is alive: 21 GB for a 1.5B model in fp32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.utilities import get_act_name
from transformer_lens.weight_processing import ProcessWeights

from interp.core.lm import Hook


# Names outside TransformerLens' documented API that this module relies on (tests check each).
PRIVATE_NAMES = ("TransformerBridge._weights_processed", "TransformerBridge.real_components",
                 "ArchitectureAdapter.postprocess_weights", "ArchitectureAdapter.preprocess_weights",
                 "ProcessWeights.distribute_weights_to_components", "ProcessWeights.process_weights",
                 "moe.has_batched_experts", "the '._original_component' segment of module paths",
                 "the zero 'bias' buffer UnembeddingBridge adds to a bias-free unembedding")


def act_name(name: str, layer: int | None = None) -> str:
    """TransformerLens' hook name: ``act_name("pattern", 3) == "blocks.3.attn.hook_pattern"``.

    >>> act_name("pattern", 3)
    'blocks.3.attn.hook_pattern'
    """
    return get_act_name(name, layer)


def is_act(name: str) -> Callable[[str], bool]:
    """A ``names_filter`` that keeps one kind of hook in every layer (``is_act("pattern")``).

    >>> is_act("pattern")("blocks.3.attn.hook_pattern"), is_act("pattern")("blocks.3.attn.hook_z")
    (True, False)
    """
    suffix = act_name(name, 0).split(".", 2)[-1]
    return lambda hook_name: hook_name.endswith(suffix)


# --------------------------------------------------------------------------- booting


def boot(hf_model, tokenizer, name: str, device: torch.device, repo: str | None = None) -> TransformerBridge:
    """A bridge around ``hf_model`` (not yet in compatibility mode), named ``name`` in its config;
    ``repo`` is the model's Hugging Face repository when ``name`` is not. An empty (meta) model gets
    its synthetic buffers, and is filled later (:func:`install_processed_weights`,
    :func:`process_in_chunks`, :func:`fill_empty_parameters`).

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> bridge.cfg.model_name, weights_processed(bridge)
    ('tiny-gpt2', False)
    """
    bridge = TransformerBridge.boot_transformers(repo or name, hf_model=hf_model, tokenizer=tokenizer,
                                                 device=device, dtype=hf_model.dtype)
    bridge.cfg.model_name = name
    if is_empty(hf_model):
        _materialize_synthetic_buffers(bridge)
    return bridge


def enable_compatibility(bridge: TransformerBridge, process_weights: bool) -> None:
    """HookedTransformer hook names; with ``process_weights`` also its weight processing
    (layer norms folded, writing weights centred), else the weights are installed later.

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=True)
    >>> weights_processed(bridge), act_name("pattern", 0) in bridge.hook_dict
    (True, True)
    """
    bridge.enable_compatibility_mode(disable_warnings=True, no_processing=not process_weights)
    if process_weights:
        _make_weights_contiguous(bridge)


def process_weights(bridge: TransformerBridge) -> None:
    """Process the weights of a bridge put in compatibility mode without processing.

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> process_weights(bridge)
    >>> weights_processed(bridge), all(p.is_contiguous() for p in bridge.parameters())
    (True, True)
    """
    bridge.process_weights()
    _make_weights_contiguous(bridge)


def weights_processed(bridge: TransformerBridge) -> bool:
    """Whether the bridge's weights are processed (layer norms folded and so on) or still raw.

    >>> from interp.models import load_model
    >>> weights_processed(load_model("tiny-gpt2", device="cpu"))
    True
    """
    return bool(bridge._weights_processed)


def _make_weights_contiguous(bridge: TransformerBridge) -> None:
    """Give every parameter a contiguous layout.

    Processing leaves some weights as transposed views (GPT-2's split ``c_attn``), while weights
    read back from a file are contiguous; the two layouts take different matmul kernels and
    differ in the last bit. One layout for both paths makes them compute identically."""
    with torch.no_grad():
        for param in bridge.parameters():
            if not param.is_contiguous():
                param.data = param.data.contiguous()


def processed_state_dict(bridge: TransformerBridge) -> dict[str, Tensor]:
    """The processed weights as CPU tensors that can be saved (tied weights get their own copy).

    >>> from interp.models import load_model
    >>> tensors = processed_state_dict(load_model("tiny-gpt2", device="cpu"))
    >>> list(tensors)[:3], tuple(tensors["embed.weight"].shape)
    (['embed.weight', 'pos_embed.weight', 'blocks.0.attn.q.weight'], (354, 64))
    """
    if not weights_processed(bridge):
        raise ValueError("the bridge's weights are not processed: call enable_compatibility(bridge, True) first")
    tensors: dict[str, Tensor] = {}
    seen: set[int] = set()
    for key, value in bridge.state_dict().items():
        value = value.detach().to("cpu").contiguous()
        if value.data_ptr() in seen:  # safetensors refuses shared storage
            value = value.clone()
        seen.add(value.data_ptr())
        tensors[key] = value
    return tensors


def _state_dict_mismatch(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> str | None:
    """Why ``state_dict`` cannot be installed into ``bridge`` (keys or shapes), or None."""
    expected = bridge.state_dict(keep_vars=True)
    # Folding value biases gives a bias-free output projection (Qwen2's o_proj) a bias, which
    # installing creates: such a bias is not in a fresh bridge, its weight is.
    created = {k for k in set(state_dict) - set(expected) if k.endswith(".bias") and k[:-5] + ".weight" in expected}
    missing, extra = sorted(set(expected) - set(state_dict)), sorted(set(state_dict) - set(expected) - created)
    if missing or extra:
        return f"missing {missing[:5]}, unexpected {extra[:5]}"
    shapes = [k for k in expected if tuple(expected[k].shape) != tuple(state_dict[k].shape)]
    if shapes:
        return f"shapes differ for {shapes[:5]}"
    return None


def install_processed_weights(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> None:
    """Put processed weights into a bridge in compatibility mode without processing, leaving it
    as ``process_weights`` would (TransformerLens' own distribution path, then the adapter's
    post-processing). The tensors are installed by assignment: an empty model is filled without
    a copy, and memory-mapped tensors stay mapped.

    >>> from interp.models import load_model
    >>> from interp.models.loading import load_hf_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> install_processed_weights(bridge, processed_state_dict(model))
    >>> tokens = torch.tensor([[3, 7, 11, 5]])
    >>> weights_processed(bridge), bool(torch.allclose(bridge(tokens), model(tokens), atol=1e-6))
    (True, True)
    """
    if weights_processed(bridge):
        raise ValueError("the bridge's weights are already processed")
    problem = _state_dict_mismatch(bridge, {k: v for k, v in state_dict.items()})
    if problem:
        raise ValueError(f"the processed weights do not match this model: {problem}")
    device = torch.device(bridge.cfg.device)
    state_dict = {k: v.to(device) for k, v in state_dict.items()}
    ProcessWeights.distribute_weights_to_components(state_dict=state_dict, component_mapping=bridge.real_components)
    if bridge.adapter is not None:
        bridge.adapter.postprocess_weights(bridge)
    bridge._weights_processed = True
    _make_weights_contiguous(bridge)


# --------------------------------------------------------------------------- filling an empty model

EMBEDDINGS = ("embed.", "pos_embed.")
NamedReader = Callable[[Sequence[str], str], Tensor]  # (checkpoint names of one tensor, what it is) -> the tensor


def is_empty(module: nn.Module) -> bool:
    """Whether some parameter is still on the meta device (an empty model, not yet filled).

    >>> is_empty(nn.Linear(2, 2)), is_empty(nn.Linear(2, 2, device="meta"))
    (False, True)
    """
    return any(p.is_meta for p in module.parameters())


def _checkpoint_names(model: nn.Module) -> dict[int, list[str]]:
    """Every checkpoint name of each parameter (tied weights have several), keyed by the
    parameter's id: a booted bridge wraps each HF module, adding ``._original_component`` to the
    module paths, and the checkpoint names are the paths without it."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name.replace("._original_component", ""))
    return names


def _materialize_synthetic_buffers(bridge: TransformerBridge) -> None:
    """A bias-free unembedding gets a fixed zero ``bias`` buffer when the bridge boots, on the
    meta device for an empty model: give it its zeros. Any other empty buffer is an error."""
    device = torch.device(bridge.cfg.device)
    for module_name, module in bridge.original_model.named_modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if not buffer.is_meta:
                continue
            if name != "bias":
                raise RuntimeError(f"buffer {module_name}.{name} of the empty model is on the meta device and not in "
                                   f"the checkpoint; load this model with from_pretrained instead")
            setattr(module, name, torch.zeros(buffer.shape, dtype=buffer.dtype, device=device))


def fill_empty_parameters(bridge: TransformerBridge, read: NamedReader) -> None:
    """Give every parameter still on the meta device its tensor from ``read`` (the ones
    processing does not touch, or all of them); tied parameters stay tied.

    >>> from accelerate import init_empty_weights
    >>> from transformers import AutoModelForCausalLM
    >>> from interp.models.loading import load_hf_model
    >>> full, tokenizer = load_hf_model("tiny-llama")
    >>> with init_empty_weights(include_buffers=False):
    ...     empty = AutoModelForCausalLM.from_config(full.config)
    >>> bridge = boot(empty, tokenizer, "tiny-llama", torch.device("cpu"))
    >>> raw = full.state_dict()
    >>> is_empty(bridge.original_model)
    True
    >>> fill_empty_parameters(bridge, lambda names, what: raw[names[0]])
    >>> is_empty(bridge.original_model)
    False
    """
    names = _checkpoint_names(bridge.original_model)
    filled: dict[int, nn.Parameter] = {}
    for module_name, module in bridge.original_model.named_modules():
        for param_name, param in list(module.named_parameters(recurse=False)):
            if param.is_meta:
                if id(param) not in filled:
                    value = read(names[id(param)], f"{module_name}.{param_name}")
                    filled[id(param)] = nn.Parameter(value, requires_grad=param.requires_grad)
                setattr(module, param_name, filled[id(param)])
    empty = [n for n, t in [*bridge.original_model.named_parameters(), *bridge.original_model.named_buffers()] if t.is_meta]
    if empty:
        raise RuntimeError(f"{len(empty)} tensors of the model were never filled (first: {empty[0]})")


def can_process_in_chunks(bridge: TransformerBridge) -> bool:
    """Chunking is exact only when no processing step looks across chunks: the adapter must not
    preprocess the whole state dict, no logit softcap (centring is skipped then), no
    encoder-decoder, and no batched experts (folded on the live model).

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-llama"), "tiny-llama", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> can_process_in_chunks(bridge)
    True
    """
    from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
    from transformer_lens.model_bridge.generalized_components.moe import has_batched_experts

    adapter = bridge.adapter
    if adapter is None or type(adapter).preprocess_weights is not ArchitectureAdapter.preprocess_weights:
        return False
    if (getattr(bridge.cfg, "output_logits_soft_cap", None) or -1) > 0:
        return False
    if any(name.startswith(("encoder_blocks", "decoder_blocks")) for name in bridge.real_components):
        return False
    return not any(has_batched_experts(module) for module in bridge.original_model.modules())


def _weight_chunks(keys: list[str], n_layers: int) -> Iterator[tuple[str, list[str]]]:
    """(role, keys): the embeddings, the other global tensors (final norm, unembedding), then
    block by block; the two largest chunks go first, while little else is resident."""
    blocks = [[k for k in keys if k.startswith(f"blocks.{layer}.")] for layer in range(n_layers)]
    in_blocks = {k for block in blocks for k in block}
    global_keys = [k for k in keys if k not in in_blocks]
    yield "embeddings", [k for k in global_keys if k.startswith(EMBEDDINGS)]
    yield "globals", [k for k in global_keys if not k.startswith(EMBEDDINGS)]
    yield from (("block", block) for block in blocks if block)


def _tl_keys(state_dict: dict[str, Tensor], bridge: TransformerBridge) -> dict[str, Tensor]:
    """Keys an adapter step may give back in HF form (``model.layers.0...``) in the TL form
    ``distribute_weights_to_components`` routes by, as ``TransformerBridge.process_weights`` does."""
    hf_to_tl = {remote: tl for tl, (remote, _) in bridge.real_components.items() if remote and remote != tl}
    renamed = {}
    for key, value in state_dict.items():
        for hf_prefix, tl_prefix in hf_to_tl.items():
            if key.startswith(hf_prefix + "."):
                key = f"{tl_prefix}.{key[len(hf_prefix) + 1:]}"
                break
        renamed[key] = value
    return renamed


def process_in_chunks(bridge: TransformerBridge, read: NamedReader, progress: bool = False) -> None:
    """Process the raw weights ``read`` gives into a bridge booted on an empty model (compatibility
    mode without processing) one chunk at a time, leaving it as ``enable_compatibility_mode()``
    would: every processing step reads one block's own tensors (and the globals only the global
    chunk), so the result is bit-identical to processing everything at once.

    >>> from accelerate import init_empty_weights
    >>> from transformers import AutoModelForCausalLM
    >>> from interp.models import load_model
    >>> from interp.models.loading import load_hf_model
    >>> full, tokenizer = load_hf_model("tiny-llama")
    >>> with init_empty_weights(include_buffers=False):
    ...     empty = AutoModelForCausalLM.from_config(full.config)
    >>> bridge = boot(empty, tokenizer, "tiny-llama", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> raw, read = full.state_dict(), []
    >>> process_in_chunks(bridge, lambda names, what: read.append(what) or raw[names[0]])
    >>> read[:3], len(read)   # the embeddings, the globals, then block by block
    (['embed.weight', 'ln_final.weight', 'unembed.weight'], 21)
    >>> tokens = torch.tensor([[3, 7, 11, 5]])
    >>> bool(torch.allclose(bridge(tokens), load_model("tiny-llama", device="cpu")(tokens), atol=1e-6))
    True
    """
    from tqdm.auto import tqdm

    if weights_processed(bridge):
        raise ValueError("the bridge's weights are already processed")
    names = _checkpoint_names(bridge.original_model)
    current = bridge.state_dict(keep_vars=True)

    def raw(key: str) -> Tensor:
        value = current[key]
        return value.detach() if not value.is_meta else read(names.get(id(value), []), key)

    keys = list(current)
    embeddings = [k for k in keys if k.startswith(EMBEDDINGS)]
    # centring the writing weights needs the embeddings beside every block: other chunks get a
    # copy to centre and throw away.
    needs_embeddings = getattr(bridge.cfg, "normalization_type", "LN") in ("LN", "LNPre") \
        and not getattr(bridge.cfg, "final_rms", False)
    bridge._weights_processed = True  # as process_weights does: a failure leaves no raw basis
    all_chunks = [(role, chunk) for role, chunk in _weight_chunks(keys, bridge.cfg.n_layers) if chunk]
    for role, chunk in tqdm(all_chunks, desc="process weights", disable=not progress, leave=False):
        state_dict = {key: raw(key) for key in chunk}
        borrowed = needs_embeddings and role != "embeddings"
        if borrowed:
            state_dict.update({key: raw(key) for key in embeddings})
        processed = ProcessWeights.process_weights(
            state_dict, bridge.cfg, fold_ln=True, center_writing_weights=True, center_unembed=role == "globals",
            fold_value_biases=True, refactor_factored_attn_matrices=False, adapter=bridge.adapter)
        if borrowed:
            processed = {k: v for k, v in processed.items() if not k.startswith(EMBEDDINGS)}
        ProcessWeights.distribute_weights_to_components(state_dict=_tl_keys(processed, bridge),
                                                        component_mapping=bridge.real_components)
        del state_dict, processed
    bridge.adapter.postprocess_weights(bridge)
    _make_weights_contiguous(bridge)


# --------------------------------------------------------------------------- running parts of the model


class _PassThrough(nn.Module):
    """Stands in for a skipped block: returns its hidden-state input untouched."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


@contextmanager
def _bypass_blocks_below(model: TransformerBridge, layer: int, unembed: bool = True) -> Iterator[None]:
    """Inside, blocks ``0..layer-1`` cost nothing (a forward that starts at ``layer`` discards
    their output anyway) and, with ``unembed``, the unembedding returns the final normalized
    residual, so callers unembed only the positions they need (:func:`unembed_residual`)."""
    swapped = [(block, block.original_component) for block in list(model.blocks)[:layer]]
    if unembed:
        swapped.append((model.unembed, model.unembed.original_component))
    try:
        for component, _ in swapped:
            component.set_original_component(_PassThrough())
        yield
    finally:
        for component, original in swapped:
            component.set_original_component(original)


def unembed_residual(model: TransformerBridge, residual: Float[Tensor, "*rows d_model"]) -> Float[Tensor, "*rows d_vocab"]:
    """The model's own unembedding applied to final (normalized) residuals.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tuple(unembed_residual(model, torch.zeros(3, model.cfg.d_model)).shape)
    (3, 354)
    """
    return model.unembed.original_component(residual)


def run_from_layer(model: TransformerBridge, residual: Float[Tensor, "batch pos d_model"], layer: int,
                   fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch pos d_model"]:
    """Blocks ``layer..`` on ``residual`` (the stream entering ``layer``); returns the final
    normalized residual (no unembedding).

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tokens = torch.tensor([[3, 7, 11, 5, 3, 7]])
    >>> logits, cache = model.run_with_cache(tokens, names_filter=act_name("resid_pre", 1))
    >>> final = run_from_layer(model, cache[act_name("resid_pre", 1)], 1)
    >>> tuple(final.shape), bool(torch.allclose(unembed_residual(model, final), logits, atol=1e-5))
    ((1, 6, 64), True)
    """
    with torch.no_grad(), _bypass_blocks_below(model, layer):
        return model.run_with_hooks(residual, start_at_layer=layer, fwd_hooks=list(fwd_hooks))


class _Stop(Exception):
    """Raised from a hook to end a forward pass early."""


def run_until(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], last_hook: str,
              fwd_hooks: Sequence[Hook] = ()) -> None:
    """Run the forward pass with ``fwd_hooks`` and stop as soon as ``last_hook`` has fired (its
    own hooks in ``fwd_hooks`` included): the layers after it, and the unembedding, never run.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> fired = []
    >>> def record(name):
    ...     return lambda value, hook: fired.append(name)
    >>> names = [act_name(kind, layer) for layer in (0, 1) for kind in ("resid_pre", "pattern")]
    >>> run_until(model, torch.tensor([[3, 7, 11]]), names[1], [(name, record(name)) for name in names])
    >>> fired   # block 1 never ran
    ['blocks.0.hook_resid_pre', 'blocks.0.attn.hook_pattern']
    """

    if last_hook not in model.hook_dict:
        raise ValueError(f"the model has no hook {last_hook!r} (e.g. {act_name('pattern', 0)!r})")

    def stop(value, hook):
        raise _Stop

    with torch.no_grad(), model.hooks(fwd_hooks=[*fwd_hooks, (last_hook, stop)]):
        try:
            model(tokens.to(model.cfg.device))
        except _Stop:
            return
    raise RuntimeError(f"hook {last_hook!r} never fired: the forward pass ran to the end")


# --------------------------------------------------------------------------- rotary embeddings


def rotary_hook_names(layer: int) -> tuple[str, str]:
    """The hooks holding the cosines and sines a rotary layer applies to its queries and keys.

    >>> rotary_hook_names(1)
    ('blocks.1.attn.hook_cos', 'blocks.1.attn.hook_sin')
    """
    return f"blocks.{layer}.attn.hook_cos", f"blocks.{layer}.attn.hook_sin"


def apply_rotary(model: TransformerBridge, x: Float[Tensor, "*#rows head d_head"], cos: Float[Tensor, "*#rows d_head"],
                 sin: Float[Tensor, "*#rows d_head"]) -> Float[Tensor, "*#rows head d_head"]:
    """RoPE as the bridge's rotary attention applies it to ``hook_q`` / ``hook_k`` (giving
    ``hook_rot_q`` / ``hook_rot_k``): halves rotated, Hugging Face's ``rotate_half``; linear in
    ``x``, so it also rotates a change of a query or key. ``cos`` and ``sin`` come from
    :func:`rotary_hook_names` at the same rows.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> names = [act_name("q", 0), act_name("rot_q", 0), *rotary_hook_names(0)]
    >>> _, cache = model.run_with_cache(torch.tensor([[1, 5, 9, 2]]), names_filter=lambda name: name in names)
    >>> q, rot_q, cos, sin = (cache[name] for name in names)
    >>> bool(torch.allclose(apply_rotary(model, q, cos, sin), rot_q, atol=1e-6))
    True
    """
    if getattr(model.cfg, "rotary_adjacent_pairs", False) or x.shape[-1] != cos.shape[-1]:
        raise NotImplementedError("only full-width rotary embeddings on rotated halves are supported")
    first, second = x.chunk(2, dim=-1)
    return x * cos[..., None, :] + torch.cat([-second, first], dim=-1) * sin[..., None, :]


# --------------------------------------------------------------------------- weights per query head


def head_weights(model: TransformerBridge) -> dict[str, Float[Tensor, "layer head_index ..."]]:
    """``W_Q``, ``W_K``, ``W_V`` ``[layer, head, d_model, d_head]`` and ``W_O`` ``[layer, head,
    d_head, d_model]`` of the processed weights, one entry per *query* head: under grouped-query
    attention each key/value head is repeated for the query heads that share it.

    >>> from interp.models import load_model
    >>> {name: tuple(w.shape) for name, w in head_weights(load_model("tiny-gpt2", device="cpu")).items()}
    {'W_Q': (2, 4, 64, 16), 'W_K': (2, 4, 64, 16), 'W_V': (2, 4, 64, 16), 'W_O': (2, 4, 16, 64)}
    """
    n_heads = model.cfg.n_heads
    weights = {name: getattr(model, name).detach() for name in ("W_Q", "W_K", "W_V", "W_O")}
    for name in ("W_K", "W_V"):
        shared = weights[name].shape[1]
        if shared != n_heads:
            if n_heads % shared:
                raise ValueError(f"{name} has {shared} heads, which do not divide the {n_heads} query heads")
            weights[name] = weights[name].repeat_interleave(n_heads // shared, dim=1)
    return weights
