"""The command line without typer and rich: `mindnet-chunk`'s own parser, and what the commands share.

`mindnet-chunk` is run once per document set by scripts, so its start-up counts: typer, its pydantic
coercion and rich took a tenth of a second of CPU before a single note was read. A command line this
module's small parser understands (`fast_chunk_args`) runs without them (`launch.chunk_main`); any other
one (`--help`, a usage error, anything unusual) goes to the typer command in `cli`, which answers it
exactly as before. Both run `run_chunk`, so the output cannot differ.

Shared with `cli`: the one-line error report and exit codes (0 ok, 1 some notes were skipped, 2 the
command could not run), the `--debug` switch, and settings from flags (R26).
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from . import (
    InputError,
    MindnetError,
    NoteError,
    NotFoundError,
    Settings,
    VaultNotFoundError,
    load_settings,
    location,
    printable,
)

DEBUG_FLAG = "--debug"
"""Accepted anywhere on a command line (like MINDNET_DEBUG=1): show the traceback of an error."""


def debug_requested(args: list[str]) -> bool:
    """Whether `--debug` is on the line or MINDNET_DEBUG is set to a true value."""
    return DEBUG_FLAG in args or os.environ.get("MINDNET_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


def home(path: Path | None) -> Path | None:
    """`~/notes` as a shell would expand it: an MCP client's `args` and a quoted path reach us unexpanded
    (and the Python API's `Vault("~/notes")` expands it too)."""
    return path.expanduser() if path is not None else None


def say(line: str) -> None:
    """One line on stderr, never wrapped or styled: editors and CI parse `path:line: …`."""
    sys.stderr.write(line + "\n")


def settings_for(
    vault: Path | None,
    config: Path | None,
    *,
    store: Path | None = None,
    strategy: str | None = None,
    max_chunk_size: int | None = None,
    separator_group: str | None = None,
    separators: str | None = None,
    **flags: Any,
) -> Settings:
    """Settings from the four layers (R26): flags are the top layer, recursive flags included."""
    overrides = {k: v for k, v in flags.items() if v is not None}
    if store is not None:
        overrides["store_path"] = str(store)
    if strategy is not None:
        overrides["strategy"] = strategy
    recursive = {"max_chunk_size": max_chunk_size, "separator_group": separator_group, "separators": separators}
    overrides["recursive"] = {k: v for k, v in recursive.items() if v is not None}
    settings = load_settings(vault, config, overrides=overrides)
    for notice in settings.notices:
        say(f"warning: {notice}")
    return settings


def long_running_settings(vault: Path, config: Path | None, store: Path | None) -> Settings:
    """Settings for a command that runs until stopped (serve, watch, mcp), with logs on stderr."""
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # "1 change detected" on every save; ours says which
    settings = settings_for(vault, config, store=store)
    if not vault.is_dir():
        raise MindnetError(f"vault not found: {vault}")
    return settings


def mcp(vault: Path, *, store: Path | None, config: Path | None, e5: bool) -> None:
    """`mindnet mcp`: an MCP server on stdin/stdout (the SDK and the index load only here)."""
    from .mcp import run_stdio

    run_stdio(vault, long_running_settings(vault, config, store), e5=e5)


def error_line(exc: BaseException, debug: bool = False) -> str:
    """`path:line: error: reason` for a bad user file, else `error: reason`, one line, never a traceback."""
    if isinstance(exc, InputError):
        return f"{location(exc.path, exc.line)}: error: {flat(exc.reason)}"
    if isinstance(exc, MindnetError):
        return f"error: {flat(str(exc))}{_hint(exc)}"
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # a usage error of the option parser
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        return f"error: {flat(exc.format_message())}{hint}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{printable(str(exc.filename))}: " if exc.filename else ""
        return f"error: {where}{exc.strerror}"
    if type(exc).__name__ == "Abort" and type(exc).__module__.startswith(("click", "typer")):  # typer.Abort
        return "error: aborted"
    if isinstance(exc, KeyboardInterrupt):
        return "error: interrupted"
    if isinstance(exc, MemoryError):
        return "error: out of memory"
    more = "" if debug else f"; run again with {DEBUG_FLAG} for the traceback"
    return f"error: internal error: {type(exc).__name__}: {flat(str(exc))}{more}"


def _hint(exc: MindnetError) -> str:
    """What a miss can add to its line: the closest names, or that the "vault" given is a file.

    The library leaves these to the interface (the server sends the names as a list); on the
    command line they belong on the same line, where a typo is corrected.
    """
    if isinstance(exc, VaultNotFoundError):
        return " (a file: give the vault's folder)" if Path(exc.path).is_file() else ""
    if isinstance(exc, NotFoundError):  # a missed section's message lists the sections already
        shown = ", ".join(flat(str(s["path"])) for s in exc.suggestions if s.get("path"))
        return f"; closest: {shown}" if shown else ""
    return ""


def exit_code(exc: BaseException) -> int:
    """The exit code of a command that ended in `exc`: 130 for Ctrl-C, else the parser's or 2."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    code = getattr(exc, "exit_code", None)
    return code if isinstance(code, int) and not isinstance(exc, MindnetError) and code > 0 else 2


def flat(text: str) -> str:
    """A message on one line: editors and CI read stderr line by line."""
    return printable(" ".join(text.split())) or "(no message)"


def report(exc: BaseException, debug: bool) -> int:
    """Print the one line for `exc` (after its traceback with `--debug`) and return its exit code."""
    if debug:
        traceback.print_exception(exc)
    say(error_line(exc, debug))
    return exit_code(exc)


# --- mindnet-chunk (R24) -------------------------------------------------------------------------

def run_chunk(
    paths: list[str] | None,
    vault: Path | None,
    config: Path | None,
    flags: dict[str, Any],
    jobs: int,
) -> int:
    """Chunk notes and print NDJSON, one chunk per line (R24); the exit code (1: some notes skipped)."""
    from . import Vault, chunk_note, group_paths, ndjson, note_from_text

    if not paths or paths == ["-"]:
        settings = settings_for(vault, config, **flags)
        if _interactive(sys.stdin):  # a bare `mindnet-chunk` typed to try it would look like a hang
            say("mindnet-chunk: reading one note from stdin, Ctrl-D ends it (give files or folders to chunk them)")
        try:
            stdin: Any = getattr(sys.stdin, "buffer", sys.stdin)  # bytes, so bad input is judged like a file's
            note = note_from_text(stdin.read(), settings)
        except NoteError as exc:
            # the line a file with the same bytes gets
            say(f"{location(exc.path, exc.line)}: error: {printable(exc.reason)}")
            return 1
        sys.stdout.write(ndjson(chunk_note(note, settings)))
        return 0
    failed = 0
    # A file belongs to --vault or its own folder and must exist (lint differs on purpose, see vault_paths).
    groups = group_paths(paths, vault, root_of=lambda path: path.parent, allow_missing_notes=False)
    for folder, files in groups.items():
        reader = Vault(folder, settings_for(folder, config, **flags), jobs=jobs)
        if files is None:
            notes, problems = list(reader.notes), list(reader.problems)
        else:
            notes, problems = reader.notes_at(files)
        for problem in problems:
            say(problem.one_line())
        failed += sum(1 for p in problems if p.severity == "error")
        write = _byte_writer()
        for note, lines, error in reader.chunk_lines(notes, jobs):
            if error is not None:
                say(f"{printable(note.path)}: error: {printable(error)}")
                failed += 1
            write(lines)
    return 1 if failed else 0


def _interactive(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for pipes, files and streams that cannot say)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


def _byte_writer() -> Any:
    """A writer of UTF-8 bytes to stdout: its byte buffer where the text layer would write the same bytes.

    That holds for a UTF-8 stdout without newline translation (not Windows); elsewhere, and for a
    stdout that has no buffer (a program that replaced it), the bytes go through the text layer.
    """
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
    if buffer is not None and encoding in ("utf-8", "utf8") and os.linesep == "\n":
        stream.flush()  # nothing written through the text layer may come after these bytes
        return buffer.write
    return lambda data: stream.write(data.decode("utf-8"))


_VALUE_OPTIONS = {
    "--vault": "vault", "--config": "config", "--strategy": "strategy", "--max-chunk-size": "max_chunk_size",
    "--separator-group": "separator_group", "--separators": "separators", "--jobs": "jobs", "-j": "jobs",
}
"""The options of `mindnet-chunk`, each taking one value, by the keyword `run_chunk` gets it as."""
_NUMBER = re.compile(r"[0-9]{1,9}")
"""What `fast_chunk_args` takes as a number: plain digits; a sign, spaces or anything else goes to typer."""


def fast_chunk_args(args: list[str]) -> dict[str, Any] | None:
    """The options of a plain `mindnet-chunk` command line, or None for typer to parse (and judge) it.

    Plain: only the options above, as `--opt value`, `--opt=value` or `-jN`, numbers as digits, no
    `--help`; anything else (a usage error, `-` followed by letters, `--`) is typer's, which reports
    it as it always did. What is accepted here means what it means to typer: the last of a repeated
    option wins, paths keep their order.
    """
    values: dict[str, Any] = {"paths": []}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            values["paths"].append(arg)
            continue
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
        else:  # a short option: `-j N` or `-jN`, as click reads it (`-j=3` is not 3 to click)
            name, value = arg[:2], arg[2:]
            eq = "=" if value else ""
        key = _VALUE_OPTIONS.get(name)
        if key is None or (not eq and i >= len(args)):
            return None
        if not eq:
            value, i = args[i], i + 1
            if value.startswith("-") and value != "-":
                return None  # an option where a value should be: typer decides what that means
        if key in ("jobs", "max_chunk_size"):
            if not _NUMBER.fullmatch(value):
                return None
            values[key] = int(value)
        elif key in ("vault", "config"):
            if not value:
                return None  # typer's Path makes "" into "."; leave that reading to it
            values[key] = Path(value)
        else:
            values[key] = value
    return values
