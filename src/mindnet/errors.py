"""The error classes mindnet raises. The library raises; only the CLI prints and exits.

Every error that concerns a user's file carries the path and, where known, the 1-based line,
so the one-line message can point at the exact spot (R3).
"""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional controls: printed raw, one in a file name reorders the rest of the report line on screen
("Trojan Source"), so `evil\u202edm.md` reads as another file. Other format characters (ZWJ in emoji)
stay as they are."""


def printable(text: str) -> str:
    """`text` with control characters, line/paragraph separators, bidirectional controls and lone
    surrogates escaped (`\\n`, `\\x1b`, `\\u202e`).

    Why: a file name may hold a newline, a terminal escape or a bidi override; printed raw it splits
    the one-line report that editors and CI read line by line, recolours the user's terminal, or
    makes the line show another name than the file's.
    """
    if text.isprintable():
        return text
    return "".join(_escaped(c) for c in text)


def _escaped(char: str) -> str:
    if "\udc80" <= char <= "\udcff":  # a byte that was not UTF-8 (surrogateescape): shown as that byte
        return f"\\x{ord(char) - 0xDC00:02x}"
    if unicodedata.category(char) not in ("Cc", "Zl", "Zp", "Cs") and char not in _BIDI:
        return char
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def location(path: str, line: int | None) -> str:
    """`path:line` (or `path`) for a one-line report, the path made printable."""
    where = printable(path)
    return f"{where}:{line}" if line is not None else where


def mib(size: int) -> str:
    """A size in bytes as MiB for a report line: `5.0 MiB`, `0.95 MiB`.

    Why one helper: limits are powers of two (`max_file_bytes` is 5 MiB), and a report that divided
    by 10**6 called the 5 MiB default a "5.2 MB limit" while the README said 5.0 MB (issue 28).
    Every size a user reads is in MiB, from here.
    """
    shown = f"{size / 2**20:.2f}"
    return f"{shown[:-1] if shown.endswith('0') else shown} MiB"


class MindnetError(Exception):
    """Root of every error mindnet raises on purpose."""


class ConfigError(MindnetError):
    """A setting in mindnet.toml, the environment or a flag is invalid."""


class InputError(MindnetError):
    """A user's file is bad at a known spot (a note, a query file, a BEIR file): path and line travel along."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """`path:line: reason`, the format editors and CI annotators understand."""
        return f"{location(self.path, self.line)}: {printable(self.reason)}"


class ChunkingError(InputError):
    """A chunking strategy could not finish a note (a runaway user separator pattern): the note's
    path and the reason travel apart, so a report names the file once and the import skips just it."""


class StoreError(MindnetError):
    """The store is unusable: locked, built with another model, unreachable."""


class NotFoundError(MindnetError):
    """A note (or other named thing) that does not exist; `suggestions` are the closest names."""

    def __init__(self, message: str, suggestions: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.suggestions = suggestions or []


class NoteError(InputError):
    """A note cannot be read or parsed; the rest of the vault still loads (R3)."""


class VaultNotFoundError(NotFoundError):
    """The vault folder does not exist: a typo must not create folders or look like an empty vault."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"vault not found: {path}")
