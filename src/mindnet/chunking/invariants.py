"""The chunk invariants of R8, R10 and R11 as one pure checker, shared by tests, sweeps and benchmarks.

`check_chunks` knows nothing about how chunks were made: it re-parses the body, so it can judge the
`structure` strategy, the `recursive` one, or a third-party splitter in the benchmark alike. It
returns human-readable violations (empty list = all invariants hold) instead of raising, so a sweep
can report every problem of every note at once.

What "inside" means: a position is inside a unit when it lies strictly between the unit's first
and last character. Units are sentences of paragraphs and plain list items (the same definition
the chunker uses, `structure.block_leaves`) and whole atomic blocks (heading, code, table,
blockquote, HTML, rule, math, footnote, structured list item).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Protocol

from mindnet.chunking.structure import Leaf, block_leaves
from mindnet.chunking.tokens import Tokenizer
from mindnet.config import Profile
from mindnet.markdown import Block, mask_comments, parse_blocks
from mindnet.text import normalise

_PROSE = frozenset({"paragraph", "list"})
"""Blocks overlap may be taken from (R10: never from code, tables, quotes or across headings)."""


class SpanLike(Protocol):
    """What the checker reads from a `ChunkSpan` or a `Chunk`."""

    @property
    def char_start(self) -> int: ...
    @property
    def char_end(self) -> int: ...
    @property
    def content_start(self) -> int: ...
    @property
    def oversize(self) -> bool: ...


def check_chunks(
    body: str,
    spans_or_chunks: Sequence[SpanLike],
    tokenizer: Tokenizer,
    profile: Profile,
    *,
    lang: str = "de",
    blocks: list[Block] | None = None,
) -> list[str]:
    """All violations of the chunk invariants for one note body; an empty list means none.

    Checks, per chunk `i`: offsets in bounds and non-empty new content; `text` equals
    `normalise(body[char_start:char_end])` and `token_count` its count (for `Chunk` records);
    the size is at most `max` unless `oversize` (and `oversize` only when above it); no boundary
    (`char_start`, `content_start`, `char_end`) inside a sentence or an atomic block; the overlap
    prefix `[char_start, content_start)` lies in the previous chunk, holds only paragraph/list
    text, starts no heading, and is whole sentences within `overlap_max` unless one sentence.
    Across chunks: new-content ranges disjoint, ordered, and covering every non-whitespace
    character of the body; every H2/H3 heading starts a chunk with no overlap.
    """
    if blocks is None:
        blocks = parse_blocks(body)
    units = _Units(body, blocks, lang)
    out: list[str] = []
    covered = 0
    prev: SpanLike | None = None
    for i, chunk in enumerate(spans_or_chunks):
        s, c, e = chunk.char_start, chunk.content_start, chunk.char_end
        if not (0 <= s <= c < e <= len(body)):
            out.append(f"chunk {i}: offsets out of order or bounds: {s}, {c}, {e} (body {len(body)})")
            prev = chunk
            continue
        text = normalise(body[s:e])
        out.extend(_record_checks(i, chunk, text, tokenizer))
        size = tokenizer.count(text)
        if size > profile.max and not chunk.oversize:
            out.append(f"chunk {i}: {size} tokens > max {profile.max} without oversize")
        if chunk.oversize and size <= profile.max:
            out.append(f"chunk {i}: oversize but only {size} tokens <= max {profile.max}")
        if chunk.oversize and (units_in := units.count(c, e, headings=False)) > 1:
            out.append(f"chunk {i}: oversize with {units_in} units besides headings; only one may exceed max")
        if c < covered:
            out.append(f"chunk {i}: new content starts at {c}, before the previous chunk's end {covered}")
        elif body[covered:c].strip():
            out.append(f"chunk {i}: non-whitespace text {_show(body[covered:c])} at {covered}..{c} in no chunk")
        covered = max(covered, e)
        for name, pos in (("char_end", e), ("char_start", s), ("content_start", c)):
            inside = units.inside(pos)
            if inside is not None:
                out.append(f"chunk {i}: {name} {pos} inside a {inside}")
        if s < c:
            out.extend(_overlap_checks(i, body, chunk, prev, units, tokenizer, profile))
        prev = chunk
    if body[covered:].strip():
        out.append(f"non-whitespace text {_show(body[covered:])} after the last chunk at {covered}")
    out.extend(_heading_checks(body, spans_or_chunks, blocks))
    return out


def _heading_checks(body: str, chunks: Sequence[SpanLike], blocks: list[Block]) -> list[str]:
    """Every H2/H3 starts a chunk with no overlap, or lies in the heading run that starts one.

    A chunk may begin with several headings and nothing between them (`## A` then `### B`): the
    structure chunker joins such heading-only pieces to the next chunk instead of emitting them.
    """
    clean = sorted(chunk.char_start for chunk in chunks if chunk.char_start == chunk.content_start)
    out: list[str] = []
    for i, block in enumerate(blocks):
        if block.kind != "heading" or block.level not in (2, 3):
            continue
        k = bisect.bisect_right(clean, block.char_start) - 1
        start = clean[k] if k >= 0 else None
        run_ok = start is not None and all(
            b.kind == "heading" or not body[b.char_start : b.char_end].strip()
            for b in blocks[: i + 1]
            if start <= b.char_start <= block.char_start
        )
        ends = [chunk.char_end for chunk in chunks if chunk.char_start == start]
        if not run_ok or not ends or ends[0] <= block.char_start:
            out.append(f"H{block.level} {block.title!r} at {block.char_start} does not start a chunk cleanly")
    return out


def _record_checks(i: int, chunk: SpanLike, text: str, tokenizer: Tokenizer) -> list[str]:
    """For full `Chunk` records: stored text and token count agree with the body (R5, R11)."""
    out = []
    stored = getattr(chunk, "text", None)
    if stored is not None and stored != text:
        out.append(f"chunk {i}: text differs from normalise(body[char_start:char_end])")
    count = getattr(chunk, "token_count", None)
    if count is not None and stored is not None and count != tokenizer.count(stored):
        out.append(f"chunk {i}: token_count {count} != tokenizer count {tokenizer.count(stored)}")
    return out


def _overlap_checks(
    i: int,
    body: str,
    chunk: SpanLike,
    prev: SpanLike | None,
    units: _Units,
    tokenizer: Tokenizer,
    profile: Profile,
) -> list[str]:
    """R10: the prefix is whole trailing sentences of the previous chunk, prose only, within the cap."""
    s, c = chunk.char_start, chunk.content_start
    out = []
    if prev is None or s < prev.char_start or s >= prev.char_end:
        out.append(f"chunk {i}: overlap {s}..{c} does not begin inside the previous chunk")
    for block in units.blocks_between(s, c):
        if block.kind not in _PROSE:
            out.append(f"chunk {i}: overlap {s}..{c} reaches into a {block.kind} at {block.char_start}")
    if units.heading_at(c):
        out.append(f"chunk {i}: overlap {s}..{c} runs across a heading")
    size = tokenizer.count(normalise(body[s:c]))
    sentences = units.count(s, c)
    if size > profile.overlap_max and sentences > 1:
        out.append(f"chunk {i}: overlap of {sentences} sentences is {size} tokens > overlap_max {profile.overlap_max}")
    return out


class _Units:
    """The body's uncuttable units, with sentences split lazily only where a position needs them."""

    def __init__(self, body: str, blocks: list[Block], lang: str) -> None:
        self.body = body
        self.masked = mask_comments(body)
        self.blocks = blocks
        self.starts = [b.char_start for b in blocks]
        self.lang = lang
        self._leaves: dict[int, list[Leaf]] = {}

    def _block_at(self, pos: int) -> Block | None:
        """The block whose span holds `pos` strictly inside, if any."""
        k = bisect.bisect_right(self.starts, pos) - 1
        if k >= 0 and self.blocks[k].char_start < pos < self.blocks[k].char_end:
            return self.blocks[k]
        return None

    def leaves(self, block: Block) -> list[Leaf]:
        if block.char_start not in self._leaves:
            self._leaves[block.char_start] = block_leaves(self.masked, block, self.lang)[0]
        return self._leaves[block.char_start]

    def inside(self, pos: int) -> str | None:
        """Name of the unit `pos` lies strictly inside, or None when a cut there is allowed."""
        block = self._block_at(pos)
        if block is None:
            return None
        for leaf in self.leaves(block):
            if leaf.start < pos < leaf.end:
                return "sentence" if leaf.kind == "sentence" else (leaf.block.kind if leaf.block else leaf.kind)
        if block.kind in ("list", "blockquote") and any(a < pos < b for a, b in _fences(self.masked, block)):
            return f"fence inside a {block.kind}"
        return None

    def blocks_between(self, start: int, end: int) -> list[Block]:
        """Blocks that intersect [start, end)."""
        k = max(0, bisect.bisect_right(self.starts, start) - 1)
        out = []
        while k < len(self.blocks) and self.blocks[k].char_start < end:
            if self.blocks[k].char_end > start:
                out.append(self.blocks[k])
            k += 1
        return out

    def heading_at(self, pos: int) -> bool:
        k = bisect.bisect_left(self.starts, pos)
        return k < len(self.blocks) and self.starts[k] == pos and self.blocks[k].kind == "heading"

    def count(self, start: int, end: int, *, headings: bool = True) -> int:
        """How many units (sentences, atomic leaves) intersect [start, end), headings optional."""
        return sum(
            1
            for block in self.blocks_between(start, end)
            for leaf in self.leaves(block)
            if leaf.start < end and leaf.end > start and (headings or leaf.kind != "heading")
        )


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_OPEN = re.compile(r"[ \t>]*(?:(?:[-+*]|\d{1,9}[.)])[ \t]+)*(`{3,}|~{3,})([^\r\n]*)")
_CLOSE = re.compile(r"[ \t>]*(`{3,}|~{3,})[ \t]*$")


def _fences(text: str, block: Block) -> list[tuple[int, int]]:
    """Fenced code regions nested in a list or quote, found by a line scan of our own.

    The chunker's units come from `structure.block_leaves`; this independent scan makes sure a
    mistake there cannot hide a cut inside nested code. A fence left open ends with its block.
    """
    regions: list[tuple[int, int]] = []
    opened: tuple[str, int] | None = None
    for m in _LINE.finditer(text, block.char_start, block.char_end):
        line = m.group().rstrip("\r\n")
        if opened is None:
            found = _OPEN.match(line)
            if found and not (found.group(1)[0] == "`" and "`" in found.group(2)):
                opened = (found.group(1), m.start() + found.start(1))
        else:
            close = _CLOSE.match(line)
            if close and close.group(1)[0] == opened[0][0] and len(close.group(1)) >= len(opened[0]):
                regions.append((opened[1], m.start() + len(line.rstrip())))
                opened = None
        if m.end() >= block.char_end:
            break
    if opened is not None:
        regions.append((opened[1], block.char_end))
    return regions


def _show(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 40 else text[:37] + "...")
