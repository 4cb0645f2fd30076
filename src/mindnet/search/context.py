"""The token-budgeted LLM context with citations (R23).

`build_context` merges the hits of one note that overlap or touch (exactly, on the note's
`fulltext`), orders them by note and position and fits them into a token budget with a
citation list (R23).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..embedding import Embedder
from ..store import Store
from ..text import FenceSpan, fence_opener, fence_spans
from .results import Hit


class TokenCounter(Protocol):
    """Anything that counts tokens: `chunking.tokens.Tokenizer`, or an LLM's tokenizer wrapped."""

    def count(self, text: str) -> int: ...


class _EmbedderCounter:
    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    def count(self, text: str) -> int:
        return self._embedder.count_tokens(text)


@dataclass(frozen=True, slots=True)
class Citation:
    """Where one passage of the context comes from; `n` is its `[n]` marker in the text."""

    n: int
    note_id: str
    title: str
    path: str
    section_path: str
    """Section of the passage's first hit: a passage ends where its section does (see `build_context`)."""
    section_title: str
    line_start: int
    """1-based file lines the passage covers."""
    line_end: int
    char_start: int
    """Span in the note's `fulltext`."""
    char_end: int
    chunk_ids: tuple[str, ...]
    """The hits merged into the passage."""
    truncated: bool = False
    """The passage was cut to fit the budget."""
    sections: tuple[str, ...] = ()
    """Titles of every section the passage covers, in order: one, unless chunks of two sections
    overlap (the header names each)."""


@dataclass(frozen=True, slots=True)
class Context:
    """A token-budgeted context for an LLM prompt, with its sources."""

    text: str
    """Passages, each under a `[n] title — path › section (lines a–b)` header."""
    citations: tuple[Citation, ...]
    tokens: int
    """Tokens of `text` by the counter used; never above the budget."""


@dataclass(slots=True)
class _Segment:
    note_id: str
    start: int
    end: int
    hits: list[Hit] = field(default_factory=list)
    text: str = ""
    exact: bool = True

    @property
    def best_rank(self) -> int:
        return min(h.rank for h in self.hits)

    @property
    def sections(self) -> tuple[str, ...]:
        """The hits' section titles in text order, each once."""
        ordered = sorted(self.hits, key=lambda h: h.char_start)
        return tuple(dict.fromkeys(h.section_title for h in ordered if h.section_title))

    @property
    def last_section(self) -> str:
        """Section path where the passage ends so far: a hit of another section starts a new passage."""
        return max(self.hits, key=lambda h: h.char_end).section_path


_MIN_PASSAGE_TOKENS = 24
"""A passage cut shorter than this is not worth its header; skip it instead."""


def note_fulltexts(store: Store, note_ids: Sequence[str]) -> dict[str, str]:
    """`fulltext` of each note found in the notes collection (R4), for exact merging."""
    if not note_ids:
        return {}
    return {p.id: str(p.payload.get("fulltext", "")) for p in store.retrieve("notes", list(note_ids))}


def build_context(hits: Sequence[Hit], budget_tokens: int, tokenizer: TokenCounter, *,
                  fulltexts: Mapping[str, str] | None = None) -> Context:
    """Merge, order and budget hits into an LLM context with citations (R23).

    Hits of one note whose spans overlap, or touch (only whitespace between them) within one
    section, become one passage, cut exactly from the note's `fulltext`, so the model sees each
    sentence once and in the author's order. A passage ends at a section boundary, so its header
    names the section it quotes: a passage that ran on into the next section was labelled with
    the first one's name (issue 28), and the neighbour chunk of another section that expansion adds
    competes for the budget on its own rank instead of riding along. Passages are chosen by
    relevance (the best rank among their hits) until the budget is spent (a passage that does not
    fit is cut at a line or word boundary, or skipped when too little would be left), then printed
    grouped by note (most relevant note first) and by position within the note.

    Args:
        hits: search results, best first (`rank` decides relevance).
        budget_tokens: the most tokens `Context.text` may take by `tokenizer`.
        tokenizer: counts tokens (`count(text) -> int`).
        fulltexts: note id -> `fulltext`; a note missing here keeps its hits as separate passages
            of their chunk text (a chunk contained in another is dropped).
    """
    fulltexts = fulltexts or {}
    segments = _segments(hits, fulltexts)
    chosen: list[tuple[_Segment, str, int, bool]] = []  # segment, text, line_end, truncated
    used = 0
    sep_cost = max(0, tokenizer.count("\n\n") - tokenizer.count(""))
    for seg in sorted(segments, key=lambda s: (s.best_rank, s.start)):
        left = budget_tokens - used - (sep_cost if chosen else 0)
        head = _header(len(chosen) + 1, seg, max(h.line_end for h in seg.hits))
        text, truncated = seg.text, False
        cost = tokenizer.count(f"{head}\n{text}")
        if cost > left:
            cut = _fit(head, text, left, tokenizer)
            if cut is None:
                continue
            text, truncated = cut, True
            cost = tokenizer.count(f"{head}\n{text}")
        line_end = _line_end(seg, text, truncated)
        chosen.append((seg, text, line_end, truncated))
        used += cost + (sep_cost if len(chosen) > 1 else 0)
    note_order = {nid: i for i, nid in enumerate(_note_ids(sorted(hits, key=lambda h: h.rank)))}
    chosen.sort(key=lambda item: (note_order[item[0].note_id], item[0].start))
    blocks: list[str] = []
    citations: list[Citation] = []
    for n, (seg, text, line_end, truncated) in enumerate(chosen, 1):
        first = min(seg.hits, key=lambda h: h.char_start)
        blocks.append(f"{_header(n, seg, line_end)}\n{text}")
        citations.append(Citation(
            n=n, note_id=seg.note_id, title=first.title, path=first.path, section_path=first.section_path,
            section_title=first.section_title, line_start=min(h.line_start for h in seg.hits), line_end=line_end,
            char_start=seg.start, char_end=seg.end if not truncated else seg.start + len(text),
            chunk_ids=tuple(h.chunk_id for h in sorted(seg.hits, key=lambda h: h.char_start)), truncated=truncated,
            sections=seg.sections,
        ))
    out = "\n\n".join(blocks)
    # Counting the parts may differ from counting the whole by a few merged pieces; drop passages
    # from the end until the whole provably fits, so the budget is a guarantee.
    while blocks and tokenizer.count(out) > budget_tokens:
        blocks.pop()
        citations.pop()
        out = "\n\n".join(blocks)
    return Context(out, tuple(citations), tokenizer.count(out) if blocks else 0)


def _segments(hits: Sequence[Hit], fulltexts: Mapping[str, str]) -> list[_Segment]:
    by_note: dict[str, list[Hit]] = {}
    for h in hits:
        by_note.setdefault(h.note_id, []).append(h)
    out: list[_Segment] = []
    for note_id, note_hits in by_note.items():
        note_hits = sorted(note_hits, key=lambda h: (h.char_start, -h.char_end))
        full = fulltexts.get(note_id)
        segs: list[_Segment] = []
        for h in note_hits:
            cur = segs[-1] if segs else None
            if cur is not None and h.char_end <= cur.end:
                cur.hits.append(h)  # contained in what is already there
                continue
            touches = cur is not None and (h.char_start < cur.end or (
                h.section_path == cur.last_section
                and (h.char_start == cur.end or (full is not None and not full[cur.end:h.char_start].strip()))))
            if cur is not None and touches and full is not None:
                cur.end = max(cur.end, h.char_end)
                cur.hits.append(h)
            else:
                segs.append(_Segment(note_id, h.char_start, h.char_end, [h], exact=full is not None))
        for seg in segs:
            if full is not None:
                seg.text = full[seg.start:seg.end].strip()
            else:
                seg.text = seg.hits[0].text.strip()
        out.extend(segs)
    return out


def _header(n: int, seg: _Segment, line_end: int) -> str:
    first = min(seg.hits, key=lambda h: h.char_start)
    line_start = min(h.line_start for h in seg.hits)
    section = f" › {'; '.join(seg.sections)}" if seg.sections else ""
    return f"[{n}] {first.title} — {first.path}{section} (lines {line_start}–{line_end})"


def _line_end(seg: _Segment, text: str, truncated: bool) -> int:
    full_end = max(h.line_end for h in seg.hits)
    if not truncated:
        return full_end
    start = min(h.line_start for h in seg.hits)
    return min(full_end, start + text.count("\n"))


def _fit(head: str, text: str, budget: int, tokenizer: TokenCounter) -> str | None:
    """The longest prefix of `text` ending at a line end (else a word end) whose block fits."""
    if budget < _MIN_PASSAGE_TOKENS or tokenizer.count(head) >= budget:
        return None
    cuts = [i for i, ch in enumerate(text) if ch == "\n"]
    words = [i for i, ch in enumerate(text) if ch.isspace()]
    fences = fence_spans(text)  # once: every probe of the search below asks which block a cut falls in

    def best(points: list[int]) -> int | None:
        lo, hi, found = 0, len(points) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if tokenizer.count(f"{head}\n{_cut(text, points[mid], fences)}") <= budget:
                found, lo = points[mid], mid + 1
            else:
                hi = mid - 1
        return found

    at = best(cuts)
    by_word = best(words)
    # A line cut is nicer, but not when it throws away most of what a word cut would keep.
    if at is None or (by_word is not None and at < by_word // 2):
        at = by_word
    if at is None:
        return None
    if tokenizer.count(text[:at].rstrip()) < _MIN_PASSAGE_TOKENS:
        return None
    return _cut(text, at, fences)


def _cut(text: str, at: int, fences: Sequence[FenceSpan]) -> str:
    """`text[:at]` with the cut marked, and a code fence the cut leaves open closed again.

    Why: a passage cut inside a fenced block left an unclosed fence, so everything after it in the
    LLM's prompt (the next passages, the question) read as code. The marker goes after the fence.
    `fences` are `text`'s fenced blocks (`fence_spans`).
    """
    piece = text[:at].rstrip()
    for span in fences:
        if span.start < at < span.end:
            fence = fence_opener(text[span.start:span.inner_start].rstrip("\r\n")) or "```"
            return f"{piece}\n{fence}\n…"
    return f"{piece} …"


def _note_ids(hits: Iterable[Hit]) -> list[str]:
    return list(dict.fromkeys(h.note_id for h in hits))


__all__ = ["Citation", "Context", "TokenCounter", "build_context", "note_fulltexts"]
