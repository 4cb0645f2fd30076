"""The link graph (R16, R18): edges with stable ids, neighbours, and the incremental delta.

Every edge belongs to the note whose content produced it (`note_id`), backlinks included: a
backlink X→A exists because A links X, so it has `note_id` A. Re-importing A therefore replaces
exactly the edges with `note_id` A, and the delta of an import is a plain set difference
(`diff_edges`). Link edges keep the raw links that made them (`raw_links`), so an import can
re-resolve the links of unchanged notes against the new vault state without reading them again
(`notes_to_relink`): unresolved links that a new note now satisfies, and resolved links whose
target was deleted or renamed.

Conventions, decided here:
- Links within a note (`[[#Heading]]`, `[x](#top)`) give no edges: `belongs_to` says it. A link
  that names the note itself (`[[A]]` in A) does give its edge, since a later change can make the
  name lead elsewhere, but never a backlink or neighbour.
- Links to attachments and URLs give no edges; chunks carry them in their payload (R14).
- `![[note]]` gives an `embeds` edge (chunk→note) instead of `references`; backlinks, note-level
  references and neighbours count both.
- Backlinks are generated from body links and frontmatter links (Obsidian lists both), resolved only.
- A frontmatter field's edges take the field name as kind (`depends_on`, `related`, any field
  with `[[X]]` values); a field named like a structural kind gets a `frontmatter:` prefix.
"""

from __future__ import annotations

import bisect
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeAlias
from urllib.parse import unquote

from .links import Link, Resolver, extract_links, frontmatter_links, link_key, note_keys
from .text import uuid5_string

if TYPE_CHECKING:
    from .chunking.base import Chunk
    from .config import Settings
    from .vault import Note

Scope: TypeAlias = Literal["chunk", "note"]

EDGE_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://mindnet.invalid/point-id")
"""Namespace of the UUIDv5 edge ids: the store's `ID_NAMESPACE` (pure stages may not import `store`),
so `edge.edge_id == store.point_id(edge.edge_key)`. NOTE: changing it orphans every stored edge."""

EDGE_LAYOUT = 2
"""Version of the edge payload (2: `link_keys`). The importer folds it into every note's
`chunking_hash`, so a store written before a change rebuilds each note's edges once. Not bumped when the
payload stopped repeating `edge_key` and unset fields (2026-12-05): an edge written before reads back as the
same edge (`edge_from_payload`), so nothing needed rewriting."""

STRUCTURAL_KINDS = frozenset({"belongs_to", "prev", "next", "has_section"})
BODY_LINK_KINDS = frozenset({"references", "embeds"})
RESERVED_KINDS = STRUCTURAL_KINDS | BODY_LINK_KINDS | {"backlink"}


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge of the edges collection (R16); equal edges have equal ids and payloads."""

    edge_id: str
    """UUIDv5 of `edge_key`: the Qdrant point id."""
    edge_key: str
    """`kind:source_id->target_id`, the readable id (like `chunk_id` for chunks)."""
    kind: str
    scope: Scope
    """`chunk` when the source is a chunk, `note` when it is a note."""
    source_id: str
    target_id: str
    """Note id, chunk id, `note_id#/section/path`, or the slug of an unresolved target."""
    note_id: str
    """The note whose content produced the edge; an import of that note replaces it."""
    status: str
    """`resolved` or `unresolved`."""
    anchor: str | None = None
    """Heading or `^block` of the first link that made the edge."""
    raw_links: tuple[str, ...] = ()
    """The links as written (`[[X|y]]`, `[t](a.md)`), frontmatter ones as `[[X]]`; empty for derived edges."""
    link_keys: tuple[str, ...] = ()
    """`link_key`s of the targets named in `raw_links` (`raw_link_keys`), indexed in the store so an
    import finds the links a new or renamed note may now answer without reading every edge."""

    def payload(self) -> dict[str, Any]:
        """The Qdrant payload: R16's fields, and of `anchor`, `raw_links` and `link_keys` only what is set
        (`edge_from_payload` reads a missing one as unset). Not `edge_key`: it is `kind:source_id->target_id`,
        and the store keeps it as the point's string id (`edge_id` in the payload, `ID_FIELDS`).

        Why leave them out: most edges are structural (`belongs_to`, `prev`, `next`), with no anchor and no
        links, and Qdrant Edge's binding converts a list by first trying it as a bool, two ints, a float and a
        string, and a string by the first four: an empty list cost ~4 µs and the key ~2.5 µs of a ~28 µs edge
        point, written and read again for every edge of a vault (docs/decisions/large-vaults.md, "Where a
        6,000-note import's time goes")."""
        payload: dict[str, Any] = {
            "kind": self.kind,
            "scope": self.scope,
            "source_id": self.source_id,
            "target_id": self.target_id,
            "note_id": self.note_id,
            "status": self.status,
        }
        if self.anchor is not None:
            payload["anchor"] = self.anchor
        if self.raw_links:
            payload["raw_links"] = list(self.raw_links)
        if self.link_keys:
            payload["link_keys"] = list(self.link_keys)
        return payload


def make_edge(
    kind: str,
    scope: Scope,
    source_id: str,
    target_id: str,
    note_id: str,
    status: str = "resolved",
    anchor: str | None = None,
    raw_links: tuple[str, ...] = (),
) -> Edge:
    """An edge with its stable id derived from kind, source and target (R16)."""
    key = edge_key_of(kind, source_id, target_id)
    return Edge(
        edge_uuid(key), key, kind, scope, source_id, target_id, note_id, status, anchor, raw_links,
        raw_link_keys(raw_links),
    )


def raw_link_keys(raw_links: Iterable[str]) -> tuple[str, ...]:
    """The `link_key`s a note must have to answer these links, sorted.

    Markdown destinations are URL-encoded (`My%20Note.md`), so both spellings count.
    """
    keys: set[str] = set()
    for raw in raw_links:
        for link in extract_links(raw)[:1]:
            keys.add(link_key(link.target))
            keys.add(link_key(unquote(link.target)))
    return tuple(sorted(keys))


def edge_key_of(kind: str, source_id: str, target_id: str) -> str:
    """An edge's readable id, `kind:source_id->target_id` (R16): what its point id is made from, so every edge
    is keyed here, whether made (`make_edge`) or read back (`edge_from_payload`)."""
    return f"{kind}:{source_id}->{target_id}"


def edge_uuid(key: str) -> str:
    """`str(uuid.uuid5(EDGE_NAMESPACE, key))` (`text.uuid5_string`: a 3k-note vault has 100k edges)."""
    return uuid5_string(EDGE_NAMESPACE, key)


def edge_from_payload(string_id: str, payload: Mapping[str, Any]) -> Edge:
    """Rebuild an edge read back from the store (inverse of `Edge.payload`).

    Args:
        string_id: the id the store was given for the point: `edge_key` or `edge_id`.
        payload: the stored payload; its `edge_key`, where a store made before 2026-12-05 wrote one, is the
            key `make_edge` derives from the same fields.

    Raises:
        ValueError: the id belongs to another edge than the payload (a corrupted store).
    """
    key = edge_key_of(payload["kind"], payload["source_id"], payload["target_id"])
    edge_id = edge_uuid(key)
    if string_id not in (edge_id, key) or payload.get("edge_key", key) != key:
        raise ValueError(f"edge point {string_id!r} holds the payload of {key!r}")
    return Edge(
        edge_id,
        key,
        payload["kind"],
        payload["scope"],
        payload["source_id"],
        payload["target_id"],
        payload["note_id"],
        payload["status"],
        payload.get("anchor"),
        tuple(payload.get("raw_links") or ()),
        # Read, not recomputed: an edge stored before the field existed must compare unequal to
        # its rebuilt twin, so the import that rebuilds it writes the field.
        tuple(payload.get("link_keys") or ()),
    )


def frontmatter_kind(field: str) -> str:
    """Edge kind of a frontmatter link field; never one of the structural or body kinds."""
    return f"frontmatter:{field}" if field in RESERVED_KINDS else field


class _Acc:
    """Collects links per edge: status, first anchor, raw links in order (deduplication, R16)."""

    __slots__ = ("anchor", "raw", "status")

    def __init__(self, status: str, anchor: str | None) -> None:
        self.status = status
        self.anchor = anchor
        self.raw: dict[str, None] = {}


def note_edges(
    note: Note,
    chunks: Sequence[Chunk],
    resolver: Resolver,
    settings: Settings,
    links: Sequence[Link] | None = None,
    *,
    note_references: bool | None = None,
) -> list[Edge]:
    """Every edge a note produces (R16), in a deterministic order.

    Args:
        note: the note.
        chunks: its chunks; links are assigned to the chunk whose new content holds them (R11).
        resolver: built from every note of the vault after the change.
        settings: `note_references`, `has_section_edges`.
        links: the note's links as its `ParsedNote` carries them; None scans the body here.
        note_references: overrides the setting (a vault without chunks needs note-level links).
    """
    nid = note.note_id
    ordered = sorted(chunks, key=lambda c: c.chunk_index)
    edges: list[Edge] = []
    for chunk in ordered:
        edges.append(make_edge("belongs_to", "chunk", chunk.chunk_id, nid, nid))
    for prev, nxt in itertools.pairwise(ordered):
        edges.append(make_edge("next", "chunk", prev.chunk_id, nxt.chunk_id, nid))
        edges.append(make_edge("prev", "chunk", nxt.chunk_id, prev.chunk_id, nid))
    if settings.has_section_edges:
        for path in dict.fromkeys(c.section_path for c in ordered):
            edges.append(make_edge("has_section", "note", nid, f"{nid}#{path}", nid))

    starts = [c.content_start for c in ordered]
    chunk_links: dict[tuple[str, str, str], _Acc] = {}
    note_links: dict[str, _Acc] = {}
    linked: dict[str, None] = {}
    for link in extract_links(note.fulltext) if links is None else links:
        if not link.target:
            continue  # `[[#Heading]]`: always this note, nothing to re-resolve
        res = resolver.resolve_link(link, note.path)
        if res.status not in ("resolved", "unresolved"):
            continue
        kind = "embeds" if link.kind == "embed" else "references"
        i = bisect.bisect_right(starts, link.char_start) - 1
        if i >= 0 and link.char_start < ordered[i].char_end:
            acc = chunk_links.setdefault((kind, ordered[i].chunk_id, res.target_id), _Acc(res.status, link.anchor))
            acc.raw[link.raw] = None
        note_acc = note_links.setdefault(res.target_id, _Acc(res.status, link.anchor))
        note_acc.raw[link.raw] = None
        if res.status == "resolved" and res.target_id != nid:
            linked[res.target_id] = None
    for (kind, chunk_id, target), acc in chunk_links.items():
        edges.append(make_edge(kind, "chunk", chunk_id, target, nid, acc.status, acc.anchor, tuple(acc.raw)))
    if settings.note_references if note_references is None else note_references:
        for target, acc in note_links.items():
            edges.append(make_edge("references", "note", nid, target, nid, acc.status, acc.anchor, tuple(acc.raw)))

    for field, targets in frontmatter_links(note.frontmatter).items():
        kind = frontmatter_kind(field)
        seen: dict[str, _Acc] = {}
        for target in targets:
            res = resolver.resolve(target, note.path)
            if res.status not in ("resolved", "unresolved"):
                continue
            seen.setdefault(res.target_id, _Acc(res.status, None)).raw[f"[[{target}]]"] = None
            if res.status == "resolved" and res.target_id != nid:
                linked[res.target_id] = None
        for target, acc in seen.items():
            edges.append(make_edge(kind, "note", nid, target, nid, acc.status, None, tuple(acc.raw)))

    for target in linked:
        edges.append(make_edge("backlink", "note", target, nid, nid))
    return edges


def build_edges(
    notes: Iterable[Note],
    chunks_by_note: Mapping[str, Sequence[Chunk]],
    resolver: Resolver,
    settings: Settings,
    links_by_note: Mapping[str, Sequence[Link]] | None = None,
    *,
    note_references: bool | None = None,
) -> list[Edge]:
    """The edges of many notes (R16); `chunks_by_note` (and `links_by_note`) map note id to that note's chunks
    (and links, when the caller has them from parsing)."""
    edges: list[Edge] = []
    for note in notes:
        chunks = chunks_by_note.get(note.note_id, ())
        links = links_by_note.get(note.note_id) if links_by_note is not None else None
        edges.extend(note_edges(note, chunks, resolver, settings, links, note_references=note_references))
    return edges


def note_neighbors(edges: Iterable[Edge], note_ids: Iterable[str] = ()) -> dict[str, dict[str, list[str]]]:
    """The materialised 1-hop graph of R18: per note its outgoing link targets and backlinks.

    `references` holds the resolved notes a note links to (body links, embeds and frontmatter
    links), `backlinks` the notes that link to it. To be complete for a note, `edges` must hold
    every edge with that `note_id` and every backlink whose `source_id` is that note.

    Args:
        edges: edges to read.
        note_ids: notes to include even when they have no neighbours (empty lists).
    """
    out: dict[str, tuple[set[str], set[str]]] = {nid: (set(), set()) for nid in note_ids}
    for e in edges:
        if e.kind == "backlink":
            out.setdefault(e.source_id, (set(), set()))[1].add(e.target_id)
        elif e.kind not in STRUCTURAL_KINDS and e.status == "resolved" and e.target_id != e.note_id:
            out.setdefault(e.note_id, (set(), set()))[0].add(e.target_id)
    return {nid: {"references": sorted(refs), "backlinks": sorted(back)} for nid, (refs, back) in out.items()}


def diff_edges(old: Iterable[Edge], new: Iterable[Edge]) -> tuple[list[Edge], list[Edge]]:
    """What to upsert and what to delete to turn the stored `old` edges into `new` (R21).

    An edge whose id exists on both sides is upserted only when its payload changed (status,
    anchor, raw links); deleting is by id, so an upserted edge is never also deleted.

    Returns:
        `(to_add, to_delete)`, each in the order of its input.
    """
    old_by_id = {e.edge_id: e for e in old}
    new_by_id = {e.edge_id: e for e in new}
    to_add = [e for e in new_by_id.values() if old_by_id.get(e.edge_id) != e]
    to_delete = [e for e in old_by_id.values() if e.edge_id not in new_by_id]
    return to_add, to_delete


def notes_to_relink(
    stored: Iterable[Edge],
    resolver: Resolver,
    changed: Iterable[Note],
    deleted_ids: Iterable[str] = (),
    *,
    transclude: bool = True,
) -> set[str]:
    """Unchanged notes whose edges (and chunk link payloads) must be rebuilt after a change (R15).

    A stored link edge of an unchanged note is re-resolved against the new vault state when its
    target is a changed or deleted note, or when a changed note could now answer it (same
    `link_key`): an unresolved link that a new note satisfies, a resolved link whose target was
    deleted or renamed, an ambiguous name that a new, shorter path now wins. Its note is returned
    when any of its raw links now resolves elsewhere. With `transclude`, a note that embeds a
    changed note is returned too: its transcluded text changed.

    Args:
        stored: the stored edges: at least every edge with `raw_links` whose target is a changed or
            deleted note or whose `link_keys` meet the changed notes' keys (`EdgeSource.suspects`).
        resolver: built from every note of the vault after the change.
        changed: added and modified notes, new versions (renamed ones under their new path).
        deleted_ids: ids of notes that no longer exist (including the old id of a renamed note).
        transclude: the `transclude_embeds` setting.
    """
    changed_ids: set[str] = set()
    keys: set[str] = set()
    for note in changed:
        changed_ids.add(note.note_id)
        keys |= note_keys(note)
    gone = set(deleted_ids) - changed_ids
    result: set[str] = set()
    for e in stored:
        if not e.raw_links or e.note_id in result or e.note_id in changed_ids or e.note_id in gone:
            continue
        if transclude and e.kind == "embeds" and e.target_id in changed_ids:
            result.add(e.note_id)
            continue
        suspect = (
            e.target_id in changed_ids
            or e.target_id in gone
            or not keys.isdisjoint(e.link_keys or raw_link_keys(e.raw_links))
        )
        if not suspect:
            continue
        source_path = resolver.path_of(e.note_id)
        if source_path is None:
            continue  # the source itself is gone; its edges go with it
        for link in (link for raw in e.raw_links for link in extract_links(raw)[:1]):
            res = resolver.resolve_link(link, source_path)
            if (res.status, res.target_id) != (e.status, e.target_id):
                result.add(e.note_id)
                break
    return result


class EdgeDelta(NamedTuple):
    """The edge writes of one import, and the notes whose payloads they touch."""

    to_add: list[Edge]
    to_delete: list[Edge]
    relinked: set[str]
    """Unchanged notes whose edges changed: re-chunk them (no re-embedding) to refresh chunk links."""
    neighbors_changed: set[str]
    """Notes whose `neighbors` payload (R18) must be recomputed."""


class EdgeSource(Protocol):
    """The stored edges an incremental import asks for; the store answers with filtered scrolls.

    Both methods may return more than asked (a superset is always correct), never less.
    """

    def suspects(self, target_ids: set[str], keys: set[str]) -> Iterable[Edge]:
        """Link edges whose `target_id` is in `target_ids` or whose `link_keys` meet `keys`."""
        ...

    def of_notes(self, note_ids: set[str]) -> Iterable[Edge]:
        """Every edge whose `note_id` is in `note_ids`."""
        ...


class EdgeList:
    """An `EdgeSource` over edges in memory (tests, and stores too old to filter by `link_keys`)."""

    def __init__(self, edges: Iterable[Edge]) -> None:
        self.edges = list(edges)

    def suspects(self, target_ids: set[str], keys: set[str]) -> list[Edge]:
        return [e for e in self.edges if e.raw_links]

    def of_notes(self, note_ids: set[str]) -> list[Edge]:
        return [e for e in self.edges if e.note_id in note_ids]


def incremental_edges(
    stored: Sequence[Edge] | EdgeSource,
    notes_by_id: Mapping[str, Note],
    changed: Iterable[Note],
    deleted_ids: Iterable[str],
    resolver: Resolver,
    chunks_of: Callable[[Note], Sequence[Chunk]],
    settings: Settings,
    links_of: Callable[[Note], Sequence[Link]] | None = None,
) -> EdgeDelta:
    """Exactly the edges to add and delete after some notes changed (issue item 4, R15, R21).

    Only the edges that can change are read: link edges aimed at a changed or deleted note or
    naming one of its keys (the candidates for re-resolution), then every edge of the notes to
    rebuild. On a 3,000-note vault with 72k edges a one-note edit reads a few dozen.

    Args:
        stored: the stored edges, as a list or as a source that filters them.
        notes_by_id: every note of the vault after the change.
        changed: added and modified notes.
        deleted_ids: ids of notes that no longer exist.
        resolver: built from `notes_by_id`.
        chunks_of: the chunks of a note (deterministic, so unchanged notes re-chunk identically).
        settings: graph settings.
        links_of: the links of a note from its parse; None scans each body again.
    """
    source = EdgeList(stored) if isinstance(stored, Sequence) else stored
    changed = list(changed)
    gone = set(deleted_ids)
    changed_ids = {n.note_id for n in changed}
    keys = set().union(*(note_keys(n) for n in changed)) if changed else set()
    suspects = source.suspects(changed_ids | gone, keys)
    relink = notes_to_relink(suspects, resolver, changed, gone, transclude=settings.transclude_embeds)
    rebuild = changed_ids | relink
    notes = [notes_by_id[nid] for nid in sorted(rebuild) if nid in notes_by_id]
    links = {n.note_id: links_of(n) for n in notes} if links_of is not None else None
    new = build_edges(notes, {n.note_id: chunks_of(n) for n in notes}, resolver, settings, links)
    old = list(source.of_notes(rebuild | gone))
    to_add, to_delete = diff_edges(old, new)
    touched = rebuild | {e.source_id for e in (*to_add, *to_delete) if e.kind == "backlink"}
    return EdgeDelta(to_add, to_delete, relink, touched - gone)
