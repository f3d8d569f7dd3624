"""Scripts of analyses/ as tests use them: imported as a module, or run with ``import torch`` made to fail (a
script must parse and refuse its arguments before it imports the library)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """``analyses/<name>.py`` imported as a module (its ``main`` not run)."""
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "analyses" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_without_torch(name: str, *argv: str) -> subprocess.CompletedProcess:
    """``analyses/<name>.py argv...`` run with ``import torch`` made to fail."""
    script = ROOT / "analyses" / f"{name}.py"
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = [{script.name!r}, *{list(argv)!r}]; runpy.run_path({str(script)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
