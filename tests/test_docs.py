"""The code in the documentation runs: every ```python block of README.md and docs/**/*.md, and every
``>>>`` example in the package's docstrings.

A page's blocks run in order in one namespace, so a page reads as one session. An HTML comment on the
line before a block says how to run it (see docs/guide/docs.md):

* none: it runs, and may load the embedded model (the page's test is marked ``embedded``);
* ``<!-- docs-test: tiny -->``: it runs on the tiny models only;
* ``<!-- docs-test: skip (reason) -->``: it is not run (a GPU, a 70B model, ``make paper-model``).

Docstring examples run as doctests (``# doctest: +SKIP`` skips one); a module whose examples load the
embedded model (``load_model()``) is marked ``embedded``.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import interp

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!--\s*docs-test:\s*(?P<mode>\w+)(?P<reason>[^>]*?)\s*-->\s*$")
MODES = ("run", "tiny", "skip")
EMBEDDED_CALL = re.compile(r"load_model\(\s*(\)|adapter=|[\"']smollm2)")


def loads_embedded(code: str) -> bool:
    """Whether ``code`` (comments aside) loads the embedded model."""
    return bool(EMBEDDED_CALL.search("\n".join(line.partition("#")[0] for line in code.splitlines())))


@dataclass(frozen=True)
class Block:
    """One fenced python block of a page: its code, its first line number, and how it runs."""

    page: Path
    line: int
    code: str
    mode: str


def marker_before(text: str, start: int) -> str:
    """The docs-test mode named on the last non-blank line before ``start`` ('run' when none)."""
    before = text[:start].rstrip().rpartition("\n")[2]
    found = MARKER.search(before)
    if found is None:
        return "run"
    if found["mode"] not in MODES:
        raise ValueError(f"docs-test marker {found['mode']!r} is not one of {MODES}")
    return found["mode"]


def python_blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, in order."""
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start()) + 1, m["code"], marker_before(text, m.start()))
            for m in FENCE.finditer(text) if m["lang"] == "python"]


def page_param(page: Path):
    blocks = python_blocks(page)
    marks = [pytest.mark.embedded] if any(b.mode == "run" for b in blocks) else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


def run_blocks(blocks: list[Block]) -> None:
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks:
        if block.mode == "skip":
            continue
        code = compile(block.code, f"{block.page.relative_to(ROOT)}:{block.line}", "exec")
        exec(code, namespace)  # noqa: S102 - running the documentation is the point of this test


@pytest.mark.parametrize("page", [page_param(p) for p in PAGES if python_blocks(p)])
def test_page_code_runs(page: Path, tmp_path, monkeypatch) -> None:
    blocks = python_blocks(page)
    if all(b.mode == "skip" for b in blocks):
        pytest.skip("every block is marked skip")
    monkeypatch.chdir(tmp_path)  # a snippet that writes files writes them here
    run_blocks(blocks)


def test_tiny_blocks_use_tiny_models() -> None:
    """A block marked tiny must not load the embedded model (it would make the fast tests slow)."""
    offending = [f"{b.page.relative_to(ROOT)}:{b.line}" for p in PAGES for b in python_blocks(p)
                 if b.mode == "tiny" and loads_embedded(b.code)]
    assert not offending, f"blocks marked tiny load the embedded model: {offending}"


def test_markers_are_understood(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- docs-test: skip (needs a GPU) -->\n```python\nraise SystemExit\n```\n\n"
                    "```python\nx = 1\n```\n<!-- docs-test: tiny -->\n```python\nassert x == 1\n```\n"
                    "```bash\nmake run\n```\n")
    blocks = python_blocks(page)
    assert [(b.mode, b.line) for b in blocks] == [("skip", 4), ("run", 8), ("tiny", 12)]
    run_blocks([Block(ROOT / b.page.name, b.line, b.code, b.mode) for b in blocks])  # the skipped block never raises
    page.write_text("<!-- docs-test: sometimes -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="sometimes"):
        python_blocks(page)


def test_every_page_is_collected() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "docs/index.md", "docs/tutorials/reproduce.md", "docs/tutorials/gpu.md",
            "docs/tutorials/edges.md"} <= names
    assert sum(len(python_blocks(p)) for p in PAGES) >= 10


# --------------------------------------------------------------------------- docstring examples


def modules_with_examples() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(interp.__path__, "interp.")]
    return [name for name in names if ">>>" in Path(importlib.util.find_spec(name).origin).read_text()]


def module_param(name: str):
    source = Path(importlib.util.find_spec(name).origin).read_text()
    examples = "\n".join(line for line in source.splitlines() if line.strip().startswith((">>>", "...")))
    marks = [pytest.mark.embedded] if loads_embedded(examples) else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("module_name", [module_param(n) for n in modules_with_examples()])
def test_docstring_examples_run(module_name: str, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # examples read the published results/ as a user in the repository would
    published = {p: p.stat().st_mtime_ns for p in (ROOT / "results").glob("*")}
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, module_name) if t.examples]
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert tests, f"no docstring example of {module_name} was found"  # '>>>' in the file but none collected
    assert results.failed == 0, f"{results.failed} of {results.attempted} docstring examples of {module_name} failed"
    changed = [p.name for p, t in published.items() if not p.exists() or p.stat().st_mtime_ns != t]
    assert not changed, f"docstring examples of {module_name} wrote into the published results/: {changed}"


def test_api_reference_fences_top_level_doctests() -> None:
    """The API reference's griffe extension fences a docstring's top-level examples (else Markdown reads
    an output line like ``[0.0, 0.278]`` as a link) and leaves an ``Examples:`` section's to griffe."""
    spec = importlib.util.spec_from_file_location("doctest_fences", ROOT / "docs" / "hooks" / "doctest_fences.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    top = hook.fence_doctests("Bounds.\n\n>>> f(0)\n[0.0, 0.278]\n\nMore prose.")
    assert top.splitlines() == ["Bounds.", "", "```pycon", ">>> f(0)", "[0.0, 0.278]", "```", "", "More prose."]
    assert hook.fence_doctests("Bounds.\n>>> f(0)\n[1]").endswith("[1]\n```")  # a block that ends the docstring
    section = "Examples:\n    >>> f(0)\n    [0.0, 0.278]"
    assert hook.fence_doctests(section) == section
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(hook):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


# --------------------------------------------------------------------------- the API reference's pages


def api_hook():
    spec = importlib.util.spec_from_file_location("api_index", ROOT / "docs" / "hooks" / "api_index.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_each_module_belongs_to_one_api_page_by_its_package() -> None:
    """A module documented on two pages gives autorefs two primary URLs (a strict build aborts, or not,
    by the order it meets them): each page names one package, and a module goes to its longest."""
    hook = api_hook()
    pages = hook.api_pages()
    modules = [m for m in hook.module_names() if m != "interp"]
    assert len(set(pages.values())) == len(pages) == len(list((ROOT / "docs" / "api").glob("*.md")))
    owners = {m: [page for package, page in pages.items() if hook.page_of(m, {package: page})] for m in modules}
    assert all(owners.values()), f"modules on no API page: {[m for m, o in owners.items() if not o]}"
    assert hook.page_of("interp.interventions.circuits.known", pages) == "api/circuits.md"
    assert hook.page_of("interp.interventions.ablation", pages) == "api/interventions.md"
    listed = {page: hook.reference(package, pages, modules) for package, page in pages.items()}
    for module in modules:
        on = [page for page, text in listed.items() if re.search(rf"^::: {re.escape(module)}$", text, re.MULTILINE)]
        assert on == [hook.page_of(module, pages)], f"{module} is listed on {on}"


def test_a_new_module_lands_on_its_packages_page(tmp_path) -> None:
    hook = api_hook()
    package = tmp_path / "interp"
    for folder in ("", "interventions", "interventions/circuits"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    for module in ("interventions/ablation.py", "interventions/circuits/role_graph.py", "interventions/_private.py"):
        (package / module).write_text("")
    api = tmp_path / "api"
    api.mkdir()
    (api / "interventions.md").write_text("::: interp.interventions\n")
    (api / "circuits.md").write_text("::: interp.interventions.circuits\n")
    pages, modules = hook.api_pages(api), hook.module_names(package)
    assert modules == ["interp", "interp.interventions", "interp.interventions.ablation",
                       "interp.interventions.circuits", "interp.interventions.circuits.role_graph"]
    assert hook.reference("interp.interventions.circuits", pages, modules).count(":::") == 2
    assert "role_graph" not in hook.reference("interp.interventions", pages, modules)
    (api / "again.md").write_text("::: interp.interventions\n")
    with pytest.raises(Exception, match="interp.interventions is already the package of api/again.md"):
        hook.api_pages(api)
