"""Pure text helpers shared by every stage: line starts, normalisation (R5), slugs, hashes.

Nothing here does I/O; everything is deterministic so chunk ids and hashes are stable.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HAS_TRAILING_SPACE = re.compile(r"[ \t\f\v](?:\n|\Z)")
_LINE_SPACE = " \t\f\v"
"""The spaces R5 removes at the end of a line (the same set `_HAS_TRAILING_SPACE` looks for)."""
_BLANK_RUNS = re.compile(r"\n{3,}")


def line_starts(text: str) -> list[int]:
    """Offsets where each line begins, splitting only on CRLF, CR and LF.

    `str.splitlines()` also splits on U+2028, form feeds and other characters that Markdown
    and editors treat as ordinary text, which would shift every line number after them.
    """
    if "\r" in text:
        return [0, *(m.end() for m in _LINE_BREAK.finditer(text))]
    # LF only (nearly every note): `str.find` in a loop is 3x faster than the regex.
    starts = [0]
    find = text.find
    i = find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = find("\n", i + 1)
    return starts


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
    quoted exactly, also inside a quote, a callout or a list item (`fence_spans`). Never applied
    to `fulltext`. Each pass runs only where it can change something: most chunks are ASCII or
    already NFKC, have no CR, no trailing spaces or no blank runs.
    """
    if "\r" in text:
        text = _LINE_BREAK.sub("\n", text)
    if "```" not in text and "~~~" not in text:
        return _normalise_prose(text).strip("\n")
    parts: list[str] = []
    prev = 0
    for fence in fence_spans(text):
        parts.append(_normalise_prose(text[prev : fence.inner_start]))
        parts.append(text[fence.inner_start : fence.inner_end])
        prev = fence.inner_end
    parts.append(_normalise_prose(text[prev:]))
    return "".join(parts).strip("\n")


def _normalise_prose(segment: str) -> str:
    if not segment.isascii() and not unicodedata.is_normalized("NFKC", segment):
        segment = unicodedata.normalize("NFKC", segment)
    if _HAS_TRAILING_SPACE.search(segment):
        # Per line, not a multiline `[ \t\f\v]+$` regex: that tries a match at every character (6x
        # slower on msdocs chunks) and needs a look-behind to stay linear on long indentation runs.
        segment = "\n".join([line.rstrip(_LINE_SPACE) for line in segment.split("\n")])
    if "\n\n\n" in segment:
        segment = _BLANK_RUNS.sub("\n\n", segment)
    return segment


# --- fenced code: the one scanner ----------------------------------------------------------------

FENCE_OPEN = re.compile(r"(?:[ \t]*(?:>|(?:[-+*]|\d{1,9}[.)])(?=[ \t])))*[ \t]*(`{3,}|~{3,})(.*)")
"""A line that opens a fence, also inside quotes and callouts (`>` markers) and list items (markers or
indentation), nested in any order (`> - > ```); group 1 is the fence, group 2 the info string."""
FENCE_CLOSE = re.compile(r"(?:[ \t]*>)*[ \t]*(`{3,}|~{3,})[ \t]*$")
"""A line that may close a fence (same character, at least as long: `closes_fence`)."""


@dataclass(frozen=True, slots=True)
class FenceSpan:
    """One fenced code block: where its opening line starts, its inner text, and where it ends."""

    start: int
    """Start of the opening fence line."""
    inner_start: int
    """Start of the line after the opening fence."""
    inner_end: int
    """Start of the closing fence line, or the end of the text for an unclosed fence."""
    end: int
    """End of the closing fence line (its line break excluded), or the end of the text."""


def fence_opener(line: str) -> str | None:
    """The fence (```` ``` ````, `~~~~`, …) a line opens, or None.

    Lenient on purpose (after `>` markers, list markers or any indentation): every caller uses it to
    keep text *out* of some treatment (R5 normalisation, comment masking, link extraction, sentence
    splitting), and treating a rare indented ```` ``` ```` line as code costs nothing there. A
    backtick fence whose info string holds a backtick is inline code (CommonMark), not a fence.
    """
    m = FENCE_OPEN.match(line)
    if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
        return None
    return m.group(1)


def closes_fence(line: str, fence: str) -> bool:
    """Whether `line` closes the fence `fence`: the same character, at least as many, nothing after."""
    m = FENCE_CLOSE.match(line)
    return m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)


def fence_spans(text: str, start: int = 0, end: int | None = None) -> list[FenceSpan]:
    """Every fenced code block of `text[start:end]`, in order; an unclosed fence runs to `end`.

    Only the lines holding ```` ``` ```` or `~~~` are read (`_marked_lines`): no other line can open or
    close a fence, and an import asks this of every note, chunk and sentence run (on the Rust book's 112
    chapters once each: 29 ms reading every line, 16 ms reading the marked ones).
    """
    end = len(text) if end is None else end
    if "```" not in text[start:end] and "~~~" not in text[start:end]:
        return []
    spans: list[FenceSpan] = []
    fence: str | None = None
    open_at = inner = 0
    for line_start, line_end, after in _marked_lines(text, start, end):
        line = text[line_start:line_end]
        if fence is None:
            fence = fence_opener(line)
            if fence is not None:
                open_at, inner = line_start, after
        elif closes_fence(line, fence):
            spans.append(FenceSpan(open_at, inner, line_start, line_end))
            fence = None
    if fence is not None:
        spans.append(FenceSpan(open_at, min(inner, end), end, end))
    return spans


_FENCE_MARK = re.compile(r"```|~~~")


def _marked_lines(text: str, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, end after its line break) of each line of `text[start:end]` that holds ```` ``` ```` or `~~~`,
    in order; lines end at CRLF, CR or LF (the break is not in `end`), and the first begins at `start`."""
    after = start
    for mark in _FENCE_MARK.finditer(text, start, end):
        at = mark.start()
        if at < after:
            continue  # on the line just yielded
        line_start = max(text.rfind("\n", start, at), text.rfind("\r", start, at)) + 1
        line_start = max(line_start, start)
        breaks = [i for i in (text.find("\r", at, end), text.find("\n", at, end)) if i >= 0]
        line_end = min(breaks) if breaks else end
        if line_end == end:
            after = end
        else:
            after = line_end + (2 if text.startswith("\r\n", line_end) and line_end + 1 < end else 1)
        yield line_start, line_end, after


def without_fences(text: str, replacement: str = " ") -> str:
    """`text` with every fenced code block (fence lines included) replaced by `replacement`."""
    spans = fence_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    prev = 0
    for fence in spans:
        parts.append(text[prev : fence.start])
        parts.append(replacement)
        prev = fence.end
    parts.append(text[prev:])
    return "".join(parts)


_SLUG_DROP = re.compile(r"[^\w\s-]", re.UNICODE)
_SLUG_SEP = re.compile(r"[\s_-]+")


def slugify(text: str) -> str:
    """Lower-case, NFC, word characters and hyphens only; keeps umlauts (`Größe` → `größe`)."""
    text = unicodedata.normalize("NFC", text).strip().lower()
    text = _SLUG_DROP.sub("", text)
    return _SLUG_SEP.sub("-", text).strip("-")


def not_utf8_at(text: str) -> int | None:
    """Where `text` stops being UTF-8 (a lone surrogate: a byte the OS or a terminal gave that was
    not UTF-8, kept by Python's surrogateescape), or None when all of it encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def content_hash(text: str) -> str:
    """Stable hex digest used for `content_hash`, `text_hash` and `stable_key`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def uuid5_string(namespace: uuid.UUID, name: str) -> str:
    """`str(uuid.uuid5(namespace, name))`, without building UUID objects.

    Why: every point an import writes is named this way (a chunk, a note, each of its edges: ~1 M names in a
    30,000-note vault), and the standard library's objects cost ~3.8 µs a name where this costs ~1.5 µs.
    """
    h = hashlib.sha1(namespace.bytes + name.encode("utf-8")).hexdigest()
    # Version nibble 5; variant bits 10 (RFC 4122) on the first nibble of the fourth group.
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}
