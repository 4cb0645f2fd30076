"""Pure text helpers shared by every stage: line starts, normalisation (R5), slugs, hashes.

Nothing here does I/O; everything is deterministic so chunk ids and hashes are stable.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_TRAILING_SPACE = re.compile(r"[ \t\f\v]+$", re.M)
_BLANK_RUNS = re.compile(r"\n{3,}")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins, splitting only on CRLF, CR and LF.

    `str.splitlines()` also splits on U+2028, form feeds and other characters that Markdown
    and editors treat as ordinary text, which would shift every line number after them.
    """
    return [0, *(m.end() for m in _LINE_BREAK.finditer(text))]


def line_of(starts: list[int], offset: int) -> int:
    """1-based line number of a char offset, given `line_starts()` of the same text."""
    return bisect.bisect_right(starts, offset)


def trim_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) shrunk to its first and last non-whitespace characters; None if blank."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def normalise(text: str) -> str:
    """Chunk text and embedding input (R5): LF endings, NFKC, no trailing spaces, blank runs collapsed.

    Fenced code keeps its inner text verbatim apart from line endings, so code answers can be
    quoted exactly. Never applied to `fulltext`.
    """
    text = _LINE_BREAK.sub("\n", text)
    parts: list[str] = []
    for is_code, segment in _split_fences(text):
        if is_code:
            parts.append(segment)
        else:
            segment = unicodedata.normalize("NFKC", segment)
            segment = _TRAILING_SPACE.sub("", segment)
            parts.append(_BLANK_RUNS.sub("\n\n", segment))
    return "".join(parts).strip("\n")


def _split_fences(text: str) -> list[tuple[bool, str]]:
    """Split LF text into (is_fenced_code_inner, segment) pieces; fence lines count as prose."""
    pieces: list[tuple[bool, str]] = []
    lines = text.split("\n")
    prose: list[str] = []
    code: list[str] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        chunk = line if last else line + "\n"
        if fence is None:
            m = _FENCE_OPEN.match(line)
            prose.append(chunk)
            if m:
                fence = m.group(1)
                pieces.append((False, "".join(prose)))
                prose = []
        else:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                pieces.append((True, "".join(code)))
                code = []
                fence = None
                prose.append(chunk)
            else:
                code.append(chunk)
    if code:
        pieces.append((True, "".join(code)))
    if prose:
        pieces.append((False, "".join(prose)))
    return pieces


_SLUG_DROP = re.compile(r"[^\w\s-]", re.UNICODE)
_SLUG_SEP = re.compile(r"[\s_-]+")


def slugify(text: str) -> str:
    """Lower-case, NFC, word characters and hyphens only; keeps umlauts (`Größe` → `größe`)."""
    text = unicodedata.normalize("NFC", text).strip().lower()
    text = _SLUG_DROP.sub("", text)
    return _SLUG_SEP.sub("-", text).strip("-")


def content_hash(text: str) -> str:
    """Stable hex digest used for `content_hash`, `text_hash` and `stable_key`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
