"""MkDocs hook: the API reference, one page per package, and ``api/index.md``, the public API at a glance.

Each page ``docs/api/<name>.md`` names its package in one line ``::: interp.<package>``; at every build
that line becomes the package and each of its modules, by its files, each documented without its
submodules. A module belongs to the page of the longest package its name starts with
(``interp.interventions.circuits.known``: the ``interp.interventions.circuits`` page, not the
``interp.interventions`` one), so every module is documented on exactly one page, a new module lands
on its package's page without a change here, and no anchor has two pages for autorefs to choose from.

``api/index.md``: one section per public name (its one-line summary and a link to its full entry), with
a search boost in the page's front matter, so that searching a public name (``ablated``) lists the
public object first, ahead of the internal helpers whose names start the same way (``ablated_z``).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

PAGE = "api/index.md"
SEARCH_BOOST = 4
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "interp"
API_DIR = ROOT / "docs" / "api"
DIRECTIVE = re.compile(r"^::: *(interp(?:\.\w+)*) *$", re.MULTILINE)


def module_names(package: Path = PACKAGE) -> list[str]:
    """Every public module and package under ``package`` (a folder), by its files: nothing is imported.
    A package comes before its modules; a name with a part starting with ``_`` is private."""
    names = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            names.add(parts)
    return [".".join(parts) for parts in sorted(names)]


def api_pages(api_dir: Path = API_DIR) -> dict[str, str]:
    """``{package: page}``: the package each page of ``api_dir`` names in its one ``::: interp.<package>`` line."""
    pages: dict[str, str] = {}
    for path in sorted(api_dir.glob("*.md")):
        found = DIRECTIVE.findall(path.read_text(encoding="utf-8"))
        if len(found) != 1:
            raise PluginError(f"{path}: expected one line '::: interp.<package>' (the package the page documents), "
                              f"found {len(found)}")
        if found[0] in pages:
            raise PluginError(f"{path}: {found[0]} is already the package of {pages[found[0]]}; one page per package")
        pages[found[0]] = f"api/{path.name}"
    return pages


def page_of(module: str, pages: dict[str, str]) -> str | None:
    """The page of ``module``: that of the longest package in ``pages`` its name starts with."""
    owners = [package for package in pages if module == package or module.startswith(package + ".")]
    return pages[max(owners, key=len)] if owners else None


def reference(package: str, pages: dict[str, str], modules: list[str]) -> str:
    """The ``:::`` lines of the page of ``package``: it, then each of ``modules`` that belongs to it,
    each a heading level below the package it is in."""
    page = pages[package]
    blocks = [f"::: {module}\n    options:\n      heading_level: {1 + module.count('.') - package.count('.')}\n"
              for module in modules if page_of(module, pages) == page]
    return "\n".join(blocks)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """An API page's ``::: interp.<package>`` line becomes its package and the modules that belong to it."""
    pages = api_pages()
    if page.file.src_uri not in pages.values():
        return markdown
    modules = module_names()
    return DIRECTIVE.sub(lambda found: reference(found[1], pages, modules), markdown)


def summary(obj) -> str:
    """The first sentence-line of ``obj``'s docstring ('' for a constant, whose docstring is its type's)."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return ""
    return (inspect.getdoc(obj) or "").strip().split("\n\n")[0].replace("\n", " ")


def index_page() -> str:
    import interp

    lines = ["---", "search:", f"  boost: {SEARCH_BOOST}", "---", "", "# Public API", "",
             "The names `import interp` offers (`interp.__all__`); the pages below document every module.", ""]
    for name in interp.__all__:
        obj = getattr(interp, name)
        lines.append(f"## {name}\n")
        if inspect.isfunction(obj) or inspect.isclass(obj):
            lines.append(f"[`interp.{name}`][{obj.__module__}.{obj.__qualname__}]: {summary(obj)}\n")
        else:
            lines.append(f"`interp.{name}`: a {type(obj).__name__} of {len(obj)} items.\n"
                         if hasattr(obj, "__len__") else f"`interp.{name}`\n")
    return "\n".join(lines)


def on_config(config):
    """The page goes first in the nav's API reference."""
    for section in config["nav"] or []:
        if isinstance(section, dict) and "API reference" in section:
            section["API reference"].insert(0, {"Public API": PAGE})
    return config


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=index_page()))
    return files


def on_post_build(config) -> None:
    """A site without its search index fails every search: refuse to call such a build done."""
    if "search" in config["plugins"] and not (Path(config["site_dir"]) / "search" / "search_index.json").is_file():
        raise PluginError(f"the site in {config['site_dir']} has no search/search_index.json: search would fail on "
                          "every page")
