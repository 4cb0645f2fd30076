"""What every chunking strategy returns, and the shared step that turns spans into chunks.

A strategy (structure, recursive) only decides *where* to cut: it returns `ChunkSpan`s over the
note body. `finalize` derives everything else (text, ids, hashes, lines, links, language) the same
way for both, so the payload never depends on the strategy (R11, R12, R14).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """Where one chunk lies in the note body, as decided by a strategy."""

    char_start: int
    """Start in `fulltext`, including any overlap carried over from the previous chunk."""
    char_end: int
    """End in `fulltext` (half-open)."""
    content_start: int
    """Where this chunk's new content begins; `char_start` when there is no overlap (R11)."""
    section_title: str | None = None
    """Title of the H2/H3 the chunk lies under; None lets `finalize` derive it from the headings."""
    section_path: str | None = None
    """`/H2/H3`, or `/` before the first H2 (R7)."""
    oversize: bool = False
    """A single atomic block larger than the profile max (R8)."""
    has_code: bool = False
    summary: str | None = None
    """Plain-text summary for table chunks: header plus the first rows (R9)."""


@dataclass(frozen=True, slots=True)
class LinkRef:
    """One reference of a chunk as stored in its payload (R14)."""

    target_id: str
    kind: str
    """wikilink, markdown or embed."""
    status: str
    """resolved, unresolved or attachment."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable piece of a note with the payload of the seed example."""

    chunk_id: str
    """`{note_id}#c{NN}`, 1-based, zero-padded (R12)."""
    note_id: str
    note_title: str
    path: str
    type: str
    area: str | None
    project: str | None
    tags: tuple[str, ...]
    chunk_index: int
    """1-based position within the note."""
    char_start: int
    char_end: int
    content_start: int
    line_start: int
    """1-based file line (frontmatter lines counted) of `char_start`."""
    line_end: int
    token_count: int
    section_title: str
    section_path: str
    lang: str
    text: str
    """`normalise(fulltext[char_start:char_end])` (R5, R11)."""
    created_at: str
    oversize: bool
    has_code: bool
    summary: str | None
    stable_key: str
    """Hash of section_path + the first 64 tokens: survives edits elsewhere in the note (R12)."""
    text_hash: str
    """Hash of `text`; the embedding cache key (R19)."""
    wikilinks: tuple[str, ...] = ()
    """Resolved target note ids of wikilinks and embeds in the chunk's own content."""
    external_links: tuple[str, ...] = ()
    references: tuple[LinkRef, ...] = ()
    neighbors: dict[str, str | None] = field(default_factory=lambda: {"prev": None, "next": None})
