"""Finished hits: the `Hit` record, one ranking from several queries' lists, and snippets.

`Hit` lives here, not in `searcher`, so that `searcher` (which makes hits) and `context` (which
fits them into a budget) both import it without importing each other (issue 28). The functions
are pure, for the interfaces that answer agents: an MCP `search` may carry several wordings of
one question, and a result list shows a few words, not a whole chunk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a chunk (or, with `by_note`, the best chunk of a note) and its citation data."""

    rank: int
    """1-based position in the result list."""
    score: float
    """Cosine (dense), BM25 (lexical) or RRF score (hybrid); expanded hits get a decayed score of the
    hit that led to them. Comparable only within one result list."""
    note_id: str
    path: str
    """Vault-relative path of the note."""
    title: str
    """Note title."""
    chunk_id: str
    section_path: str
    """`/H2/H3`, `/` before the first H2 (R7)."""
    section_title: str
    text: str
    """Chunk text (normalised, R5)."""
    char_start: int
    """Span in the note's `fulltext` (R11): what a citation quotes."""
    char_end: int
    line_start: int
    """1-based file lines of the span."""
    line_end: int
    lang: str
    via: str
    """How it was found: the lists that held it joined by `+` (`dense`, `e5`, `lexical`, `feedback`,
    `title`, `note`, `note_lexical`; e.g. `dense+lexical+note`), or `expand` (graph expansion)."""
    explain: Explanation | None = None
    """What each list and adjustment added to `score`, when the search was asked to explain (hybrid)."""

    def as_dict(self) -> dict[str, object]:
        """The hit as JSON-ready values (the `explain` parts as a list, or absent)."""
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "explain"}
        if self.explain is not None:
            out["explain"] = self.explain.as_dict()
        return out


@dataclass(frozen=True, slots=True)
class NoteHit:
    """One note of a result list with its best sections (`Searcher.search_notes`): a note shown once."""

    rank: int
    """1-based position among the notes."""
    score: float
    """The note's score (as `search(by_note=True)` ranks it)."""
    note_id: str
    path: str
    title: str
    sections: tuple[Hit, ...]
    """Its best chunks, best first (rank within the note); the first is what `by_note` shows."""
    explain: Explanation | None = None
    """What each list added to the note's score, when asked."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: the note's fields and its sections as `Hit.as_dict()`."""
        out: dict[str, object] = {"rank": self.rank, "score": self.score, "note_id": self.note_id,
                                  "path": self.path, "title": self.title,
                                  "sections": [h.as_dict() for h in self.sections]}
        if self.explain is not None:
            out["explain"] = self.explain.as_dict()
        return out


@dataclass(frozen=True, slots=True)
class Part:
    """One list's (or adjustment's) share of a hit's score."""

    name: str
    """A list (`dense`, `e5`, `lexical`, `feedback`, `title`, `note`, `note_lexical`) or an adjustment:
    `slots` (the language slots dealt the hit another score), `exact` (a rare query word kept it near the
    top), `note_sum` (by note: a share of the note's other chunks)."""
    score: float
    """What it added (negative when an adjustment lowered the score)."""
    rank: int | None
    """The hit's rank in that list (for `slots`: the rank it was dealt); None for `exact` and `note_sum`."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a hit scored what it did: its parts add up to the hit's score."""

    parts: tuple[Part, ...]

    @property
    def total(self) -> float:
        return sum(p.score for p in self.parts)

    def as_dict(self) -> list[dict[str, object]]:
        return [{"list": p.name, "rank": p.rank, "score": p.score} for p in self.parts]



def fuse_hits(lists: Sequence[Sequence[Hit]], k: int, *, by_note: bool = False, rrf_k: int = 60) -> list[Hit]:
    """One ranking from the hit lists of several queries (an agent's paraphrases of one question).

    Reciprocal rank fusion over the lists' ranks, not their scores: a cosine, a BM25 score and an
    RRF score of another query are not comparable. A hit keeps the fields of its best-ranked
    occurrence; its score becomes the fused one. `rrf_k` is the classic 60 here, unlike the
    in-query fusion's 5: the lists are answers to different wordings, none more trusted.
    """
    scores: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for hits in lists:
        for hit in hits:
            key = hit.note_id if by_note else hit.chunk_id
            scores[key] = scores.get(key, 0.0) + 1.0 / (rrf_k + hit.rank)
            if key not in best or hit.rank < best[key].rank:
                best[key] = hit
    order = sorted(scores, key=lambda key: (-scores[key], best[key].rank, key))[:k]
    # A fused score is no sum of one query's lists, so an explanation of one of them would not add up to it.
    return [replace(best[key], rank=rank, score=round(scores[key], 6), explain=None)
            for rank, key in enumerate(order, 1)]


def group_hits(hits: Sequence[Hit], k: int, sections: int) -> list[NoteHit]:
    """Chunk hits (best first) as the `k` first notes they reach, each with its best `sections` hits:
    how several queries' fused chunks are shown a note at a time."""
    notes: dict[str, list[Hit]] = {}
    for hit in sorted(hits, key=lambda h: h.rank):
        notes.setdefault(hit.note_id, []).append(hit)
    out = []
    for rank, (note_id, own) in enumerate(list(notes.items())[:k], 1):
        best = tuple(replace(h, rank=i) for i, h in enumerate(own[:sections], 1))
        out.append(NoteHit(rank, best[0].score, note_id, best[0].path, best[0].title, best))
    return out


_WORD = re.compile(r"\w{3,}")


def snippet(text: str, queries: Sequence[str], width: int = 240) -> str:
    """About `width` characters of `text` around the first word of a query, on word boundaries.

    What a result list shows so that an agent (or a person) sees why a chunk matched without
    reading all of it; the whole chunk stays available through `read`.
    """
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    words = {w.casefold() for q in queries for w in _WORD.findall(q)}
    lowered = flat.casefold()
    found = [pos for w in words if (pos := lowered.find(w)) >= 0]
    start = max(0, min(found) - width // 4) if found else 0
    start = min(start, len(flat) - width)
    if start > 0:
        start = flat.find(" ", start) + 1 or start
    end = start + width
    if end < len(flat):
        end = flat.rfind(" ", start, end) if flat.rfind(" ", start, end) > start else end
    return ("…" if start > 0 else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")
