"""Note -> chunks: parse the note once, pick its type's strategy, finalize the spans, attach resolved links.

The one entry point the importer and `mindnet-chunk` call, so both produce identical chunks. Each
note's body is parsed, link-scanned and tokenised exactly once (`parse`); the resulting `ParsedNote`
travels on to the graph and transclusion steps, which read its links instead of scanning again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import Settings
from ..links import Link, LinkRef, Resolver, extract_links
from ..markdown import Block, parse_blocks
from ..vault import Note
from .base import Chunk, ChunkSpan, finalize
from .recursive import chunk_recursive, validate
from .structure import chunk_structure
from .tokens import NoteTokens, Tokenizer, default_tokenizer

CHUNKER_VERSION = 3
"""Bump when the same settings give other chunk records (boundaries, text, language): the importer
folds it into every note's `chunking_hash`, so stores re-chunk once (2: chunk language judged on
the first 600 characters of prose, not of text; 3: fenced code in quotes and list items kept
verbatim (R5), long lists cut only between blocks of 5-8 items (R9), chunk language detected per
chunk only in mixed notes)."""


def check_settings(settings: Settings) -> None:
    """Validate every recursive configuration up front, so a bad one stops the run once (exit 2).

    Raises:
        ConfigError: with Elasticsearch's message for the first invalid setting.
    """
    for name, type_strategy in [("", settings.strategy), *settings.strategy_by_type.items()]:
        if type_strategy == "recursive" or name in settings.recursive_by_type:
            validate(settings.recursive_for(name) if name else settings.recursive)


@dataclass(frozen=True, slots=True)
class ParsedNote:
    """A note with everything later stages read from its body, each computed once."""

    note: Note
    blocks: tuple[Block, ...]
    """`markdown.parse_blocks(note.fulltext)`: sections, leaves and section titles come from these."""
    links: tuple[Link, ...]
    """`links.extract_links(note.fulltext)`: chunk payloads, graph edges and transclusions use these
    (empty when `parse` was told that no links are wanted)."""
    tokens: NoteTokens
    """One tokenizer pass over the body; every chunk and leaf size is derived from it."""


def parse(note: Note, tokenizer: Tokenizer | None = None, *, links: bool = True) -> ParsedNote:
    """Parse, link-scan and tokenise one note's body, once; `links=False` skips the link scan for
    callers that resolve no links (`mindnet-chunk` without a vault)."""
    body = note.fulltext
    tokenizer = tokenizer or default_tokenizer()
    found = tuple(extract_links(body)) if links else ()
    return ParsedNote(note, tuple(parse_blocks(body)), found, tokenizer.note(body))


def chunk_spans(parsed: ParsedNote, settings: Settings, tokenizer: Tokenizer) -> list[ChunkSpan]:
    """The spans of the strategy configured for the note's type (R26: globally or per type)."""
    note = parsed.note
    if settings.strategy_for(note.type) == "recursive":
        return chunk_recursive(note.fulltext, validate(settings.recursive_for(note.type)), note_path=note.path)
    return chunk_structure(
        note.fulltext,
        settings.profile_for(note.type),
        stop_sections=settings.stop_sections,
        tokenizer=tokenizer,
        lang=note.lang,
        blocks=parsed.blocks,
        tokens=parsed.tokens,
    )


def chunk_parsed(
    parsed: ParsedNote,
    settings: Settings,
    resolver: Resolver | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[Chunk]:
    """All chunks of a parsed note, with `wikilinks`, `external_links` and `references` when a resolver is given.

    Raises:
        ChunkingError: the recursive strategy hit a runaway user pattern on this note.
        ConfigError: invalid recursive settings.
    """
    tokenizer = tokenizer or default_tokenizer()
    note = parsed.note
    spans = chunk_spans(parsed, settings, tokenizer)
    chunks = finalize(
        note, spans, tokenizer, settings.languages,
        blocks=parsed.blocks, tokens=parsed.tokens, cache_dir=settings.cache_dir,
    )
    if resolver is None:
        return chunks
    return [attach_links(chunk, parsed.links, resolver, note.path) for chunk in chunks]


def chunk_note(
    note: Note,
    settings: Settings,
    resolver: Resolver | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[Chunk]:
    """`chunk_parsed(parse(note))`: for callers that need only the chunks.

    Raises:
        ChunkingError: the recursive strategy hit a runaway user pattern on this note.
        ConfigError: invalid recursive settings.
    """
    tokenizer = tokenizer or default_tokenizer()
    return chunk_parsed(parse(note, tokenizer, links=resolver is not None), settings, resolver, tokenizer)


def links_in_chunk(links: Iterable[Link], chunk: Chunk) -> list[Link]:
    """The links that start in the chunk's new content `[content_start, char_end)` (R11).

    New-content ranges are disjoint, so every link lands in exactly one chunk; overlap text
    carried over from the previous chunk does not count its links twice.
    """
    return [link for link in links if chunk.content_start <= link.char_start < chunk.char_end]


def attach_links(chunk: Chunk, links: Iterable[Link], resolver: Resolver, source_path: str) -> Chunk:
    """Fill a chunk's `wikilinks`, `external_links` and `references` (R14).

    `wikilinks` holds the resolved note ids of wikilinks, embeds and Markdown note links (not
    the chunk's own note), `external_links` the URLs, `references` one `LinkRef` per distinct
    (target, kind, status) including unresolved links and attachments. Links outside the
    chunk's new content are skipped, so callers may pass all links of the note.
    """
    own_id = resolver.note_id_at(source_path)
    wikilinks: list[str] = []
    external: list[str] = []
    refs: list[LinkRef] = []
    for link in links_in_chunk(links, chunk):
        res = resolver.resolve_link(link, source_path)
        if res.status == "external":
            external.append(res.target_id)
            continue
        refs.append(LinkRef(res.target_id, link.kind, res.status))
        if res.status == "resolved" and res.target_id != own_id:
            wikilinks.append(res.target_id)
    return dataclasses.replace(
        chunk,
        wikilinks=tuple(dict.fromkeys(wikilinks)),
        external_links=tuple(dict.fromkeys(external)),
        references=tuple(dict.fromkeys(refs)),
    )
