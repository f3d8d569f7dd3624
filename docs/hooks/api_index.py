"""MkDocs hook: ``api/index.md``, the public API at a glance, built from ``interp.__all__`` at every build.

One section per public name (its one-line summary and a link to its full entry), with a search boost in
the page's front matter, so that searching a public name (``ablated``) lists the public object first,
ahead of the internal helpers whose names start the same way (``ablated_z``).
"""

from __future__ import annotations

import inspect

from mkdocs.structure.files import File, Files

PAGE = "api/index.md"
SEARCH_BOOST = 4


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
