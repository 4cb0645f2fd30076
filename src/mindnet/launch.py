"""The console scripts `mindnet` and `mindnet-chunk`: plain command lines answered before typer loads.

A search typed at the shell pays every module the process imports. typer, click, pydantic and rich
alone cost more than a server's answer (issue 26), so `main` reads the command lines people type
most (`search`, `context`, `graph`, `status`, `import`, with options as `--opt value`, `--opt=value`,
`-k3`) itself and calls `cli_queries`, which asks a running server over its socket or opens the
vault's `Index`; an agent's `mcp VAULT` line starts the MCP server the same way. Anything else (`--help`,
a usage error, another command, an unusual spelling) goes to typer in `cli`, which parses and
answers it as it always did; both end in the same functions, so the output cannot differ.
`--version` and `-V` print the version at once.

`mindnet-chunk` works the same way with `cli_core`'s parser and `cli`'s typer command.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import __version__
from . import cli_queries as queries
from .cli_core import DEBUG_FLAG, debug_requested, fast_chunk_args, home, mcp, report, run_chunk

_COMMON = {"--vault": ("vault", "path"), "--store": ("store", "path"), "--config": ("config", "path")}
"""Value options every store-reading command takes: (keyword, kind)."""
_OPTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "search": {**_COMMON, "--k": ("k", "int"), "-k": ("k", "int"), "--mode": ("mode", "str"),
               "--type": ("types", "list"), "--tag": ("tags", "list"), "--area": ("area", "str"),
               "--project": ("project", "str"), "--lang": ("lang", "str"), "--path": ("path", "str"),
               "--note": ("note", "list"), "--from": ("date_from", "str"), "--to": ("date_to", "str")},
    "context": {**_COMMON, "--budget": ("budget", "count"), "--k": ("k", "int"), "-k": ("k", "int"),
                "--mode": ("mode", "str")},
    "graph": {**_COMMON, "--depth": ("depth", "int")},
    "status": dict(_COMMON),
    "mcp": {"--store": ("store", "path"), "--config": ("config", "path")},
    "import": {"--store": ("store", "path"), "--config": ("config", "path"), "--strategy": ("strategy", "str"),
               "--max-chunk-size": ("max_chunk_size", "int"), "--separator-group": ("separator_group", "str"),
               "--separators": ("separators", "str")},
}
"""Each command's value options, as typer declares them in `cli` (a test keeps the two in step)."""
_FLAGS: dict[str, dict[str, tuple[str, bool]]] = {
    "search": {"--json": ("as_json", True), "--expand": ("expand", True), "--no-expand": ("expand", False),
               "--by-note": ("by_note", True), "--explain": ("explain", True)},
    "context": {"--json": ("as_json", True), "--expand": ("expand", True), "--no-expand": ("expand", False)},
    "graph": {"--json": ("as_json", True), "--backlinks": ("backlinks", True),
              "--references": ("references", True), "--unresolved": ("unresolved", True)},
    "status": {"--json": ("as_json", True)},
    "mcp": {"--e5": ("e5", True), "--no-e5": ("e5", False)},
    "import": {"--json": ("as_json", True), "--full": ("full", True), "--dry-run": ("dry_run", True),
               "--strict": ("strict", True), "--no-strict": ("strict", False),
               "--quality-tier": ("quality_tier", True), "--no-quality-tier": ("quality_tier", False)},
}
"""Each command's flags: (keyword, value given)."""
_DEFAULTS: dict[str, dict[str, Any]] = {
    "search": {"vault": Path("."), "store": None, "config": None, "k": 10, "mode": "hybrid", "expand": False,
               "by_note": False, "types": None, "tags": None, "area": None, "project": None, "lang": None,
               "path": None, "note": None, "date_from": None, "date_to": None, "explain": False, "as_json": False},
    "context": {"vault": Path("."), "store": None, "config": None, "budget": 2000, "k": 12, "mode": "hybrid",
                "expand": True, "as_json": False},
    "graph": {"vault": Path("."), "store": None, "config": None, "backlinks": False, "references": False,
              "unresolved": False, "depth": 1, "as_json": False},
    "status": {"vault": Path("."), "store": None, "config": None, "as_json": False},
    "mcp": {"vault": Path("."), "store": None, "config": None, "e5": True},
    "import": {"store": None, "config": None, "full": False, "dry_run": False, "strict": None, "strategy": None,
               "max_chunk_size": None, "separator_group": None, "separators": None, "quality_tier": None,
               "as_json": False},
}
"""What each keyword is when its option is not given (typer's defaults in `cli`)."""
_POSITIONAL: dict[str, tuple[str, str] | None] = {
    "search": ("query", "str"), "context": ("query", "str"), "graph": ("note", "str"), "status": None,
    "mcp": ("vault", "path?"), "import": ("vault", "path")}
"""Each command's one positional argument: (keyword, kind); `path?` may be left out (its default then)."""
_COMMANDS: dict[str, Callable[..., None]] = {"search": queries.search, "context": queries.context,
                                             "graph": queries.graph, "status": queries.status, "mcp": mcp,
                                             "import": queries.import_vault}
_NUMBER = re.compile(r"[0-9]{1,9}")
"""What `fast_args` takes as a number: plain digits; a sign, spaces or anything else goes to typer."""


def fast_args(args: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The command and its keyword arguments of a plain command line, or None for typer to parse it.

    Plain: one of the four commands first, then its options as `--opt value`, `--opt=value` or
    `-kN`, flags without a value, exactly the positionals the command takes and nothing that starts
    with `-` where a value or positional goes. What is accepted means what it means to typer: the
    last of a repeated option wins, list options gather, `~` in a path is expanded.
    """
    if not args or args[0] not in _OPTIONS:
        return None
    command, rest = args[0], args[1:]
    options, flags = _OPTIONS[command], _FLAGS[command]
    values = dict(_DEFAULTS[command])
    positionals: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            positionals.append(arg)
            continue
        if arg in flags:
            key, value = flags[arg]
            values[key] = value
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if not eq and value:
            eq = "="  # `-k3`, as click reads a short option with its value attached
        if name not in options or (not eq and i >= len(rest)):
            return None
        if not eq:
            value, i = rest[i], i + 1
            if value.startswith("-") and value != "-":
                return None  # an option where a value should be: typer decides what that means
        key, kind = options[name]
        parsed = _value(value, kind)
        if parsed is None:
            return None
        values[key] = [*(values[key] or []), parsed] if kind == "list" else parsed
    wanted = _POSITIONAL[command]
    if wanted is None or (wanted[1] == "path?" and not positionals):
        return (command, values) if not positionals else None
    if len(positionals) != 1:
        return None
    key, kind = wanted
    value = _value(positionals[0], "path") if kind in ("path", "path?") else positionals[0]
    if value is None:
        return None
    values[key] = value
    return command, values


def _value(text: str, kind: str) -> Any:
    """An option's value as typer would convert it, or None where typer should judge it."""
    if kind in ("int", "count"):
        if not _NUMBER.fullmatch(text) or (kind == "count" and int(text) < 1):
            return None  # a sign, a space, `--budget 0`: typer's message names the option
        return int(text)
    if kind == "path":
        return home(Path(text)) if text else None  # typer's Path makes "" into "."; leave that to it
    return text


def console() -> None:
    """The `mindnet` console script: `main`, ending the process at once after a command it answered.

    A search's process spent a noticeable part of its life after its last line in the interpreter's
    teardown: freeing the models' buffers, onnxruntime's and Qdrant Edge's native shutdown (issue 26).
    Every resource of the command is closed by then (the index closes its store and caches), so the
    process flushes its output and exits; anything that goes to typer exits as usual.
    """
    main(quick_exit=True)


def main(argv: list[str] | None = None, *, quick_exit: bool = False) -> None:
    """`mindnet` entry point; `argv` (without the program name) for tests and embedding programs."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    plain = [a for a in args if a != DEBUG_FLAG]
    if plain in (["--version"], ["-V"]):
        sys.stdout.write(f"mindnet {__version__}\n")
        sys.exit(0)
    parsed = fast_args(plain)
    if parsed is None:
        from .cli import main as typer_main

        typer_main(args)
        return
    command, options = parsed
    if quick_exit and command in _QUICK_EXIT:
        options["ends_by_exit"] = True  # a store it wrote nothing to is left to the exit (`cli_queries.index`)
    try:
        code = _COMMANDS[command](**options)
    except BaseException as exc:  # the one place where every error becomes a line
        if isinstance(exc, SystemExit):
            raise
        code = report(exc, debug)
    code = code if isinstance(code, int) else 0
    if quick_exit and command in _QUICK_EXIT:
        _exit_now(code)
    sys.exit(code)


_QUICK_EXIT = frozenset({"search", "context", "graph", "status", "import"})
"""Commands that close all they open before they return, except a store they wrote nothing to (every read,
an import that found nothing to do), which they leave to the exit (`ends_by_exit`); `mcp` runs until its
client leaves."""


def _exit_now(code: int) -> None:
    """Flush stdout and stderr, then end the process without the interpreter's teardown."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: let the interpreter report it as it always has
        sys.exit(code)
    os._exit(code)


def chunk_main(argv: list[str] | None = None) -> None:
    """`mindnet-chunk` entry point; `argv` (without the program name) for tests and embedding programs."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    plain = [a for a in args if a != DEBUG_FLAG]
    parsed = fast_chunk_args(plain)
    if parsed is None:
        from .cli import typer_chunk_main

        typer_chunk_main(args)
        return
    flags = {k: parsed.get(k) for k in ("strategy", "max_chunk_size", "separator_group", "separators")}
    try:
        code = run_chunk(parsed["paths"] or None, parsed.get("vault"), parsed.get("config"), flags,
                         parsed.get("jobs", 0))
    except BaseException as exc:  # the one place where every error becomes a line
        if isinstance(exc, SystemExit):
            raise
        sys.exit(report(exc, debug))
    sys.exit(code)
