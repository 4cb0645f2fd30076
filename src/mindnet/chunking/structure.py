"""Strategy `structure` (R7-R10): a note body becomes sections, sections become token-sized chunks.

The body is parsed to top-level blocks (`mindnet.markdown`), split into sections at H2/H3, and each
section is flattened into *leaves*: the smallest pieces a chunk may begin or end at (a sentence of a
paragraph or plain list item, or a whole atomic block: heading, code, table, blockquote, HTML, rule,
math, footnote, structured list item). Between two leaves sits a boundary with a strength:

    NONE < SENT < ITEM < GROUP < BLOCK < ISOLATE

NONE glues two leaves (a heading to what follows it, a list's introducing sentence to its first
item), ISOLATE forces a cut (tables, checklists, quotes over two lines, stop headings). Packing is a
greedy walk over the strongest units first, descending to weaker boundaries only inside a unit that
does not fit, which is R8's "cut softly at paragraph and list-item boundaries, then at sentence
boundaries" without ever cutting inside a leaf.

Edge-case decisions R7-R10 leave open (H1s, section paths, oversize leaves, lists, isolated blocks,
stop sections, overlap): docs/ARCHITECTURE.md, "Strategy structure: edge cases".

Sizes: packing decisions use the sum of per-leaf token counts (exact whenever leaves are separated
by whitespace, which sentencepiece never merges across); every emitted chunk's size is then checked
with the real count of its normalised text, and shrunk (or its overlap dropped) if that disagrees.
Every count, per leaf or per chunk, comes from one tokenizer pass over the note (`NoteTokens`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

from mindnet.chunking.base import ChunkSpan
from mindnet.chunking.sentences import sentence_spans
from mindnet.chunking.tokens import NoteTokens, Tokenizer
from mindnet.config import Profile
from mindnet.markdown import Block, mask_comments, parse_blocks
from mindnet.text import closes_fence, fence_opener, normalise, trim_span

NONE, SENT, ITEM, GROUP, BLOCK, ISOLATE = range(6)
"""Boundary strengths between two leaves, weakest first; the order is what packing relies on."""

LIST_GROUP_MAX = 8
"""Long lists are cut into groups of at most this many items (R9: blocks of 5-8 items); spreading
the items evenly gives groups of at least 5 for every list of 10 or more items (9 → 5 + 4)."""
LIST_ITEM_OVERLAP = 50
"""R10: for lists, the previous item is the overlap when it is under this many tokens."""
QUOTE_ALONE_LINES = 2
"""R9: a blockquote or callout longer than this many source lines is its own chunk."""

_ITEM_MARKER = re.compile(r"(?:[-+*]|\d{1,9}[.)])(?:[ \t]+\[[^\]\r\n]\])?(?=\s|$)")
_STRUCTURED_LINE = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:[-+*][ \t]|\d{1,9}[.)][ \t]|`{3,}|~{3,}|>|\||\$\$|<[A-Za-z!/])")
_FENCE_LINE = re.compile(r"(?:^|\r\n|\r|\n)[ \t>]*(?:[-+*][ \t]+|\d{1,9}[.)][ \t]+)?(?:`{3,}|~{3,})")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_ATOMIC_KINDS = {
    "code": "code",
    "table": "table",
    "blockquote": "quote",
    "html": "atom",
    "hr": "atom",
    "math": "atom",
    "footnote": "atom",
    "heading": "heading",
}


@dataclass(slots=True)
class Leaf:
    """The smallest piece a chunk may start or end at (never cut).

    Mutable on purpose: building a section's leaves stretches them over comments and marks stop
    regions; nothing outside this module keeps one.
    """

    start: int
    end: int
    kind: str
    """sentence (prose: may be overlap), heading, code, table, quote, item (structured), atom."""
    unit_start: bool = False
    """First sentence of a paragraph or list item: where overlap prefers to begin (R10)."""
    item: int = -1
    """For the sentences of a list item: the item's `char_start`; else -1."""
    code: bool = False
    """A fenced or indented code block lies in this leaf (`has_code`)."""
    no_overlap: bool = False
    """Inside a stop section or after a stop heading: chunks here never carry overlap."""
    block: Block | None = None
    """The top-level block the leaf comes from (a table leaf's block gives the `summary`)."""


@dataclass(slots=True)
class _Section:
    """The blocks under one H2/H3 (or the preamble), with the title and path its chunks carry."""

    title: str
    path: str
    stop: bool
    blocks: list[Block] = field(default_factory=list)


def chunk_structure(
    body: str,
    profile: Profile,
    *,
    stop_sections: Sequence[str],
    tokenizer: Tokenizer,
    lang: str = "de",
    blocks: Sequence[Block] | None = None,
    tokens: NoteTokens | None = None,
) -> list[ChunkSpan]:
    """Cut a note body into chunks along its structure (R7-R10); pure, deterministic.

    Args:
        body: The note body exactly as in `fulltext` (any line endings).
        profile: Target, max and overlap sizes for the note's type, in tokens.
        stop_sections: Heading texts whose section is always its own chunk, without overlap.
        tokenizer: The embedding model's tokenizer; sizes are counts of `normalise(text)`.
        lang: Language for sentence splitting.
        blocks: `parse_blocks(body)` when the caller already has it.
        tokens: `tokenizer.note(body)` when the caller already has it: every size below is a span
            count derived from that one pass.

    Returns:
        Chunk spans in body order; see the module docstring for every edge-case rule.
    """
    blocks = parse_blocks(body) if blocks is None else list(blocks)
    tokens = tokenizer.note(body) if tokens is None else tokens
    masked = mask_comments(body)
    stops = {fold_title(s) for s in stop_sections}
    sections = _sections(_with_gaps(body, blocks), stops)
    plans = [(section, _leaves(body, masked, section, lang, stops)) for section in sections]
    all_leaves = [leaf for _, (leaves, _) in plans for leaf in leaves]
    counts = [tokens.count(leaf.start, leaf.end) for leaf in all_leaves]
    out: list[ChunkSpan] = []
    offset = 0
    for section, (leaves, bounds) in plans:
        inner = [c - 2 for c in counts[offset : offset + len(leaves)]]
        offset += len(leaves)
        packer = _Packer(leaves, bounds, inner, tokens, profile)
        for lo, hi in _segments(bounds, len(leaves)):
            overlap = not section.stop and not any(leaf.no_overlap for leaf in leaves[lo:hi])
            for char_start, first, last in packer.pack(lo, hi, overlap):
                out.append(_span(body, section, leaves[first:last], char_start, packer.oversize(char_start, last)))
    return _merge_heading_runs(body, out, blocks, stops, tokens, profile)


def _merge_heading_runs(
    body: str,
    spans: list[ChunkSpan],
    blocks: list[Block],
    stops: set[str],
    tokens: NoteTokens,
    profile: Profile,
) -> list[ChunkSpan]:
    """Join a chunk that holds only headings to the chunk after it.

    `# Title` before the first H2, or `## Risks` followed directly by `### First risk`, would
    otherwise be chunks of a few tokens that say nothing and crowd search results (12 % of the
    sample vault's chunks). The heading run starts the next chunk instead, so every H2/H3 still
    begins a chunk's text, and the section fields are those of the deepest heading (R7). Only the
    preamble or a parent section joins (never a sibling: `## A` then `## B` stay apart), and not
    when the joined chunk would pass `max` or into a stop section (which stays links only).
    """
    heading_starts = sorted(b.char_start for b in blocks if b.kind == "heading")
    content_starts = sorted(
        b.char_start for b in blocks if b.kind != "heading" and body[b.char_start : b.char_end].strip()
    )
    merged: list[ChunkSpan] = []
    for span in reversed(spans):
        nxt = merged[-1] if merged else None
        if (
            nxt is not None
            and nxt.content_start == nxt.char_start
            and fold_title(nxt.section_title or "") not in stops
            and (span.section_path == "/" or (nxt.section_path or "").startswith(f"{span.section_path}/"))
            and _only_headings(body, span, heading_starts, content_starts)
        ):
            joined = ChunkSpan(span.char_start, nxt.char_end, span.char_start, nxt.section_title, nxt.section_path,
                               nxt.oversize, nxt.has_code, nxt.summary)
            if nxt.oversize or tokens.count(joined.char_start, joined.char_end) <= profile.max:
                merged[-1] = joined
                continue
        merged.append(span)
    merged.reverse()
    return merged


def _only_headings(body: str, span: ChunkSpan, heading_starts: list[int], content_starts: list[int]) -> bool:
    """Whether the span's own content is headings and no other block.

    The content must begin with a heading: a span can also begin with the last sentences of a
    paragraph that an earlier chunk opened, and that paragraph's start lies before the span.
    """
    lo, hi = span.content_start, span.char_end
    first = bisect.bisect_left(heading_starts, lo)
    if first == len(heading_starts) or heading_starts[first] >= hi or body[lo : heading_starts[first]].strip():
        return False
    return bisect.bisect_left(content_starts, hi) == bisect.bisect_left(content_starts, lo)


def fold_title(title: str) -> str:
    """Heading text as compared with stop sections: whitespace collapsed, case-folded, no `:`."""
    return " ".join(title.split()).strip(" :").casefold()


# --- sections ----------------------------------------------------------------------------------


def _with_gaps(body: str, blocks: list[Block]) -> list[Block]:
    """Blocks plus an atomic `html` block for each run of text no block claims.

    `parse_blocks` treats Obsidian `%%comments%%` as whitespace, but R11 coverage is over the raw
    body, so a comment between blocks must still land in some chunk.
    """
    out: list[Block] = []
    prev = 0
    for block in [*blocks, None]:
        stop = len(body) if block is None else block.char_start
        gap = trim_span(body, prev, stop)
        if gap is not None:
            out.append(Block("html", gap[0], gap[1], 0, 0))
        if block is not None:
            out.append(block)
            prev = block.char_end
    return out


def _sections(blocks: list[Block], stops: set[str]) -> list[_Section]:
    """Group blocks into sections: each H2/H3 (and an H1 after one) starts a new section (R7)."""
    sections = [_Section(title="", path="/", stop=False)]
    h2: str | None = None
    for block in blocks:
        current = sections[-1]
        level = block.level if block.kind == "heading" else 0
        in_preamble = len(sections) == 1
        if level in (2, 3) or (level == 1 and not in_preamble):
            if level == 2:
                h2, path = block.title, f"/{block.title}"
            elif level == 3:
                path = f"/{h2}/{block.title}" if h2 is not None else f"/{block.title}"
            else:
                h2, path = None, "/"
            current = _Section(title=block.title, path=path, stop=fold_title(block.title) in stops)
            sections.append(current)
        elif level == 1 and in_preamble and not current.title:
            current.title = block.title
        current.blocks.append(block)
    return [s for s in sections if s.blocks]


# --- leaves and boundaries ---------------------------------------------------------------------


def _leaves(body: str, masked: str, section: _Section, lang: str, stops: set[str]) -> tuple[list[Leaf], list[int]]:
    """Flatten a section into leaves and the boundary strength before each leaf.

    `bounds[i]` is the strength between `leaves[i - 1]` and `leaves[i]`; `bounds[0]` is a placeholder.
    """
    leaves: list[Leaf] = []
    bounds: list[int] = []
    isolate_after: list[int] = []
    no_overlap = section.stop
    previous: Block | None = None
    for block in section.blocks:
        new, inner = block_leaves(masked, block, lang)
        first = len(leaves)
        # R9: the sentence that introduces a list stays with its first item; a heading with its text;
        # a sentence ending in ":" with the table or quote it announces.
        intro = previous is not None and previous.kind == "paragraph" and (
            block.kind == "list" or (block.kind in ("table", "blockquote") and _announces(masked, previous))
        )
        glued = bool(leaves) and (leaves[-1].kind == "heading" or intro)
        bounds.append(NONE if glued else BLOCK)
        bounds.extend(inner)
        leaves.extend(new)
        stop_heading = block.kind == "heading" and fold_title(block.title) in stops
        no_overlap = no_overlap or stop_heading
        for leaf in new:
            leaf.no_overlap = no_overlap
        alone = _alone(block)
        if stop_heading or alone:
            _isolate_before(bounds, first)
        if alone:
            isolate_after.append(len(leaves))
        previous = block
    for index in isolate_after:
        if index < len(bounds) and bounds[index] > NONE:
            bounds[index] = ISOLATE
    if bounds:
        bounds[0] = BLOCK
    _cover_comments(body, leaves)
    return leaves, bounds


def _cover_comments(body: str, leaves: list[Leaf]) -> None:
    """Stretch a leaf over a `%%comment%%` that follows it inside its block (between two sentences
    or list items): the parser and the sentence splitter see comments as blanks, R11 does not.
    """
    for prev, leaf in pairwise(leaves):
        gap = body[prev.end : leaf.start]
        if gap.strip():
            prev.end += len(gap.rstrip())


def _announces(masked: str, paragraph: Block) -> bool:
    """A paragraph ending in ":" introduces the block after it ("The sizes are:" before a table)."""
    return masked[paragraph.char_start : paragraph.char_end].rstrip().endswith(":")


def _alone(block: Block) -> bool:
    """Blocks that R9 puts in a chunk of their own: tables, checklists, quotes over two lines."""
    if block.kind == "table" or (block.kind == "list" and block.checklist):
        return True
    return block.kind == "blockquote" and block.line_end - block.line_start + 1 > QUOTE_ALONE_LINES


def _isolate_before(bounds: list[int], index: int) -> None:
    """Force a cut before leaf `index`, moved back over glue so a heading or intro comes along."""
    while index > 0 and bounds[index] == NONE:
        index -= 1
    if index > 0:
        bounds[index] = ISOLATE


def block_leaves(masked: str, block: Block, lang: str) -> tuple[list[Leaf], list[int]]:
    """Leaves of one top-level block and the strengths between them (one fewer than leaves).

    Also used by `invariants.check_chunks`, so "a sentence" means the same thing to the chunker
    and to its checker.
    """
    if block.kind == "paragraph":
        spans = _sentences(masked, block.char_start, block.char_end, lang)
        leaves = [Leaf(s, e, "sentence", unit_start=i == 0, block=block) for i, (s, e) in enumerate(spans)]
        return leaves, [SENT] * (len(leaves) - 1)
    if block.kind == "list" and block.children:
        return _list_leaves(masked, block, lang)
    kind = _ATOMIC_KINDS.get(block.kind, "atom")
    code = block.kind == "code" or (
        block.kind in ("blockquote", "list")
        and _FENCE_LINE.search(masked, block.char_start, block.char_end) is not None
    )
    return [Leaf(block.char_start, block.char_end, kind, code=code, block=block)], []


def _list_leaves(masked: str, block: Block, lang: str) -> tuple[list[Leaf], list[int]]:
    """Items in groups of 5-8 (R9), each item its sentences (plain) or one atomic leaf (structured)."""
    leaves: list[Leaf] = []
    bounds: list[int] = []
    sizes = list_groups(len(block.children))
    group_starts = set(accumulate(sizes[:-1]))
    for index, item in enumerate(block.children):
        if index:
            bounds.append(GROUP if index in group_starts else ITEM)
        if _is_structured(masked, item):
            for i, (s, e) in enumerate(item_parts(masked, item.char_start, item.char_end)):
                if i:
                    bounds.append(SENT)
                code = _FENCE_LINE.search(masked, s, e) is not None
                leaves.append(Leaf(s, e, "item", code=code, block=block))
            continue
        for i, (s, e) in enumerate(_item_sentences(masked, item, lang)):
            if i:
                bounds.append(SENT)
            leaves.append(Leaf(s, e, "sentence", unit_start=i == 0, item=item.char_start, block=block))
    return leaves, bounds


def list_groups(n: int) -> list[int]:
    """Sizes of the item groups of a list of `n` items: at most 8, as even as possible (R9)."""
    if n <= LIST_GROUP_MAX:
        return [n]
    groups = -(-n // LIST_GROUP_MAX)
    base, extra = divmod(n, groups)
    return [base + 1] * extra + [base] * (groups - extra)


def item_units(masked: str, item: Block, lang: str) -> list[tuple[int, int]]:
    """Uncuttable units of a list item: its sentences (the marker stays with the first), or the
    whole item when it holds structure (nested list, fence, table, quote) that sentences would cut.
    """
    if _is_structured(masked, item):
        return [(item.char_start, item.char_end)]
    return _item_sentences(masked, item, lang)


def _item_sentences(masked: str, item: Block, lang: str) -> list[tuple[int, int]]:
    """`item_units` of an item already known to be plain prose (`_list_leaves` has just checked)."""
    marker = _ITEM_MARKER.match(masked, item.char_start, item.char_end)
    text_start = marker.end() if marker else item.char_start
    spans = _sentences(masked, text_start, item.char_end, lang)
    if not spans:
        return [(item.char_start, item.char_end)]
    spans[0] = (item.char_start, spans[0][1])
    return spans


def item_parts(masked: str, start: int, end: int) -> list[tuple[int, int]]:
    """Blank-line separated parts of a structured list item, never split inside a fence.

    A long item with code (a numbered step with its PowerShell block) may then be cut between its
    paragraphs and blocks instead of becoming one oversize chunk; each part stays atomic.
    """
    parts: list[tuple[int, int]] = []
    fence: str | None = None
    part_start: int | None = None
    part_end = start
    for m in _LINE.finditer(masked, start, end):
        line = m.group().rstrip("\r\n")
        if fence is not None:
            if closes_fence(line, fence):
                fence = None
        elif not line.strip():
            if part_start is not None:
                parts.append((part_start, part_end))
                part_start = None
            continue
        else:
            fence = fence_opener(line)
        if line.strip():
            if part_start is None:
                part_start = m.start() + len(line) - len(line.lstrip())
            part_end = m.start() + len(line.rstrip())
        if m.end() >= end:
            break
    if part_start is not None:
        parts.append((part_start, part_end))
    return parts or [(start, end)]


def _is_structured(masked: str, item: Block) -> bool:
    """An item whose later lines open a nested list, fence, table, quote, math or HTML block."""
    first_line_fence = _FENCE_LINE.match(masked, item.char_start) is not None
    return first_line_fence or _STRUCTURED_LINE.search(masked, item.char_start, item.char_end) is not None


def _sentences(masked: str, start: int, end: int, lang: str) -> list[tuple[int, int]]:
    """Sentence spans of `masked[start:end]` as body offsets; the whole range if there are none."""
    spans = [(start + s, start + e) for s, e in sentence_spans(masked[start:end], lang)]
    return spans or [(start, end)]


def _segments(bounds: list[int], n: int) -> list[tuple[int, int]]:
    """Leaf ranges between forced cuts; overlap never crosses one."""
    cuts = [0, *(i for i in range(1, n) if bounds[i] == ISOLATE), n]
    return [(a, b) for a, b in pairwise(cuts) if a < b]


# --- packing -----------------------------------------------------------------------------------


class _Packer:
    """Greedy packing of one section's leaves into chunks, with sentence overlap (R8, R10)."""

    def __init__(
        self,
        leaves: list[Leaf],
        bounds: list[int],
        inner: list[int],
        tokens: NoteTokens,
        profile: Profile,
    ) -> None:
        self.leaves = leaves
        self.bounds = bounds
        self.prefix = [0, *accumulate(inner)]
        """Prefix sums of per-leaf token counts without BOS/EOS: O(1) size estimates."""
        self.tokens = tokens
        self.profile = profile
        self._next: dict[int, list[int]] = {}
        """Per boundary level, the first leaf at or after each index whose boundary is at least that level."""

    def _next_at(self, level: int) -> list[int]:
        """`table[k]`: the first index >= k with `bounds >= level` (`len(bounds)` if none), built once per level.

        Scanning leaf by leaf instead cost a section's whole length per chunk: a list of 60k
        structured items took minutes to pack.
        """
        table = self._next.get(level)
        if table is None:
            n = len(self.bounds)
            table = [n] * (n + 1)
            for k in range(n - 1, -1, -1):
                table[k] = k if self.bounds[k] >= level else table[k + 1]
            self._next[level] = table
        return table

    def count(self, start: int, end: int) -> int:
        """Real size of `body[start:end]` as a chunk: the count of its normalised text (R5)."""
        return self.tokens.count(start, end)

    def oversize(self, char_start: int, last: int) -> bool:
        return self.count(char_start, self.leaves[last - 1].end) > self.profile.max

    def estimate(self, first: int, last: int, extra: int) -> int:
        """Size of leaves[first:last] plus `extra` overlap tokens, BOS/EOS included."""
        return self.prefix[last] - self.prefix[first] + extra + 2

    def pack(self, lo: int, hi: int, overlap: bool) -> list[tuple[int, int, int]]:
        """Chunks of leaves[lo:hi] as (char_start, first leaf, end leaf), first..end-1 new content."""
        out: list[tuple[int, int, int]] = []
        pos = lo
        carry: int | None = None
        while pos < hi:
            if carry is not None and self.leaves[pos].kind == "heading":
                carry = None  # R10: never overlap across a heading
            end, char_start = self._fit(pos, hi, carry)
            out.append((char_start, pos, end))
            carry = self._overlap(pos, end) if overlap and end < hi else None
            pos = end
        return out

    def _fit(self, pos: int, hi: int, carry: int | None) -> tuple[int, int]:
        """End of the chunk starting at leaf `pos`, checked against the real count of its text.

        Falls back to dropping the overlap, then to the previous cut point, when the estimate was
        optimistic; a single unit over `max` is emitted as is (oversize).
        """
        extra = 0 if carry is None else self.count(carry, self.leaves[pos].start) - 2
        end = self._choose_end(pos, hi, extra)
        start = self.leaves[pos].start if carry is None else carry
        while self.count(start, self.leaves[end - 1].end) > self.profile.max:
            if carry is not None:
                carry, extra = None, 0
                start = self.leaves[pos].start
                end = self._choose_end(pos, hi, extra)
                continue
            back = next((k for k in range(end - 1, pos, -1) if self.bounds[k] > NONE), None)
            if back is None:
                # Only glue is left: break an intro glue (never a heading's) before going oversize,
                # so an oversize chunk holds one unit besides its headings (R8).
                back = next((k for k in range(end - 1, pos, -1) if self.leaves[k - 1].kind != "heading"), None)
            if back is None:
                break
            end = back
        return end, start

    def _choose_end(self, pos: int, hi: int, extra: int) -> int:
        """Greedy end for a chunk whose new content starts at leaf `pos` (R8).

        Walks whole units at the strongest boundary level; a unit that would pass `target_max` ends
        the chunk once it holds `target_min`, is taken whole when it still fits `max`, and is
        otherwise entered at its next weaker boundary level. A unit without inner boundaries that
        does not fit ends the chunk before it, or alone (oversize) when the chunk is empty.
        """
        p = self.profile
        stack = [(BLOCK, hi)]
        j = pos
        while j < hi:
            level, until = stack[-1]
            if j >= until:
                stack.pop()
                continue
            u = self._next_boundary(j, level, until)
            size = self.estimate(pos, u, extra)
            if size <= p.target_max:
                j = u
                continue
            if j > pos and self.estimate(pos, j, extra) >= p.target_min:
                return j
            if size <= p.max:
                return u
            if level == GROUP and j > pos:
                return j  # R9: a long list is cut between its blocks of 5-8 items, never inside one
            # The strongest boundary inside (j, u): every one there is below `level`.
            inner = next((lvl for lvl in range(level - 1, NONE, -1) if self._next_at(lvl)[j + 1] < u), NONE)
            if inner > NONE:
                stack.append((inner, u))
                continue
            return j if j > pos else u
        return hi

    def _next_boundary(self, j: int, level: int, until: int) -> int:
        return min(self._next_at(level)[j + 1], until)

    def _overlap(self, first: int, end: int) -> int | None:
        """Where the next chunk's overlap begins: whole trailing sentences of leaves[first:end] (R10).

        Preference: the previous list item when it is under 50 tokens and within `overlap_max`;
        else the nearest paragraph or item start giving `overlap_min..overlap_max` tokens; else the
        most sentences within `overlap_max`; else the last sentence alone when it is at most twice
        `overlap_max`; else none.
        """
        p = self.profile
        leaves = self.leaves
        nxt = leaves[end].start
        tail: list[int] = []
        i = end - 1
        while i >= first and leaves[i].kind == "sentence":
            tail.append(i)
            i -= 1
        if not tail or p.overlap_max <= 0:
            return None
        last = leaves[end - 1]
        if last.item >= 0:
            head = next((k for k in tail if leaves[k].item == last.item and leaves[k].unit_start), None)
            if head is not None:
                size = self.count(leaves[head].start, nxt)
                if size < LIST_ITEM_OVERLAP and size <= p.overlap_max:
                    return leaves[head].start
        sized = []
        for k in tail:
            size = self.estimate(k, end, 0)
            if size > 2 * p.overlap_max:
                break
            sized.append((k, size))
        fitting = [(k, s) for k, s in sized if s <= p.overlap_max]
        aligned = [k for k, s in fitting if s >= p.overlap_min and leaves[k].unit_start]
        order = aligned + [k for k, _ in reversed(fitting)]
        for k in order:
            if self.count(leaves[k].start, nxt) <= p.overlap_max:
                return leaves[k].start
        if tail[0] == end - 1 and self.count(last.start, nxt) <= 2 * p.overlap_max:
            return last.start
        return None


# --- records -----------------------------------------------------------------------------------


def _span(body: str, section: _Section, leaves: list[Leaf], char_start: int, oversize: bool) -> ChunkSpan:
    table = next((leaf.block for leaf in leaves if leaf.kind == "table" and leaf.block is not None), None)
    return ChunkSpan(
        char_start=char_start,
        char_end=leaves[-1].end,
        content_start=leaves[0].start,
        section_title=section.title,
        section_path=section.path,
        oversize=oversize,
        has_code=any(leaf.code for leaf in leaves),
        summary=table_summary(body[table.char_start : table.char_end]) if table is not None else None,
    )


_ROW_SPLIT = re.compile(r"(?<!\\)\|")


def table_summary(table: str, rows: int = 2) -> str:
    """Plain-text summary of a GFM table for retrievers that read tables poorly (R9).

    The header and the first `rows` data rows as `header: value; …`, one line per row.
    """
    lines = [line for line in normalise(table).split("\n") if line.strip()]
    if not lines:
        return ""
    header = _cells(lines[0])
    body_rows = [_cells(line) for line in lines[2 : 2 + rows]]
    if not body_rows:
        return "; ".join(h for h in header if h)
    out = []
    for row in body_rows:
        pairs = [f"{h}: {v}" if h else v for h, v in zip(header, row, strict=False) if v]
        out.append("; ".join(pairs))
    return "\n".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [" ".join(cell.replace("\\|", "|").split()) for cell in _ROW_SPLIT.split(line)]


