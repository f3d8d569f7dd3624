"""The one package that knows TransformerLens beyond its public API.

Every other module talks to a model through hook names ([`act_name`][interp.models.bridge.hooks.act_name]), ``run_with_hooks``,
``run_with_cache`` and ``model.hooks()``. What needs more lives here, each with a test in
``tests/test_bridge.py`` that fails loudly when a TransformerLens release renames it:

* booting a bridge around an already-loaded Hugging Face model (public:
  ``TransformerBridge.boot_transformers``), compatibility mode and weight processing
  (``booting``);
* installing processed weights without redoing the arithmetic: the private flag
  ``_weights_processed``, ``real_components`` and the adapter's ``postprocess_weights``
  (`PRIVATE_NAMES` lists them), and filling an *empty* (meta-device) model from files
  without two copies of the weights ever being in memory (``weights``);
* swapping a block's wrapped module for a pass-through (public ``set_original_component``),
  stopping a forward pass once a hook has fired, rotary embeddings and weights per query head
  (``running``);
* hook names (``hooks``).

Modules: ``hooks``, ``booting``, ``weights``, ``running``; every name is importable from here.
"""

from transformer_lens.model_bridge import TransformerBridge

from interp.core.lm import Hook
from interp.models.bridge.booting import boot, enable_compatibility, is_empty, process_weights, weights_processed
from interp.models.bridge.hooks import act_name, is_act
from interp.models.bridge.running import (apply_rotary, head_weights, logits_at, rotary_hook_names, run_from_layer,
                                          run_until, unembed_residual)
from interp.models.bridge.weights import (EMBEDDINGS, NamedReader, can_process_in_chunks, fill_empty_parameters,
                                          install_processed_weights, process_in_chunks, processed_state_dict)

# Names outside TransformerLens' documented API that this package relies on (tests check each).
PRIVATE_NAMES = ("TransformerBridge._weights_processed", "TransformerBridge.real_components",
                 "ArchitectureAdapter.postprocess_weights", "ArchitectureAdapter.preprocess_weights",
                 "ProcessWeights.distribute_weights_to_components", "ProcessWeights.process_weights",
                 "moe.has_batched_experts", "the '._original_component' segment of module paths",
                 "the zero 'bias' buffer UnembeddingBridge adds to a bias-free unembedding")

__all__ = [
    "EMBEDDINGS", "PRIVATE_NAMES", "Hook", "NamedReader", "TransformerBridge", "act_name", "apply_rotary", "boot",
    "can_process_in_chunks", "enable_compatibility", "fill_empty_parameters", "head_weights",
    "install_processed_weights", "is_act", "is_empty", "logits_at", "process_in_chunks", "process_weights",
    "processed_state_dict", "rotary_hook_names", "run_from_layer", "run_until", "unembed_residual",
    "weights_processed",
]
