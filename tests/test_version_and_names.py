"""What a user sees of the package and of a model of their own: ``interp.__version__``, and a model given as a
folder named by the folder's name (not its path) in a circuit, its tables and its figures' titles."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

import interp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "analyses"))


def test_the_version_is_the_installed_packages():
    assert interp.__version__ == importlib.metadata.version("interp")
    assert interp.__version__.split(".")[0].isdigit()


def test_without_the_package_installed_the_version_comes_from_pyproject_else_unknown(tmp_path, monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "interp"\nversion = "9.8.7"\n')
    assert interp._version(tmp_path) == "9.8.7"
    (tmp_path / "pyproject.toml").write_text('[project\nversion = ')
    assert interp._version(tmp_path) == "0+unknown"
    assert interp._version(tmp_path / "nowhere") == "0+unknown"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A tiny Llama saved as a user's checkpoint folder would be."""
    from interp.models import tiny_hf_model

    folder = tmp_path_factory.mktemp("runs") / "my-ckpt"
    model, tokenizer = tiny_hf_model("tiny-llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_circuit_of_a_model_given_as_a_folder_is_named_by_the_folder(model_folder, tmp_path):
    import find_circuit
    from interp.core.tables import read_csv
    from interp.figures.style import model_title
    from interp.interventions.circuits.circuit import Circuit

    argv = ["--model", f"{model_folder}/", "--task", "UF", "--lengths", "2", "--n", "2", "--method", "top-k", "--steps", "1",
            "--random", "0", "--no-minimality", "--allow-weak", "--out", str(tmp_path), "--quiet"]
    assert find_circuit.main(argv) == 0
    found = Circuit.load(tmp_path / "circuit_my-ckpt_UF_L2_top-k.json")
    assert found.model == "my-ckpt"  # was the folder's full path, in the circuit and every title drawn from it
    assert {r["model"] for r in read_csv(tmp_path / "circuit_summary_my-ckpt_UF.csv")} == {"my-ckpt"}
    assert model_title(found.model) == "my-ckpt" and str(model_folder.parent) not in repr(found)
