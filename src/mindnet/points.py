"""What a note and its chunks look like in the store: payloads, vector inputs and named vectors.

One place builds every point, so the import, the e5 tier, `mindnet-chunk` and the evaluation
baseline cannot drift apart: the chunk payload of the seed example (R11, R12, R14), the text the
dense model sees (R19), the text BM25 indexes (R22) and the note payload (R4, R18).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .config import MAX_NOTE_WINDOWS, Settings
from .retrieval_text import retrieval_text
from .text import normalise

if TYPE_CHECKING:
    from .chunking.base import Chunk
    from .chunking.tokens import Tokenizer
    from .links import Link, Resolver
    from .store import Bm25Shape, PointRecord, SparseVec
    from .vault import Note

# The store (and Qdrant with it) is imported by the functions that build points, not here:
# `chunk_payload` is all that `mindnet-chunk` needs of this module. Neither are the chunker, the
# links and the vault reader: a search needs only the vector names (issue 26).

DENSE_VECTOR = "use"
"""Name of the default model's dense vector on chunk points."""
NOTE_VECTOR = "note"
"""Name of the note-level multivector: the default model's vectors of a note's windows (`note_windows`), on
the note's lead chunk only (`lead_chunks`), scored by its closest window."""
NOTE_WINDOW_TOKENS = 300
"""Window size of the note-level vectors, in the model's tokens: a short note is one window, title and all."""
NAME_FIELDS = ("title", "aliases", "area", "project")
"""The note point's fields the title list names notes by (`search.note_names`); a resident keeps them with its stored
states (`sync.StoredStates`), so that its searcher after a save reads no note point."""
NOTE_FIELDS = (("title", 3), ("aliases", 2), ("headings", 2), ("path", 1))
"""A note's fields in its note-level BM25 document and how many times each counts: the words that say what a
note is about (BM25F by repetition). Its text is not among them: the chunks' BM25 list counts it already,
and counted twice it lifted every note in the query's language over the other language's answer."""
E5_VECTOR = "e5"
"""Name of the e5 tier's dense vector (multilingual-e5-small), filled in after the import."""

Transcluded = tuple[tuple[str, str], ...]
"""(source note id, embedded text) pairs shown inside a chunk by `![[note#section]]`."""

TRANSCLUDE_TOKENS = 200
"""Tokens of embedded text added to a host chunk: enough to carry the topic, not to drown the host."""


class Transcluder:
    """Text pulled into host chunks by embeds, so it can be found from the host (issue: embeds)."""

    def __init__(
        self,
        resolver: Resolver,
        notes_by_id: dict[str, Note],
        tokenizer: Tokenizer,
        links_of: Callable[[Note], Sequence[Link]] | None = None,
    ) -> None:
        self.resolver = resolver
        self.notes_by_id = notes_by_id
        self.tokenizer = tokenizer
        self.links_of = links_of
        """The note's links from its parse (`ParsedNote.links`), so they are not scanned a second time."""

    def context(self, note: Note, chunks: Sequence[Chunk]) -> dict[str, Transcluded]:
        """Per chunk id, the embedded texts whose `![[…]]` lies in the chunk's new content."""
        from .links import transclusions

        out: dict[str, list[tuple[str, str]]] = {}
        links = self.links_of(note) if self.links_of is not None else None
        for t in transclusions(note, self.resolver, self.notes_by_id, links):
            for chunk in chunks:
                if chunk.content_start <= t.link_start < chunk.char_end:
                    out.setdefault(chunk.chunk_id, []).append((t.source_note_id, self._cap(normalise(t.text))))
                    break
        return {k: tuple(v) for k, v in out.items()}

    def _cap(self, text: str) -> str:
        pieces = self.tokenizer.pieces(text)
        return text if len(pieces) <= TRANSCLUDE_TOKENS else text[: pieces[TRANSCLUDE_TOKENS][0]].rstrip()


def embedding_input(chunk: Chunk, settings: Settings, transcluded: Transcluded = ()) -> str:
    """What the model sees: the chunk's retrieval text, optionally after the note title and section (R19).

    Embedded text (`![[note]]`) follows the chunk's own text, so the host is found by it too. Empty
    when the chunk has no prose of its own (`retrieval_text`): such a chunk is stored but not embedded.
    """
    own = retrieval_text(chunk.text)
    if not own:
        return ""
    body = "\n\n".join([own, *(retrieval_text(text) for _, text in transcluded)])
    return with_heading(body.strip(), chunk.note_title, chunk.section_title, settings)


def stored_embedding_input(payload: dict[str, Any], settings: Settings) -> str:
    """The e5 tier's input, rebuilt from a stored chunk: title and section before its retrieval text
    ("" for a chunk without prose, which has no vector of either tier)."""
    own = retrieval_text(str(payload["text"]))
    if not own:
        return ""
    return with_heading(own, payload.get("note_title") or "", payload.get("section_title") or "", settings)


def with_heading(body: str, note_title: str, section_title: str, settings: Settings) -> str:
    """`title — section` before the text when `embed_title_prefix` is on (R19), the same for both tiers.

    A name the body already opens with (a chunk starting at its own `# Title` or `## Section`
    heading) is not repeated: said twice it outweighs the text, and notes that share a title or
    a section name would look alike for no reason.
    """
    if not settings.embed_title_prefix:
        return body
    opening = _opening_heading(body)
    names = [n for n in dict.fromkeys([note_title, section_title]) if n and n != opening]
    return f"{' — '.join(names)}\n\n{body}" if names else body


def _opening_heading(body: str) -> str:
    """The text of an ATX heading on the body's first line, or "" when it opens with something else."""
    first = body.lstrip("\n").split("\n", 1)[0]
    level = len(first) - len(first.lstrip("#"))
    if not 1 <= level <= 6 or first[level : level + 1] not in (" ", "\t"):
        return ""
    return first[level:].strip().rstrip("#").strip()


def lexical_input(chunk: Chunk, transcluded: Transcluded = ()) -> str:
    """What BM25 indexes: title, section path, retrieval text and embedded text, so a title word finds
    its note (R22); empty for a chunk without prose, which would otherwise match by its title alone."""
    own = retrieval_text(chunk.text)
    if not own:
        return ""
    parts = [chunk.note_title, chunk.section_path.replace("/", " "), own,
             *(retrieval_text(text) for _, text in transcluded)]
    return "\n".join(parts)


class WindowText(str):
    """A note window's text (`note_windows`): a `str` that says what it is, so the import can count the
    model's work on windows apart from its work on chunks (`sync.WindowCounter`)."""

    __slots__ = ()


def token_windows(text: str, tokenizer: Tokenizer, size: int) -> list[tuple[int, int]]:
    """Char spans of consecutive `size`-token windows tiling `text` (the model's own pieces), no overlap;
    windows holding only whitespace are dropped."""
    if not text.strip():
        return []
    pieces = tokenizer.pieces(text)
    spans = [(pieces[i][0], pieces[min(i + size, len(pieces)) - 1][1]) for i in range(0, len(pieces), size)]
    return [(a, b) for a, b in spans if text[a:b].strip()]


def note_windows(note: Note, tokenizer: Tokenizer, most: int = MAX_NOTE_WINDOWS) -> list[str]:
    """What the model sees of a note as a whole: its title and retrieval text, cut into windows of
    `NOTE_WINDOW_TOKENS` of the model's own tokens.

    Why windows: documentation notes are cut into chunks of ~100 tokens, and a question about what a
    whole short note does (how to publish, what a feature is for) matches no single chunk as well as it
    matches the note read in one piece. Why token windows and not windows of whole chunks: packing
    chunks (an edit would change one window) gave shorter windows, and the leave-one-cell-out rule then
    dropped the note-level list (docs/decisions/search-representation.md). Empty for a note without prose.

    The title goes first even when the text opens with a heading that says it, unlike a chunk's input
    (`with_heading`): the model then reads the title twice, and reading it once was measured and lost
    (issue 25's dev cells 0.807 → 0.805, foam's notes most; the same record).
    """
    body = retrieval_text(note.fulltext)
    if not body:
        return []
    text = f"{note.title}\n\n{body}" if note.title else body
    spans = token_windows(text, tokenizer, NOTE_WINDOW_TOKENS)[:most]
    return [WindowText(text[a:b]) for a, b in spans]


def note_inputs(note: Note, settings: Settings, tokenizer: Tokenizer) -> list[str]:
    """The note's first `Settings.note_windows` windows (`note_windows`) when the import gives notes
    note-level vectors, else none."""
    return note_windows(note, tokenizer, settings.note_windows) if settings.note_vectors else []


def note_lexical(note: Note, chunks: Sequence[Chunk]) -> SparseVec:
    """A note's fielded BM25 document (`NOTE_FIELDS`): title, aliases, headings and path words, each repeated
    by its weight, stemmed by the note's language; empty for a note without prose."""
    from .store import NOTE_BM25, SparseVec, lexical_document

    if not retrieval_text(note.fulltext):
        return SparseVec((), ())
    headings = dict.fromkeys(part for c in chunks for part in c.section_path.split("/") if part)
    fields = {"title": note.title, "aliases": " ".join(note.aliases), "headings": " ".join(headings),
              "path": re.sub(r"[/\\_.\-]+", " ", note.path.removesuffix(".md"))}
    text = "\n".join("\n".join([fields[name]] * times) for name, times in NOTE_FIELDS if fields[name])
    return lexical_document(text, note.lang, NOTE_BM25)


def lead_chunks(chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> dict[str, str]:
    """Note id -> the chunk that carries the note's note-level vectors: its first chunk with a vector.

    On a chunk, not on the note point, because a note's chunks are always written together with what
    they are made from, while its note point is rewritten whenever a neighbour's links change; and a
    note-level hit then comes with a chunk to show and the chunks' filters apply to it as they are."""
    out: dict[str, str] = {}
    for c, v in sorted(zip(chunks, vectors, strict=True), key=lambda cv: (cv[0].note_id, cv[0].chunk_index)):
        if c.note_id not in out and np.any(np.asarray(v, dtype=np.float32)):
            out[c.note_id] = c.chunk_id
    return out


def section_key(chunk: Chunk) -> tuple[str, str]:
    """The (note, H2 section) a chunk belongs to: the unit its retrieval context is drawn from."""
    return chunk.note_id, "/".join(chunk.section_path.split("/")[:2])


def contextual_vectors(chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]], weight: float,
                       note_tokens: float = 0.0) -> list[list[float]]:
    """Each chunk's stored dense vector: unit(v + weight · unit(mean of its H2 section's vectors)
    + (K / n) · unit(mean of its note's vectors)), n the chunk's tokens and K = `note_tokens`.

    Why the section: documentation sections are cut into chunks of ~90 tokens, and a sentence
    encoder given one of them alone misses what the section is about; mixing in the section's
    mean keeps the chunk's own meaning first and adds its topic.

    Why the note, by length (`note_tokens`, off by default): across languages only the topic
    carries over, and a 30-token chunk (a code example, a one-line intro) matches a question by
    its few words; reading it as its own n tokens plus K tokens' worth of its note's topic gives a
    short chunk mostly its note's meaning and leaves a long one nearly as it is. Dense alone gains
    from it in every cell, the default fusion does not, so it stays off until fusion is re-chosen
    with it (figures: docs/benchmarks.md, "Search quality of the previous default").

    No model call: the context is made of vectors the import computes anyway, so the embedding
    cache keeps working per chunk text. A section or note of one chunk keeps its own vector.
    `chunks` must hold every chunk of each of their notes (the import passes whole notes).
    """
    if (weight <= 0 and note_tokens <= 0) or not chunks:
        return [list(v) for v in vectors]
    own = np.asarray(vectors, dtype=np.float32)
    mixed = own.copy()
    if weight > 0:
        mixed += weight * _unit(_group_means(own, [section_key(c) for c in chunks]))
    if note_tokens > 0:
        mixed += context_weights(chunks, note_tokens)[:, None] * _unit(_group_means(own, [c.note_id for c in chunks]))
    mixed[~own.any(axis=1)] = 0.0  # a chunk without prose was not embedded: it stays without a vector
    return _unit(mixed).tolist()


def _group_means(own: np.ndarray, keys: Sequence[object]) -> np.ndarray:  # type: ignore[type-arg]
    """Per row, the mean of the rows that share its key."""
    groups: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    means = np.zeros_like(own)
    for members in groups.values():
        means[members] = own[members].mean(axis=0)
    return means


def context_weights(chunks: Sequence[Chunk], context_tokens: float) -> np.ndarray:  # type: ignore[type-arg]
    """K / n per chunk (n its tokens, at least 1): how far `contextual_vectors` leans on the note."""
    tokens = np.asarray([max(1, c.token_count) for c in chunks], dtype=np.float32)
    return np.float32(context_tokens) / tokens


def _unit(m: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def contextual_lexical(chunks: Sequence[Chunk], transcluded: Mapping[str, Transcluded],
                       sections: bool, shape: Bm25Shape | None = None) -> list[SparseVec]:
    """Each chunk's BM25 vector; with `sections`, the first chunk of each H2 section indexes the
    whole section (title, section path, every chunk's text), the others their own text.

    A question's terms are often spread over several small chunks of one section, so BM25 over
    single chunks ranks a chunk that repeats the title above the section that answers. The
    section's words go into one point only, so a term's document frequency (the engine's IDF)
    still counts it once per section, not once per chunk of a long section; the later chunks
    keep their own text so an exact match still finds the chunk that holds it. `shape` is BM25's
    document constants (None: the import's `CHUNK_BM25`; `bench/bm25_shape.py` tries others).
    """
    from .store import CHUNK_BM25, SparseVec, lexical_document

    shape = shape or CHUNK_BM25
    members: dict[tuple[str, str], list[Chunk]] = {}
    for c in chunks:
        members.setdefault(section_key(c), []).append(c)
    heads = {min(group, key=lambda c: c.char_start).chunk_id: group
             for group in members.values() if sections and len(group) > 1}
    out = []
    for c in chunks:
        group = heads.get(c.chunk_id)
        if group is None:
            text = lexical_input(c, transcluded.get(c.chunk_id, ()))
        else:
            prose = [retrieval_text(t) for g in group
                     for t in (g.text, *(x for _, x in transcluded.get(g.chunk_id, ())))]
            text = "\n".join([c.note_title, section_key(c)[1].replace("/", " "), *prose]) if any(prose) else ""
        # one encoding per chunk, its own or its section's; none for a chunk (or section) without prose
        out.append(lexical_document(text, c.lang, shape) if text else SparseVec((), ()))
    return out


def chunk_payload(chunk: Chunk, transcluded: Transcluded = ()) -> dict[str, Any]:
    """The chunk payload of the seed example (R11, R12, R14), plus where embedded text came from.

    Equal to `dataclasses.asdict(chunk)` with the fields below changed, value for value and type for
    type (`_plain`), at a fifth of its cost: asdict deep-copies every string of every chunk, which
    was a twentieth of `mindnet-chunk`'s time.
    """
    payload = {name: _plain(getattr(chunk, name)) for name in _chunk_fields()}
    payload["transcluded_from"] = [source for source, _ in transcluded]
    payload["id"] = chunk.chunk_id
    payload["tags"] = list(chunk.tags)
    payload["wikilinks"] = list(chunk.wikilinks)
    payload["external_links"] = list(chunk.external_links)
    return payload


@functools.cache
def _chunk_fields() -> tuple[str, ...]:
    from .chunking.base import Chunk

    return tuple(f.name for f in dataclasses.fields(Chunk))


_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """What `dataclasses.asdict` makes of a field value, without copying what cannot change.

    Scalars, tuples of scalars and flat dicts of scalars are returned as asdict returns them (the
    same immutable values; a new dict); anything else (a tuple of `LinkRef`s) is converted the way
    asdict converts it: dataclasses to dicts, containers rebuilt with their own type.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple and all(type(v) in _SCALARS for v in value):
        return value
    if kind is dict and all(type(k) in _SCALARS and type(v) in _SCALARS for k, v in value.items()):
        return dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if kind in (tuple, list):
        return kind(_plain(v) for v in value)
    return dataclasses.asdict(_Box(value)).get("value")  # any other value: exactly as asdict would copy it


@dataclasses.dataclass
class _Box:
    """A one-field dataclass, so that `_plain` can hand an unusual value to asdict's own conversion."""

    value: Any


def chunk_point(chunk: Chunk, vector: Sequence[float], transcluded: Transcluded = (),
                lexical_text: str | None = None, lexical: SparseVec | None = None,
                note: tuple[Sequence[Sequence[float]], SparseVec] | None = None) -> PointRecord:
    """A chunk as a store point: payload, the default dense vector and its BM25 vector, and on a note's
    lead chunk (`lead_chunks`) the note-level vectors `note` = (window vectors, fielded BM25).

    `lexical` is the BM25 vector when the caller made it (`contextual_lexical`); else it is
    made from `lexical_text` (the evaluation's fixed windows index their text as is) or from
    `lexical_input`.
    """
    from .store import NOTE_SPARSE, SPARSE_VECTOR, PointRecord, lexical_document

    if lexical is None:
        text = lexical_input(chunk, transcluded) if lexical_text is None else lexical_text
        lexical = lexical_document(text, chunk.lang) if text else None
    has_vector = bool(np.any(np.asarray(vector, dtype=np.float32)))  # a chunk without prose has the zero vector
    vectors: dict[str, Any] = {DENSE_VECTOR: vector} if has_vector else {}
    sparse = {SPARSE_VECTOR: lexical} if lexical is not None and lexical.indices else {}
    if note is not None and len(note[0]):
        vectors[NOTE_VECTOR] = note[0]
    if note is not None and note[1].indices:
        sparse[NOTE_SPARSE] = note[1]
    return PointRecord(chunk.chunk_id, chunk_payload(chunk, transcluded), vectors=vectors, sparse=sparse)


def sync_state(note: Note, config_hash: str) -> str:
    """What decides whether a stored note is current: id, path, file hash, chunking settings.

    Stored on the note point with a keyword index, so `Store.facet` lists every stored state
    without reading a single payload.
    """
    return f"{note.note_id}\x1f{note.path}\x1f{note.content_hash}\x1f{config_hash}"


def note_point(
    note: Note, config_hash: str, chunk_count: int, neighbors: dict[str, list[str]], materialise: bool
) -> PointRecord:
    """The note point (R4): `references` are the resolved ids it links to; `neighbors` (R18) when enabled."""
    from .store import PointRecord

    payload: dict[str, Any] = {
        "note_id": note.note_id,
        "title": note.title,
        "type": note.type,
        "status": note.status,
        "tags": list(note.tags),
        "aliases": list(note.aliases),
        "area": note.area,
        "project": note.project,
        "priority": note.priority,
        "people": list(note.people),
        "created": note.created,
        "updated": note.updated,
        "path": note.path,
        "lang": note.lang,
        "fulltext": note.fulltext,
        "frontmatter": jsonable(note.frontmatter),
        "references": neighbors["references"],
        "content_hash": note.content_hash,
        "chunking_hash": config_hash,
        "sync_state": sync_state(note, config_hash),
        "chunk_count": chunk_count,
        "body_line": note.body_line,
    }
    if materialise:
        payload["neighbors"] = neighbors
    return PointRecord(note.note_id, payload)


def jsonable(value: Any) -> Any:
    """Frontmatter as JSON-safe values (dates and other YAML types become strings)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):  # `!!set`: sorted, since a set's order follows the hash seed
        return [jsonable(v) for v in sorted(value, key=str)]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
