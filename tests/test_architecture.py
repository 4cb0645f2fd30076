"""The package layout is the data flow: an AST scan of every import enforces it (issue 14).

- Only `store/` talks to Qdrant.
- Stages import only earlier stages (or their own): vault → markdown → links → chunking → graph →
  embedding → store → sync → search → api → applications (lint, evaluation) → interfaces.
- Interfaces (the CLI, the server, and the MCP/web layers) import only the public API: the
  package root (`mindnet`) or `mindnet.api`, and each other (the CLI starts the server), so they
  cannot grow logic of their own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindnet"

STAGES: tuple[tuple[str, ...], ...] = (
    ("version", "errors", "text", "config"),
    ("frontmatter", "file_stat", "language", "vault", "vault_paths", "note_cache"),
    ("markdown",),
    ("links",),
    ("chunking",),
    ("graph",),
    ("unigram", "embedding", "e5_fast", "model_cache", "use_fast"),
    ("store",),
    ("points", "quality_tier", "stores", "preload", "sync"),
    ("titles", "search"),
    ("api", "reading"),
    ("lint", "evaluation", "service", "address"),
    ("cli", "cli_core", "cli_queries", "client", "launch", "server", "mcp", "web"),
)
"""Modules (or packages) by stage, in data-flow order; a module may import its own stage or earlier."""
INTERFACES = frozenset(STAGES[-1])
PUBLIC = frozenset({"", "api"})
"""What an interface may import: the package root (lazy public names) and `mindnet.api`."""
QDRANT = ("qdrant_edge", "qdrant_client")


def stage_of(module: str) -> int:
    """The stage index of a dotted module path inside the package (`chunking.base` → chunking's)."""
    top = module.split(".")[0]
    for index, names in enumerate(STAGES):
        if top in names:
            return index
    raise AssertionError(f"mindnet.{module} is in no stage of tests/test_architecture.py: add it to STAGES")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path, source: str | None = None) -> Iterator[tuple[int, str, bool]]:
    """(line, imported module, is internal) for every import in a file; relative imports resolved.

    An import of the package root (`from . import X`) yields `""`.
    """
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    here = module_name(path).split(".") if module_name(path) else []
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                internal = name == "mindnet" or name.startswith("mindnet.")
                yield node.lineno, name.removeprefix("mindnet").lstrip(".") if internal else name, internal
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here if is_package else here[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *([node.module] if node.module else [])])
                yield node.lineno, target, True
            elif node.module and (node.module == "mindnet" or node.module.startswith("mindnet.")):
                yield node.lineno, node.module.removeprefix("mindnet").lstrip("."), True
            elif node.module:
                yield node.lineno, node.module, False


def violations(path: Path, source: str | None = None) -> list[str]:
    """Every rule a file breaks, one line each (`file:line: what`)."""
    module = module_name(path)
    if module == "":
        return []  # the package root re-exports the public API lazily; it is no stage
    own = stage_of(module)
    out: list[str] = []
    for line, target, internal in imports(path, source):
        where = f"{path.relative_to(PACKAGE)}:{line}"
        if not internal:
            if target.split(".")[0] in QDRANT and not module.startswith("store"):
                out.append(f"{where}: imports {target}; only store/ may talk to Qdrant")
            continue
        if module.split(".")[0] in INTERFACES:
            if target not in PUBLIC and target.split(".")[0] not in INTERFACES:
                out.append(f"{where}: interface imports mindnet.{target}; use the public API (mindnet, mindnet.api)")
            continue
        if target == "":
            continue  # the package root: `__version__` and lazy public names
        if stage_of(target) > own:
            out.append(f"{where}: mindnet.{module} imports mindnet.{target}, a later stage")
    return out


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_stage() -> None:
    for path in sources():
        if module_name(path):
            stage_of(module_name(path))


def test_imports_follow_the_data_flow() -> None:
    found = [v for path in sources() for v in violations(path)]
    assert found == []


@pytest.mark.parametrize(
    ("file", "line", "expected"),
    [
        ("links.py", "from .search import Hit", "a later stage"),
        ("vault.py", "from mindnet.sync import import_vault", "a later stage"),
        ("graph.py", "import qdrant_edge", "only store/ may talk to Qdrant"),
        ("cli.py", "from .sync import import_vault", "use the public API"),
        ("cli.py", "from mindnet.search import Hit", "use the public API"),
    ],
)
def test_the_scan_catches_a_forbidden_import(file: str, line: str, expected: str) -> None:
    """The rule can fail: one forbidden line added to a real module is reported."""
    path = PACKAGE / file
    source = path.read_text(encoding="utf-8") + f"\n{line}\n"
    assert any(expected in v for v in violations(path, source))


def test_interfaces_may_use_the_public_api() -> None:
    path = PACKAGE / "cli.py"
    source = path.read_text(encoding="utf-8") + "\nfrom . import Index\nfrom .api import Vault\n"
    assert violations(path, source) == violations(path)
