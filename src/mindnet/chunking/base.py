"""What every chunking strategy returns, and the shared step that turns spans into chunks.

A strategy (structure, recursive) only decides *where* to cut: it returns `ChunkSpan`s over the
note body. `finalize` derives everything else (text, ids, hashes, lines, links, language) the same
way for both, so the payload never depends on the strategy (R11, R12, R14).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..language import chunk_languages
from ..links import LinkRef
from ..markdown import Block, parse_blocks
from ..text import content_hash, line_of, line_starts, normalise
from ..vault import Note

if TYPE_CHECKING:
    from .tokens import NoteTokens, Tokenizer


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


# --- finalize: spans -> chunks ---------------------------------------------------------------------

STABLE_KEY_TOKENS = 64
"""Tokens of a chunk's start that, with its section path, identify it across edits (R12)."""


def chunk_id(note_id: str, index: int, total: int) -> str:
    """`{note_id}#c{NN}`: 1-based, zero-padded to two digits or to the width of the total (R12)."""
    width = max(2, len(str(total)))
    return f"{note_id}#c{index:0{width}d}"


def finalize(
    note: Note,
    spans: Sequence[ChunkSpan],
    tokenizer: Tokenizer,
    languages: tuple[str, ...] = ("de", "en"),
    *,
    blocks: Sequence[Block] | None = None,
    tokens: NoteTokens | None = None,
    cache_dir: str | None = None,
) -> list[Chunk]:
    """Turn a strategy's spans into chunk records with the payload of the seed example.

    Section fields left None by a strategy are derived from the H2/H3 headings above the span's
    new content, so the recursive strategy carries the same section payload as the structure one.
    `blocks` and `tokens` are the note's parse and token pass when the caller has them (else they
    are made here); `cache_dir` is where the language model's unpacked copy lives.
    """
    body = note.fulltext
    starts = line_starts(body)
    headings: list[tuple[int, int, str]] = []
    if any(s.section_path is None for s in spans):
        headings = _section_headings(parse_blocks(body) if blocks is None else blocks)
    texts = [normalise(body[s.char_start : s.char_end]) for s in spans]
    tokens = tokens if tokens is not None else tokenizer.note(body)
    counts = [tokens.count(s.char_start, s.char_end) for s in spans]
    langs = chunk_languages(texts, note.lang, languages, cache_dir)
    heads = _heads(tokenizer, tokens, spans, texts, counts)
    total = len(spans)
    ids = [chunk_id(note.note_id, i + 1, total) for i in range(total)]
    chunks: list[Chunk] = []
    for i, (span, text, count, lang, head) in enumerate(zip(spans, texts, counts, langs, heads, strict=True)):
        title, path = span.section_title, span.section_path
        if path is None:
            # A recursive piece may begin with the separator's line break: the section is the
            # one of its first visible character.
            piece = body[span.content_start : span.char_end]
            title, path = _section_at(headings, span.content_start + len(piece) - len(piece.lstrip()))
        last = max(span.char_start, span.char_end - 1)
        chunks.append(
            Chunk(
                chunk_id=ids[i],
                note_id=note.note_id,
                note_title=note.title,
                path=note.path,
                type=note.type,
                area=note.area,
                project=note.project,
                tags=note.tags,
                chunk_index=i + 1,
                char_start=span.char_start,
                char_end=span.char_end,
                content_start=span.content_start,
                line_start=note.body_line - 1 + line_of(starts, span.char_start),
                line_end=note.body_line - 1 + line_of(starts, last),
                token_count=count,
                section_title=title or "",
                section_path=path,
                lang=lang,
                text=text,
                created_at=note.created,
                oversize=span.oversize,
                has_code=span.has_code,
                summary=span.summary,
                stable_key=_stable_key(path, head),
                text_hash=content_hash(text),
                neighbors={"prev": ids[i - 1] if i else None, "next": ids[i + 1] if i + 1 < total else None},
            )
        )
    return chunks


def _heads(
    tokenizer: Tokenizer, tokens: NoteTokens, spans: Sequence[ChunkSpan], texts: list[str], counts: list[int]
) -> list[list[int]]:
    """The first `STABLE_KEY_TOKENS` ids of each chunk text: from the note's pass where it holds them,
    the rest encoded in one batch."""
    found = [tokens.head_ids(s.char_start, s.char_end, STABLE_KEY_TOKENS) for s in spans]
    missing = [i for i, head in enumerate(found) if head is None]
    sizes = [tokens.head_chars(spans[i].char_start, spans[i].char_end, STABLE_KEY_TOKENS) for i in missing]
    encoded = iter(
        tokenizer.head_ids_many([texts[i] for i in missing], STABLE_KEY_TOKENS, [counts[i] for i in missing], sizes)
    )
    return [head if head is not None else next(encoded) for head in found]


def _stable_key(section_path: str, head: list[int]) -> str:
    """Hash of the section path and the ids of the first 64 tokens (R12); ids, not offsets, are cheap."""
    return content_hash(f"{section_path}\n{' '.join(map(str, head))}")


def _section_headings(blocks: Sequence[Block]) -> list[tuple[int, int, str]]:
    """(char_start, level, title) of every H2/H3 block: the headings that open sections (R7)."""
    return [(b.char_start, b.level, b.title or "") for b in blocks if b.kind == "heading" and b.level in (2, 3)]


def _section_at(headings: list[tuple[int, int, str]], offset: int) -> tuple[str, str]:
    """Title and `/H2/H3` path of the section containing `offset`; `/` before the first H2."""
    h2: str | None = None
    h3: str | None = None
    for start, level, title in headings:
        if start > offset:
            break
        if level == 2:
            h2, h3 = title, None
        else:
            h3 = title
    if h2 is None and h3 is None:
        return "", "/"
    parts = [p for p in (h2, h3) if p is not None]
    return parts[-1], "/" + "/".join(parts)
