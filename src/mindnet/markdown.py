"""Markdown stage: a note body becomes its top-level blocks, each with an exact source span (R7-R11).

The chunker (R7-R10) cuts only between blocks and must account for every character of `fulltext`
(R11), so this module owns one contract: every `Block` carries `char_start`/`char_end` that slice the
body *as given* (Python str indices, whatever its line endings), plus 1-based `line_start`/`line_end`
that agree with `mindnet.text.line_of`.

Span convention (the same for every kind and both engines):

- A block's source region is the set of whole source lines the parser assigns to it.
- `char_start` is the first non-whitespace character of that region (so indentation, list or
  blockquote markers' leading spaces are outside; the marker itself is inside).
- `char_end` is one past the last non-whitespace character of the region: trailing blank lines,
  trailing spaces and the final line break are outside.
- "Whitespace" is `str.isspace`, and Obsidian comments (`%%…%%`) count as whitespace: they are
  masked with spaces before parsing (see `mask_comments`), so a block never starts or ends inside
  one and a heading inside a comment is no heading.

Coverage: every non-whitespace character of the masked body lies inside exactly one top-level block.
Text that CommonMark parses to nothing (link reference definitions `[x]: /url`) becomes a
`paragraph` block per run of non-blank lines, so nothing is lost downstream (R11).

Engines: `markdown-it` (markdown-it-py, CommonMark + GFM tables + footnotes + `$$` math, inline
parsing switched off) is the reference. `pyromark` (pulldown-cmark in Rust) is several times
faster; where pulldown-cmark decides a block otherwise, `_as_reference` applies markdown-it's
decision (a lone `|` row stays in its table; `$$` math is a block even with a `=` line inside; a
footnote definition right after a quote continues it lazily; an indented line after a link
reference definition is indented code). With those, the two engines give identical `Block`s
(kinds, spans, items, titles, callouts, checklists, fence info) on all 3,312 `.md` files of the
five shared corpora and on every fixture of `tests/test_markdown.py`, so `auto` means `pyromark`.
Re-check with `.venv/bin/python bench/markdown_parsers.py` after upgrading either parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeAlias

import pyromark
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin

from mindnet.text import closes_fence, fence_opener, fence_spans, line_of, line_starts, trim_span

BlockKind: TypeAlias = Literal[
    "heading", "paragraph", "list", "item", "code", "table", "blockquote", "html", "hr", "footnote", "math"
]
Engine: TypeAlias = Literal["auto", "markdown-it", "pyromark"]

DEFAULT_ENGINE: Literal["markdown-it", "pyromark"] = "pyromark"
"""What `engine="auto"` resolves to; see the module docstring for the parity figures behind it."""


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a note body, with a span that slices the body string exactly."""

    kind: BlockKind
    """heading, paragraph, list, item (only inside a list's `children`), code, table, blockquote
    (callouts included), html, hr, footnote (a `[^label]: …` definition) or math (a `$$…$$` block)."""
    char_start: int
    """Offset of the block's first non-whitespace character in the body (str index, not bytes)."""
    char_end: int
    """Half-open end: one past the last non-whitespace character; never includes the line break."""
    line_start: int
    """1-based line of `char_start`, lines split on CRLF, CR and LF only (`mindnet.text.line_of`)."""
    line_end: int
    """1-based line of the last character (`char_end - 1`), inclusive."""
    level: int = 0
    """Heading level 1-6 (ATX hashes or setext `=` → 1, `-` → 2); 0 for every other kind."""
    title: str = ""
    """Heading text without hashes or setext underline, whitespace collapsed; for a callout its title
    (text after `[!type]`); else empty. Used for `section_title` and `section_path` (R7)."""
    children: tuple[Block, ...] = ()
    """For a list: its items, each with its own span (nested lists stay inside their item, R9)."""
    callout: str | None = None
    """Obsidian callout type, lower-cased, when a blockquote's first line is `> [!type]` (R9)."""
    checklist: bool = False
    """List: every item is a task item (`- [ ]`, `- [x]`, any one status char); item: it is one."""
    fenced: bool = False
    """Code: True for a ``` or ~~~ fence (also unclosed, running to the end), False for indented."""
    info: str = ""
    """Code: the fence's info string, stripped (`python title=x`); empty otherwise."""


@dataclass(slots=True)
class _Raw:
    """An engine's finding before the shared span, title and callout rules are applied."""

    kind: BlockKind
    start: int
    end: int
    level: int = 0
    fenced: bool = False
    info: str = ""
    items: list[tuple[int, int]] | None = None


def parse_blocks(body: str, engine: Engine = "auto") -> list[Block]:
    """Split a note body into top-level blocks with exact char and line spans.

    Args:
        body: The note body (frontmatter removed, BOM stripped); any mix of CRLF, CR and LF.
        engine: `markdown-it` (reference), `pyromark` (fast, identical on the corpora) or `auto`
            (`DEFAULT_ENGINE`).

    Returns:
        Blocks in source order, non-overlapping; see the module docstring for the span convention.

    Raises:
        ValueError: For an unknown engine name.
    """
    masked = mask_comments(body)
    if engine == "auto":
        engine = DEFAULT_ENGINE
    if engine == "markdown-it":
        raws = _markdown_it_blocks(masked)
    elif engine == "pyromark":
        regions = _math_regions(masked)
        raws = _as_reference(masked, _pyromark_blocks(_mask_regions(masked, regions)), regions)
    else:
        raise ValueError(f"unknown Markdown engine {engine!r}; use 'auto', 'markdown-it' or 'pyromark'")
    return _finish(masked, raws)


# --- Obsidian comments -------------------------------------------------------------------------

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_TICKS_OR_COMMENT = re.compile(r"`+|%%")
_NOT_BREAK = re.compile(r"[^\r\n]")


def mask_comments(body: str) -> str:
    """Replace Obsidian `%%comments%%` (inline or multi-line) with spaces, keeping line breaks.

    The result has the same length and line structure as `body`, so offsets found in it are offsets
    into `body`. `%%` inside fenced code or a one-line inline code span is literal. An unclosed `%%`
    is literal too: Obsidian would hide the rest of the note, but a stray `50%%` must not make the
    rest of a note vanish from chunks (R11, nothing is lost). Fences are recognised leniently (after
    blockquote markers, list markers or any indentation) because a `%%` wrongly left in code costs
    nothing, while one wrongly masked would change the code.
    """
    if "%%" not in body:
        return body
    spans: list[tuple[int, int]] = []
    fence: str | None = None
    comment_start: int | None = None
    for m in _LINE.finditer(body):
        line_pos, line = m.start(), m.group().rstrip("\r\n")
        if comment_start is None:
            if fence is not None:
                if closes_fence(line, fence):
                    fence = None
                continue
            fence = fence_opener(line)
            if fence is not None:
                continue
        i = 0
        while i < len(line):
            if comment_start is not None:
                end = line.find("%%", i)
                if end < 0:
                    break
                spans.append((comment_start, line_pos + end + 2))
                comment_start, i = None, end + 2
                continue
            hit = _TICKS_OR_COMMENT.search(line, i)
            if hit is None:
                break
            if hit.group() == "%%":
                comment_start, i = line_pos + hit.start(), hit.end()
                continue
            # Inline code: a backtick run is closed by the next run of the same length on this line.
            run = hit.group()
            close_at = _closing_ticks(line, hit.end(), len(run))
            i = close_at if close_at >= 0 else hit.end()
        if m.end() == len(body):
            break
    if not spans:
        return body
    parts: list[str] = []
    prev = 0
    for start, end in spans:
        parts.append(body[prev:start])
        parts.append(_NOT_BREAK.sub(" ", body[start:end]))
        prev = end
    parts.append(body[prev:])
    return "".join(parts)


def _closing_ticks(line: str, pos: int, n: int) -> int:
    """End offset of the first run of exactly `n` backticks at or after `pos`, or -1."""
    for m in re.finditer(r"`+", line[pos:]):
        if len(m.group()) == n:
            return pos + m.end()
    return -1


# --- markdown-it (reference engine) ------------------------------------------------------------


@cache
def _markdown_it() -> MarkdownIt:
    """The reference parser, built once: block rules only, since spans never need inline parsing.

    `footnote_tail` is disabled because it moves footnote definitions to the end of the token stream
    and drops their source map; `allow_blank_lines=False` keeps an unclosed `$$` from swallowing the
    rest of a note.
    """
    md = MarkdownIt("commonmark").enable("table").use(footnote_plugin)
    md.use(dollarmath_plugin, allow_blank_lines=False)
    md.disable(["inline", "footnote_tail", "text_join"])
    return md


_OPEN_KINDS: dict[str, BlockKind] = {
    "heading_open": "heading",
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "table_open": "table",
    "blockquote_open": "blockquote",
    "footnote_reference_open": "footnote",
    "html_block": "html",
    "hr": "hr",
    "fence": "code",
    "code_block": "code",
    "math_block": "math",
    "math_block_label": "math",
}


def _markdown_it_blocks(text: str) -> list[_Raw]:
    """Top-level blocks from markdown-it tokens.

    Only `token.map` (source line indexes) is used, never positions inside markdown-it's own string:
    it replaces CRLF/CR with LF first, which shifts every char offset, but its lines are split on
    exactly the breaks `line_starts` splits on (CRLF, CR, LF), so line indexes agree.
    """
    starts = line_starts(text)
    n_lines = len(starts)

    def region(line_map: list[int]) -> tuple[int, int]:
        begin, end = line_map
        return starts[begin], (starts[end] if end < n_lines else len(text))

    raws: list[_Raw] = []
    tokens: list[Token] = _markdown_it().parse(text)
    current_list: _Raw | None = None
    for token in tokens:
        if token.level == 1 and token.type == "list_item_open" and current_list is not None:
            assert token.map is not None and current_list.items is not None
            current_list.items.append(region(token.map))
            continue
        if token.level != 0 or token.nesting < 0 or token.map is None:
            continue
        kind = _OPEN_KINDS.get(token.type)
        if kind is None:
            continue
        start, end = region(token.map)
        raw = _Raw(kind, start, end)
        if kind == "heading":
            raw.level = int(token.tag[1])
        elif kind == "code":
            raw.fenced = token.type == "fence"
            raw.info = token.info.strip()
        elif kind == "list":
            raw.items = []
        current_list = raw if kind == "list" else None
        raws.append(raw)
    return raws


# --- pyromark (fast engine) --------------------------------------------------------------------

PYROMARK_OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_FOOTNOTES
    | pyromark.Options.ENABLE_TASKLISTS
    | pyromark.Options.ENABLE_MATH
)

_PYROMARK_KINDS: dict[str, BlockKind] = {
    "Heading": "heading",
    "Paragraph": "paragraph",
    "List": "list",
    "Table": "table",
    "BlockQuote": "blockquote",
    "FootnoteDefinition": "footnote",
    "HtmlBlock": "html",
    "CodeBlock": "code",
}


@cache
def _pyromark() -> pyromark.Markdown:
    """The pulldown-cmark parser with the extensions that match the reference engine."""
    return pyromark.Markdown(options=PYROMARK_OPTIONS)


def _pyromark_blocks(text: str) -> list[_Raw]:
    """Top-level blocks from pulldown-cmark events; its ranges are UTF-8 byte offsets.

    NOTE: pulldown-cmark's range for a list, item, blockquote or footnote runs on over link
    reference definitions that follow it (they produce no events), so a container's end is taken
    from what it really contains: the ends of its inner events and the lines where inner blocks start.
    """
    if "\r" in text:
        # pulldown-cmark mis-parses lone-CR line endings (a fence's lines run together); LF has the
        # same length, so every offset stays valid.
        text = _LONE_CR.sub("\n", text)
    data = text.encode("utf-8")
    line_end_of = _byte_line_end if b"\r" in data else _lf_line_end
    raws: list[_Raw] = []
    depth = 0
    current: _Raw | None = None
    only_math = False
    content_end = item_end = 0
    for event, rng in _pyromark().events_with_range(text, merge_text=True):
        end = rng["end"]
        if type(event) is not dict or ("Start" not in event and "End" not in event):
            # Inline content (text, code, breaks, math) or a rule; most events are these.
            if depth == 0:
                if event == "Rule":
                    raws.append(_Raw("hr", rng["start"], end))
                continue
            if end > content_end:
                content_end = end
            if end > item_end:
                item_end = end
            if depth == 1 and only_math and not (type(event) is dict and "DisplayMath" in event):
                only_math = False
            continue
        start = rng["start"]
        if "Start" in event:
            tag: Any = event["Start"]
            name = tag if type(tag) is str else next(iter(tag))
            if depth == 0:
                current = _pyromark_start(name, tag, start, end)
                if current is not None:
                    raws.append(current)
                only_math = name == "Paragraph"
                content_end = item_end = 0
            else:
                line_end = line_end_of(data, start, end)
                content_end = max(content_end, line_end)
                if depth == 1 and name == "Item" and current is not None and current.items is not None:
                    _close_item(current, item_end)
                    current.items.append((start, end))
                    item_end = line_end
                else:
                    item_end = max(item_end, line_end)
                    only_math = False
            depth += 1
            continue
        depth -= 1
        if depth == 0 and current is not None:
            if only_math and data.startswith(b"$$", current.start):
                # A paragraph that is nothing but `$$…$$` display math is the math block the
                # reference engine finds (R9: never split).
                current.kind = "math"
            if current.kind in _CONTAINERS and content_end:
                current.end = min(current.end, content_end)
                _close_item(current, item_end)
            current = None
        elif depth >= 1 and next(iter(event["End"])) not in _CONTAINER_TAGS:
            content_end = max(content_end, end)
            item_end = max(item_end, end)
    if not text.isascii():
        _bytes_to_chars(data, raws)
    return raws


# --- pyromark: the reference engine's block decisions where pulldown-cmark decides otherwise ------
#
# Each rule below mirrors what markdown-it does (read from markdown-it-py 3 and mdit-py-plugins'
# dollarmath), so that both engines give identical blocks; `tests/test_markdown.py` and
# `bench/markdown_parsers.py` check them on fixtures and on every corpus note.

_MATH_OPEN = re.compile(r" {0,3}\$\$")
_MATH_LABEL = re.compile(r"\$\$\s*\([^)$\r\n]+?\)\s*$")
_ATX_LINE = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_LINK_DEFINITION = re.compile(r" {0,3}\[[^\]]+\]:")
_NOT_SPACE = re.compile(r"[^ \t\r\n]")


def _math_regions(text: str) -> list[tuple[int, int]]:
    """`$$` display-math blocks as dollarmath finds them: a `$$` line that starts a block (after a
    blank line, a heading or another math block), up to a line ending in `$$` or a `$$ (label)`;
    a blank line first means no block. Fenced code is skipped. Line-start offsets, end exclusive."""
    if "$$" not in text:
        return []
    fences = [(f.start, f.end) for f in fence_spans(text)]
    lines = [(m.start(), m.end(), m.group().rstrip("\r\n")) for m in _LINE.finditer(text) if m.start() < len(text)]
    regions: list[tuple[int, int]] = []
    i, can_start = 0, True
    while i < len(lines):
        start, _, line = lines[i]
        inside_fence = any(a <= start < b for a, b in fences)
        if can_start and not inside_fence and _MATH_OPEN.match(line):
            stop = _math_end(lines, i)
            if stop is not None:
                regions.append((start, lines[stop][1]))
                i, can_start = stop + 1, True
                continue
        can_start = not line.strip() or _ATX_LINE.match(line) is not None
        i += 1
    return regions


def _math_end(lines: list[tuple[int, int, str]], first: int) -> int | None:
    """Index of the line that closes the math block opened at `first`, or None."""
    opener = lines[first][2].strip()
    if len(opener) > 3:
        if opener.endswith("$$") or _MATH_LABEL.search(opener):
            return first
        if "$$" in opener[2:]:
            return None
    for k in range(first + 1, len(lines)):
        line = lines[k][2].strip()
        if line.endswith("$$") or _MATH_LABEL.search(line):
            return k
        if not line:
            return None
    return None


def _mask_regions(text: str, regions: list[tuple[int, int]]) -> str:
    """Math lines as plain letters of the same length, so pulldown-cmark sees one paragraph (a `=` or
    `-` line inside math would otherwise make a setext heading)."""
    if not regions:
        return text
    parts: list[str] = []
    prev = 0
    for start, end in regions:
        parts.append(text[prev:start])
        parts.append(_NOT_SPACE.sub("x", text[start:end]))
        prev = end
    parts.append(text[prev:])
    return "".join(parts)


def _as_reference(text: str, raws: list[_Raw], math: list[tuple[int, int]]) -> list[_Raw]:
    """pulldown-cmark's top-level blocks, changed where markdown-it (the reference) decides otherwise."""
    out: list[_Raw] = []
    for raw in _split_math(raws, math):
        prev = out[-1] if out else None
        if prev is not None and _next_line(text, prev.end, raw.start):
            if prev.kind == "table" and raw.kind == "paragraph" and _first_line(text, raw.start).strip() == "|":
                prev.end = raw.end  # markdown-it keeps a lone `|` row (and what follows it) in the table
                continue
            if prev.kind == "blockquote" and raw.kind == "footnote" and _lazy_tail(text, prev, raw):
                prev.end = raw.end  # markdown-it: the definition is a lazy continuation of the quote
                continue
        if raw.kind == "paragraph" and _after_link_definition(text, raw.start):
            out.extend(_indented_code(text, raw))
            continue
        out.append(raw)
    return out


def _split_math(raws: list[_Raw], math: list[tuple[int, int]]) -> list[_Raw]:
    """A math region becomes its own `math` block; the rest of the paragraph it sat in stays one."""
    if not math:
        return raws
    out: list[_Raw] = []
    for raw in raws:
        inside = [(a, b) for a, b in math if raw.start <= a < raw.end]
        if raw.kind not in ("paragraph", "heading", "math") or not inside:
            out.append(raw)
            continue
        pos = raw.start
        for a, b in inside:
            if a > pos:
                out.append(_Raw("paragraph", pos, a))
            out.append(_Raw("math", a, b))
            pos = b
        if pos < raw.end:
            out.append(_Raw("paragraph", pos, raw.end))
    return out


def _next_line(text: str, end: int, start: int) -> bool:
    """Whether `start` lies on the line right after the one `end` closes (no blank line between)."""
    between = text[end:start]
    return between.count("\n") + between.count("\r") - between.count("\r\n") <= 1 and not between.strip()


def _first_line(text: str, start: int) -> str:
    m = _LINE.match(text, start)
    return m.group().rstrip("\r\n") if m else ""


def _lazy_tail(text: str, quote: _Raw, footnote: _Raw) -> bool:
    """The quote ends in paragraph text (so a next line may continue it lazily), and the footnote
    definition is one paragraph (no blank line)."""
    last = text[quote.start : quote.end].rstrip().splitlines()[-1].lstrip(" \t>")
    body = text[footnote.start : footnote.end]
    return bool(last) and not last.startswith(("```", "~~~", "#")) and _BLANK_LINE_IN.search(body) is None


_BLANK_LINE_IN = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r|\n)")


def _after_link_definition(text: str, start: int) -> bool:
    """The paragraph starts right after a link reference definition line and is indented 4+ columns."""
    line_start = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start)) + 1
    indent = text[line_start:start]
    if line_start == 0 or not (indent.startswith("    ") or "\t" in indent):
        return False
    prev_end = line_start - 1
    if prev_end > 0 and text[prev_end - 1 : prev_end + 1] == "\r\n":
        prev_end -= 1
    prev_start = max(text.rfind("\n", 0, prev_end), text.rfind("\r", 0, prev_end)) + 1
    return _LINK_DEFINITION.match(text[prev_start:prev_end]) is not None


def _indented_code(text: str, raw: _Raw) -> list[_Raw]:
    """markdown-it ends a definition at its line, so indented lines after it are an indented code block;
    a later line indented less starts a paragraph again."""
    for m in _LINE.finditer(text, raw.start, raw.end):
        if m.start() > raw.start and not m.group().startswith(("    ", "\t")):
            return [_Raw("code", raw.start, m.start()), _Raw("paragraph", m.start(), raw.end)]
        if m.end() >= raw.end:
            break
    return [_Raw("code", raw.start, raw.end)]


_LONE_CR = re.compile(r"\r(?!\n)")
_CONTAINERS = frozenset({"list", "footnote"})
_CONTAINER_TAGS = frozenset({"Item", "List", "BlockQuote", "FootnoteDefinition"})


def _byte_line_end(data: bytes, start: int, limit: int) -> int:
    """End of the source line holding byte `start` (before its break), capped at `limit`."""
    ends = [pos for pos in (data.find(b"\n", start, limit), data.find(b"\r", start, limit)) if pos >= 0]
    return min(ends) if ends else limit


def _lf_line_end(data: bytes, start: int, limit: int) -> int:
    """`_byte_line_end` for text without CR: one search instead of two."""
    pos = data.find(b"\n", start, limit)
    return limit if pos < 0 else pos


def _close_item(raw: _Raw, item_end: int) -> None:
    """Clip the last item of a list to its real content end (see `_pyromark_blocks`)."""
    if raw.items and item_end:
        a, b = raw.items[-1]
        raw.items[-1] = (a, min(b, max(item_end, a)))


def _pyromark_start(name: str, tag: Any, start: int, end: int) -> _Raw | None:
    """A `_Raw` for a top-level Start event, or None for kinds we do not report."""
    kind = _PYROMARK_KINDS.get(name)
    if kind is None:
        return None
    raw = _Raw(kind, start, end)
    if kind == "heading":
        raw.level = int(tag["Heading"]["level"][1])
    elif kind == "code":
        style = tag["CodeBlock"]
        raw.fenced = isinstance(style, dict)
        raw.info = style["Fenced"].strip() if raw.fenced else ""
    elif kind == "list":
        raw.items = []
    return raw


def _bytes_to_chars(data: bytes, raws: list[_Raw]) -> None:
    """Rewrite byte offsets to str offsets in place, decoding each gap between offsets once."""
    offsets = set()
    for raw in raws:
        offsets.update((raw.start, raw.end))
        for item in raw.items or ():
            offsets.update(item)
    table: dict[int, int] = {}
    prev_byte = prev_char = 0
    for off in sorted(offsets):
        prev_char += len(data[prev_byte:off].decode("utf-8"))
        prev_byte = off
        table[off] = prev_char
    for raw in raws:
        raw.start, raw.end = table[raw.start], table[raw.end]
        if raw.items is not None:
            raw.items = [(table[a], table[b]) for a, b in raw.items]


# --- shared finishing: spans, lines, titles, callouts, coverage ---------------------------------

_ATX = re.compile(r"(#{1,6})(?=[ \t]|$)")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_CALLOUT = re.compile(r">[ \t]*\[!([^\]\s]+)\][+-]?(.*)")
_TASK = re.compile(r"(?:[-+*]|\d{1,9}[.)])[ \t]+\[[^\]\r\n]\](?=\s|$)")
_NON_BLANK_RUN = re.compile(r"\S(?:[^\r\n]|(?:\r\n|\r|\n)(?=[^\r\n]*\S))*")


def _finish(text: str, raws: list[_Raw]) -> list[Block]:
    """Apply the span convention, derive titles, callouts and checklists, and fill coverage gaps."""
    starts = line_starts(text)
    blocks: list[Block] = []
    covered = 0
    for raw in raws:
        span = trim_span(text, raw.start, raw.end)
        if span is None or span[0] < covered:
            continue
        for gap in _gaps(text, covered, span[0], starts):
            blocks.append(gap)
        blocks.append(_block(text, starts, raw, span))
        covered = span[1]
    blocks.extend(_gaps(text, covered, len(text), starts))
    return blocks


def _gaps(text: str, start: int, end: int, starts: list[int]) -> Iterator[Block]:
    """Paragraph blocks for non-blank line runs no parser block claimed (link reference definitions)."""
    for m in _NON_BLANK_RUN.finditer(text, start, end):
        s, e = trim_span(text, m.start(), m.end()) or (m.start(), m.end())
        yield Block("paragraph", s, e, line_of(starts, s), line_of(starts, e - 1))


def _block(text: str, starts: list[int], raw: _Raw, span: tuple[int, int]) -> Block:
    """Build the record for one trimmed top-level span."""
    start, end = span
    title = ""
    callout = None
    if raw.kind == "heading":
        title = _heading_title(text[start:end])
    elif raw.kind == "blockquote":
        first = text[start:end].split("\n", 1)[0].split("\r", 1)[0]
        m = _CALLOUT.match(first)
        if m:
            callout = m.group(1).lower()
            title = " ".join(m.group(2).split())
    children: tuple[Block, ...] = ()
    checklist = False
    if raw.items:
        items = []
        for a, b in raw.items:
            item_span = trim_span(text, max(a, start), min(b, end))
            if item_span is None:
                continue
            s, e = item_span
            is_task = _TASK.match(text, s, e) is not None
            items.append(Block("item", s, e, line_of(starts, s), line_of(starts, e - 1), checklist=is_task))
        children = tuple(items)
        checklist = bool(children) and all(item.checklist for item in children)
    return Block(
        raw.kind,
        start,
        end,
        line_of(starts, start),
        line_of(starts, end - 1),
        level=raw.level,
        title=title,
        children=children,
        callout=callout,
        checklist=checklist,
        fenced=raw.fenced,
        info=raw.info,
    )


def _heading_title(source: str) -> str:
    """Heading text from its source: ATX hashes and closing hashes, or the setext underline, removed."""
    lines = re.split(r"\r\n|\r|\n", source)
    m = _ATX.match(lines[0])
    # ATX: hashes and closing hashes go; setext: every line but the underline is the title.
    text = _ATX_CLOSE.sub("", lines[0][m.end() :]) if m else " ".join(lines[:-1])
    return " ".join(text.split())
