"""The package layout is the data flow: an AST scan of every import enforces it (issue 14).

- Only `store/` talks to Qdrant.
- Stages import only earlier stages (or their own): vault → markdown → links → chunking → graph →
  embedding → store → sync → search → api → applications (lint, evaluation) → interfaces.
- Interfaces (the CLI, the server, and the MCP/web layers) import only the public API: the
  package root (`mindnet`) or `mindnet.api`, and each other (the CLI starts the server), so they
  cannot grow logic of their own.
- No stage module imports the package root for a name: the root's lazy names reach `api`, so a low
  stage would depend on the top one (issue 28).
- No import cycle between any two modules, inside a stage too (issue 28).

What counts as an import (the graph both checks read):
- Every `import`/`from … import` anywhere in a file: at the top, inside functions, and under
  `if TYPE_CHECKING:` (an annotation-only import still ties the two modules' designs together).
- `from pkg import name` is an import of the submodule `pkg.name` when `name` is a real submodule
  (a `name.py` or `name/__init__.py` beside it), else of `pkg` itself (a name from its
  `__init__.py`). So `from . import frontmatter` is an import of `mindnet.frontmatter`, and
  `from . import Index` one of the package root.
- An import of `a.b` is an edge to `a.b` only, not to the package `a`: Python runs `a/__init__.py`
  first, but every package here re-exports its own submodules, so counting that would make every
  package a circle.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TypeAlias

import pytest
from hypothesis import given
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindnet"

STAGES: tuple[tuple[str, ...], ...] = (
    ("version", "errors", "text", "config"),
    ("frontmatter", "file_stat", "language", "vault", "vault_changes", "vault_paths", "note_cache"),
    ("markdown",),
    ("links",),
    ("chunking",),
    ("graph",),
    ("unigram", "embedding", "e5_fast", "model_cache", "use_fast"),
    ("store",),
    ("retrieval_text", "points", "quality_tier", "stores", "preload", "sync"),
    ("titles", "search", "name_file"),
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


def resolve(base: list[str], name: str) -> str:
    """`base.name` when that is a real submodule of the package `base`, else `base` (a name from its
    `__init__.py`): how `from base import name` is told apart from an import of the package's name."""
    candidate = PACKAGE.joinpath(*base, name)
    if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
        return ".".join([*base, name])
    return ".".join(base)


def imports(path: Path, source: str | None = None) -> Iterator[tuple[int, str, bool]]:
    """(line, imported module, is internal) for every import in a file; relative imports resolved.

    An import of the package root for a name (`from . import X`, X no submodule) yields `""`;
    `from pkg import sub` of a real submodule yields `pkg.sub` (`resolve`).
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
                module = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and (node.module == "mindnet" or node.module.startswith("mindnet.")):
                module = [part for part in node.module.split(".")[1:]]
            elif node.module:
                yield node.lineno, node.module, False
                continue
            else:
                continue
            for target in dict.fromkeys(resolve(module, alias.name) for alias in node.names):
                yield node.lineno, target, True


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
            out.append(f"{where}: mindnet.{module} imports a name from the package root; import its stage module")
            continue
        if stage_of(target) > own:
            out.append(f"{where}: mindnet.{module} imports mindnet.{target}, a later stage")
    return out


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


Graph: TypeAlias = Mapping[str, Mapping[str, str]]
"""module -> {imported module -> where (`file:line`)}; the package root is `""`."""

# ---------------------------------------------------------------------------------------------
# KNOWN CYCLE EXCEPTIONS (issue 28): the lead deletes an entry when the branch that breaks it merges.
# ---------------------------------------------------------------------------------------------
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()
"""Import cycles tolerated for now, each as its set of modules; every other cycle fails the test,
and so does an entry here whose cycle is gone (so a stale exception cannot hide a new one)."""


def import_graph(paths: Iterable[Path]) -> dict[str, dict[str, str]]:
    """The internal import graph of the given files (see the module docstring for what counts)."""
    graph: dict[str, dict[str, str]] = {}
    for path in paths:
        edges = graph.setdefault(module_name(path), {})
        for line, target, internal in imports(path):
            if internal and target != module_name(path):
                edges.setdefault(target, f"{path.relative_to(PACKAGE)}:{line}")
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The graph's strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_cycle(graph: Graph, component: Sequence[str]) -> list[str]:
    """A shortest cycle through the component's first module, inside the component (BFS)."""
    start, members = component[0], set(component)
    before: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph.get(node, {})):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(before[path[-1]])
                return [*reversed(path), start]
            if child in members and child not in before:
                before[child] = node
                queue.append(child)
    raise AssertionError(f"{component} is no strongly connected component")


def describe_cycle(graph: Graph, cycle: Sequence[str]) -> str:
    """One line naming the cycle and the import line of each step."""
    names = " -> ".join(f"mindnet.{m}" if m else "mindnet" for m in cycle)
    steps = ", ".join(graph[a][b] for a, b in pairwise(cycle))
    return f"import cycle {names} ({steps})"


def cycles(graph: Graph, known: frozenset[frozenset[str]] = frozenset()) -> list[str]:
    """Every import cycle of the graph not in `known`, one line each; a component that holds a known
    cycle and more modules besides is reported too."""
    components = sorted(c for c in strongly_connected(graph) if frozenset(c) not in known)
    return [describe_cycle(graph, shortest_cycle(graph, c)) for c in components]


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


def test_no_module_is_in_an_import_cycle() -> None:
    found = cycles(import_graph(sources()), KNOWN_CYCLES)
    assert found == [], "\n".join(found)


def test_every_known_cycle_still_exists() -> None:
    """A known exception whose cycle is gone must be deleted (the lead does so at merge)."""
    present = {frozenset(c) for c in strongly_connected(import_graph(sources()))}
    assert sorted(sorted(c) for c in KNOWN_CYCLES - present) == []


SYNTHETIC: dict[str, dict[str, str]] = {
    "a": {"b": "a.py:1"},
    "b": {"c": "b.py:2", "d": "b.py:3"},
    "c": {"a": "c.py:4"},
    "d": {"e": "d.py:5"},
    "e": {"d": "e.py:6", "f": "e.py:7"},
    "f": {},
    "g": {"a": "g.py:8"},
}


def test_the_cycle_finder_names_each_cycle() -> None:
    """The check can fail: two synthetic cycles are both found, each named with its import lines."""
    assert cycles(SYNTHETIC) == [
        "import cycle mindnet.a -> mindnet.b -> mindnet.c -> mindnet.a (a.py:1, b.py:2, c.py:4)",
        "import cycle mindnet.d -> mindnet.e -> mindnet.d (d.py:5, e.py:6)",
    ]
    assert cycles(SYNTHETIC, frozenset({frozenset({"d", "e"})})) == [
        "import cycle mindnet.a -> mindnet.b -> mindnet.c -> mindnet.a (a.py:1, b.py:2, c.py:4)",
    ]
    acyclic = {node: {t: w for t, w in edges.items() if (node, t) != ("c", "a")} for node, edges in SYNTHETIC.items()}
    assert cycles({n: e for n, e in acyclic.items() if n not in "de"} | {"d": {}, "e": {}}) == []


@given(st.dictionaries(st.sampled_from("abcdefg"), st.sets(st.sampled_from("abcdefg")), max_size=7))
def test_the_cycle_finder_agrees_with_reachability(edges: dict[str, set[str]]) -> None:
    """A module is in a reported cycle exactly when it can reach itself through another module."""
    graph = {node: {t: f"{node}.py:1" for t in targets if t != node} for node, targets in edges.items()}

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, {}))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, {}))
        return seen

    in_cycles = {m for c in strongly_connected(graph) for m in c}
    assert in_cycles == {node for node in graph if node in reach(node)}
    for component in strongly_connected(graph):
        cycle = shortest_cycle(graph, component)
        assert cycle[0] == cycle[-1] == component[0]
        assert all(b in graph[a] for a, b in pairwise(cycle))


def test_a_cycle_in_the_real_tree_is_reported() -> None:
    """One import line that closes a circle (an earlier stage, so only the cycle check sees it)."""
    graph = import_graph(sources())
    graph["text"] = {**graph["text"], "vault": "text.py:999"}
    assert any("mindnet.text" in c and "mindnet.vault" in c and "text.py:999" in c for c in cycles(graph, KNOWN_CYCLES))


def test_the_scan_catches_an_import_of_the_root() -> None:
    """A stage module that takes a lazy name from the root is reported; a submodule import is not."""
    path = PACKAGE / "note_cache.py"
    base = path.read_text(encoding="utf-8")
    assert any("package root" in v for v in violations(path, base + "\nfrom . import Index\n"))
    assert violations(path, base + "\nfrom . import errors\n") == violations(path)
    sub = PACKAGE / "lint" / "fixes.py"
    added = sub.read_text(encoding="utf-8") + "\nfrom .. import Vault\n"
    assert any("package root" in v for v in violations(sub, added))
