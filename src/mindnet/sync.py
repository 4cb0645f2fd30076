"""Incremental, idempotent, crash-safe import of a vault into the store (R19–R21).

Order of work, and why it survives a kill at any instant:

1. A lock file in the store folder keeps a second import out (R21) and names the holder.
2. The notes to write or delete are listed in `journal.json` *before* the first write (the notes
   to relink are added before any write of theirs). A run that finds a journal treats those notes
   as changed, so whatever a killed run half-wrote is redone.
3. Per note: chunks, then stale chunks deleted; the note point (with its `content_hash`) goes
   last and is the commit mark. Edges are written once the new and changed notes are chunked,
   while the encoder still works. Deleted notes lose chunks and edges first.
4. The journal is removed only after `optimize()`.

A note is skipped (no chunking, no embedding, no write) when its `content_hash`, path and
chunking settings equal the stored ones and no link of it resolves differently now.

The encoder runs on a thread of its own, `embed_ahead` batches ahead (`EmbedAhead`): while it
embeds one batch, this thread chunks the next notes and writes the finished batches, the edges
and the note points. Only this thread touches the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from .chunking.base import Chunk
from .chunking.pipeline import CHUNKER_VERSION, ParsedNote, attach_links, chunk_parsed, parse
from .chunking.tokens import Tokenizer, default_tokenizer
from .config import Settings, prepare_store_dir, store_dir
from .embedding import E5_DIM, CachedEmbedder, Embedder, LoadAwareThreads, Vectors, load_average
from .errors import ChunkingError, MindnetError, StoreError, VaultNotFoundError
from .graph import EDGE_LAYOUT, Edge, build_edges, diff_edges, edge_from_payload, note_neighbors, notes_to_relink
from .links import KeptResolver, Link, Resolver, note_keys
from .note_cache import NoteCache
from .points import (
    DENSE_VECTOR,
    E5_VECTOR,
    NAME_FIELDS,
    NOTE_FIELDS,
    NOTE_VECTOR,
    NOTE_WINDOW_TOKENS,
    Transcluded,
    Transcluder,
    WindowText,
    chunk_point,
    contextual_lexical,
    contextual_vectors,
    embedding_input,
    lead_chunks,
    note_inputs,
    note_lexical,
    note_point,
    sync_state,
)
from .quality_tier import E5Mark
from .retrieval_text import RETRIEVAL_TEXT_VERSION, forget_retrieval_texts
from .store import (
    AnyOf,
    Equals,
    Filter,
    PointRecord,
    SparseVec,
    Store,
    StoreSchema,
    VectorSpec,
    bm25_shape,
    point_id,
    shape_fingerprint,
)
from .stores import open_local_store as open_local_store
from .stores import open_server_store as open_server_store
from .stores import open_store as open_store
from .text import content_hash
from .vault import Note, NoteProblem, read_note, read_vault, stat_note
from .vault_changes import KeptRead

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`; the CLI draws bars from it, the library stays silent."""

_WRITE_BATCH = 256
_FIRST_BATCH = 64
"""Chunks of an import's first batch: the encoder starts after a few notes, not after 256 chunks' worth."""
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
    windows_embedded: int = 0
    """Note windows the model embedded (`points.note_windows`): not chunks, but the same model's work."""
    chunks_embedded_e5: int = 0
    """Chunks that got their quality-tier vector in this run (0 when the tier is absent or skipped)."""
    chunks_reused: int = 0
    chunks_written: int = 0
    edges: int = 0
    """Edges in the store after the import."""
    edges_added: int = 0
    edges_deleted: int = 0
    points_written: int = 0
    encoder_ahead: int = 0
    """Batches the encoder ran ahead on its own thread (0: in line; `embed_ahead`, and the load)."""
    encoder_threads: int = 0
    """Threads of the model's latest forward pass (`threads` setting, or chosen from the load; 0: no pass)."""
    seconds: float = 0.0
    dry_run: bool = False
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def import_schema(settings: Settings, embedder: Embedder) -> StoreSchema:
    """The vectors an import writes to chunks: `use`, and the notes' window multivector when enabled; the e5
    tier's vector reserved (made with a new collection, written by the tier) where the default model is USE."""
    vectors = [VectorSpec(DENSE_VECTOR, embedder.model_id, embedder.dim)]
    if settings.note_vectors:
        vectors.append(VectorSpec(NOTE_VECTOR, embedder.model_id, embedder.dim, multi=True))
    reserved = ((E5_VECTOR, E5_DIM),) if settings.model != "e5" else ()
    return StoreSchema(vectors=tuple(vectors), reserved=reserved)


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
        "context": [settings.dense_context, settings.lexical_sections,
                    *([settings.dense_note_tokens] if settings.dense_note_tokens else [])],  # off: old hash
        "languages": list(settings.languages),
        "chunker": CHUNKER_VERSION,
        "retrieval": RETRIEVAL_TEXT_VERSION,
        **({"note_level": [NOTE_WINDOW_TOKENS, settings.note_windows, NOTE_FIELDS]} if settings.note_vectors else {}),
        "edges": EDGE_LAYOUT,
    }
    if bm25 := shape_fingerprint(bm25_shape(settings.lexical_shape)):  # absent at the engine's: old stores stay
        parts["bm25"] = bm25
    return content_hash(json.dumps(parts, sort_keys=True, default=str))


class ImportLock:
    """One import per store at a time (R21): the second fails at once, naming the holder.

    `flock` is released by the kernel when the holder dies, so a killed import never leaves a
    stale lock behind. The owner (`api.Index`) takes it once around each writing operation; the
    lock knows nothing of who else in the process might want it.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise `StoreError` naming the process that holds it."""
        if self._fd is not None:
            raise StoreError(f"the import lock on {self.folder} is already held by this process")
        prepare_store_dir(self.folder)
        fd = os.open(self.folder / "import.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 500, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise StoreError(
                f"another import is running on {self.folder} ({holder}); wait for it to finish or stop it"
            ) from None
        stamp = f"pid {os.getpid()} on {socket.gethostname()}, started {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"
        os.ftruncate(fd, 0)
        os.pwrite(fd, stamp.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> ImportLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


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
    vault: Path,
    settings: Settings,
    *,
    store: Store,
    embedder: Embedder,
    notes_cache: NoteCache,
    folder: Path,
    full: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
    known_edges: int | None = None,
    stored_states: StoredStates | None = None,
    kept_resolver: KeptResolver | None = None,
    kept_read: KeptRead | None = None,
    changed: Collection[str] | None = None,
) -> ImportSummary:
    """Bring the store in line with the vault, doing only the work that changed (R21).

    Every resource arrives opened, and the caller holds the import lock (`api.Index` owns them
    all); the e5 tier is a separate phase (`quality_tier.fill_e5`) that the owner runs afterwards.

    Args:
        vault: the vault folder.
        settings: resolved settings.
        store, embedder: the opened store and the default model (behind its text-hash cache).
        notes_cache: parsed notes of unchanged files.
        folder: the store folder, for the journal and the e5 mark.
        full: drop the store's collections first and rebuild (the embedding cache is kept).
        dry_run: classify notes and report, write nothing.
        progress: stage callback for progress bars.
        known_edges: the store's edge count as the previous import left it, if the caller keeps it:
            an import that changes nothing reports it rather than open the edges to count them.
        stored_states: the stored notes' states, kept by a caller that is the store's only writer; read from
            the store when unknown, used instead of asking it, and updated with what this import writes.
            The caller forgets them when the import raises.
        kept_resolver: the link resolver a resident keeps between imports, refreshed instead of built anew
            (`links.KeptResolver`); the caller forgets it when the import raises.
        kept_read: the last read of the vault, kept by a resident (`vault_changes.KeptRead`); the caller
            forgets it when the import raises.
        changed: with `kept_read`, the vault-relative paths of every file changed since that read (a watcher's
            events): only these files are read (`read_vault`). None reads the whole vault.

    Raises:
        StoreError: the store was built with another model.
    """
    started = time.perf_counter()
    if not vault.is_dir():
        raise VaultNotFoundError(str(vault))
    warmup = _Warmup(embedder)
    meter = LoadAwareThreads()  # what the cores do from here to the first batch
    counter = WindowCounter(embedder)
    ahead = EmbedAhead(counter, settings.embed_ahead, lambda: _free_cores(meter))
    try:
        summary = _run(vault, settings, store, embedder, folder, full, dry_run, progress or silent, notes_cache,
                       warmup, ahead, known_edges, stored_states, kept_resolver, kept_read, changed)
    finally:
        ahead.close()
        warmup.join()
        forget_retrieval_texts()
    summary.seconds = round(time.perf_counter() - started, 3)
    return summary


def silent(stage: str, done: int, total: int) -> None:
    """The `Progress` of a caller that draws no bars."""
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
    warmup: _Warmup,
    ahead: EmbedAhead,
    known_edges: int | None = None,
    known: StoredStates | None = None,
    kept: KeptResolver | None = None,
    kept_read: KeptRead | None = None,
    changed: Collection[str] | None = None,
) -> ImportSummary:
    summary = ImportSummary(dry_run=dry_run)
    if dry_run:
        known = kept = kept_read = None  # a dry run writes nothing, asks the store, and leaves a resident's own alone
    schema = import_schema(settings, embedder)
    opened = _Opening(store, schema)
    if dry_run:
        # A dry run writes nothing, not even the collections of a store that was never imported.
        if full or not store.check(schema):
            store = cast(Store, _NothingStored())
    elif full:
        store.reset(schema)
    elif store.check(schema):
        store.ensure(schema)  # indexes or vectors new to this version; nothing to do in the common case
    else:
        opened.pending = True
        warmup.start()  # every note is new: the model will be needed, start it while the vault is read
    journal = Journal(folder)
    dirty = journal.pending()
    config_hash = chunking_hash(settings)
    stored = cast(Store, _NothingStored()) if opened.pending else store
    if known is not None and (full or opened.pending):
        known.start_empty()
    elif known is not None and not known.known:
        known.read(stored)
    counts: dict[str, int] | None = None  # the store's count of each state, when asked (`_stored_ids_except`)
    if known is not None:
        states = known.states()
    else:
        counts = stored.facet("notes", "sync_state")
        states = set(counts)
    counted_from = (*_embedder_counts(embedder), ahead.windows_embedded)
    # A fresh store's first notes are chunked and embedded as soon as they are read (issue 18).
    early = _EmbedWhileReading(ahead, settings, default_tokenizer()) if opened.pending and not dry_run else None
    notes_cache.autosave = not dry_run
    langs = StoredLanguages(stored)
    # Every note is kept slim (no body) through the import: the vault's size costs a compact record
    # per note, and each note's text is loaded again, a batch at a time, where it is written (issue 27).
    result = read_vault(vault, settings, langs, notes_cache, on_note=early, slim=True,
                        progress=lambda done, total: progress("read", done, total), kept=kept_read,
                        changed=None if full or opened.pending else changed)
    if early is not None:
        early.read_all()
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
    others = (known.ids_except(set(unchanged.values())) if known is not None
              else _stored_ids_except(stored, set(unchanged.values()), counts))
    new = [n for n in result.notes if n.note_id not in unchanged and n.note_id not in others]
    changed = [n for n in result.notes if n.note_id not in unchanged and n.note_id in others]
    deleted = sorted((others | dirty) - set(notes_by_id))
    summary.notes_new, summary.notes_changed, summary.notes_deleted = len(new), len(changed), len(deleted)
    summary.notes_unchanged = len(result.notes) - len(new) - len(changed)
    if not (new or changed or deleted):
        if kept is not None and not kept.built:  # a resident's first import: its resolver is made with the rest
            kept.current(result.notes, result.attachments)
        if not dry_run:
            opened.ready()  # an empty vault's import still leaves an (empty) store behind
        summary.edges = known_edges if known_edges is not None and not dirty else store.count("edges")
        if dirty and not dry_run:
            journal.clear()
        return summary
    tokenizer = default_tokenizer()  # loaded only now: an import that changes nothing never needs it
    resolver = (kept.current(result.notes, result.attachments) if kept is not None
                else Resolver(result.notes, result.attachments))
    loader = _NoteLoader(vault, settings, notes_cache, langs, notes_by_id, early)
    parsed: dict[str, ParsedNote] = {}
    chunk_cache: dict[str, list[Chunk]] = {}
    """The parses and chunks of the batch at hand (and of the notes embedded during the read)."""

    def parsed_of(note: Note) -> ParsedNote:
        if note.note_id not in parsed:
            early_parse = early.parsed(note) if early is not None else None
            parsed[note.note_id] = early_parse if early_parse is not None else parse(note, tokenizer)
        return parsed[note.note_id]

    def chunks_of(note: Note) -> list[Chunk]:
        if note.note_id not in chunk_cache:
            unlinked = early.take_chunks(note) if early is not None else None
            if unlinked is not None:  # chunked while the vault was read: only the links are new
                links = parsed_of(note).links
                chunk_cache[note.note_id] = [attach_links(c, links, resolver, note.path) for c in unlinked]
            else:
                chunk_cache[note.note_id] = chunk_parsed(parsed_of(note), settings, resolver, tokenizer)
        return chunk_cache[note.note_id]

    def links_of(note: Note) -> tuple[Link, ...]:
        return parsed_of(note).links

    def forget(note_ids: Iterable[str]) -> None:
        for note_id in note_ids:
            parsed.pop(note_id, None)
            chunk_cache.pop(note_id, None)

    missing: set[str] = set()

    def loaded(note_ids: Iterable[str]) -> list[Note]:
        """The whole notes of `note_ids`; a file gone or unreadable since the read is reported (once)
        and left for the next import (the journal lists it)."""
        out: list[Note] = []
        for note_id in note_ids:
            note = loader.load(note_id) if note_id not in missing else None
            if note is not None:
                out.append(note)
            elif note_id not in missing:
                missing.add(note_id)
                summary.notes_failed += 1
                summary.problems.append(NoteProblem(notes_by_id[note_id].path, None,
                                                    "changed during the import; imported by the next one").one_line())
        return out

    failures = _chunk_failures([n.note_id for n in (*new, *changed)], notes_by_id, loaded, chunks_of, forget,
                               settings)
    if failures:
        new = [n for n in new if n.note_id not in failures]
        changed = [n for n in changed if n.note_id not in failures]
        summary.notes_new, summary.notes_changed = len(new), len(changed)
        summary.notes_failed += len(failures)
        summary.problems += [NoteProblem(exc.path, exc.line, exc.reason).one_line() for exc in failures.values()]

    source = StoredEdges(stored)
    changed_ids = {n.note_id for n in (*new, *changed)}
    keys = set().union(*(note_keys(n) for n in (*new, *changed))) if changed_ids else set()
    relinked = sorted(notes_to_relink(source.suspects(changed_ids | set(deleted), keys), resolver,
                                      [*new, *changed], deleted, transclude=settings.transclude_embeds))
    summary.notes_relinked = len(relinked)
    first = sorted(changed_ids)
    rewrite = [*first, *relinked]
    step = max(1, settings.import_batch_notes)
    edges = _EdgeWriter(store if not dry_run else None, source, summary, fresh=opened.pending)

    def link(notes: Sequence[Note]) -> None:
        """The edges of a batch of whole notes against the stored ones (edges belong to their note)."""
        by_id = {n.note_id: n for n in notes}
        built = build_edges(notes, {i: chunks_of(n) for i, n in by_id.items()}, resolver, settings,
                            {i: links_of(n) for i, n in by_id.items()})
        edges.replace(set(by_id), built)

    if dry_run:
        for start in range(0, len(rewrite), step):
            batch = loaded(rewrite[start:start + step])
            link(batch)
            forget(n.note_id for n in batch)
        edges.replace(set(deleted), [])
        summary.edges = store.count("edges")
        return summary
    warmup.start()
    journal.write(set(rewrite) | set(deleted) | dirty)  # every note this run may touch, before any write
    E5Mark(folder).clear()  # chunks are about to be rewritten without their e5 vectors
    if deleted:
        opened.ready()
    for note_id in deleted:
        store.delete("chunks", Filter.all(Equals("note_id", note_id)))
    context = (Transcluder(resolver, _LoadedNotes(loader), tokenizer, links_of)
               if settings.transclude_embeds else None)
    # A note new to the store and not in the journal never had a chunk written (its note point, the
    # last write, is missing only when the journal lists it), so no stale chunk can be left to delete.
    unstored = frozenset(n.note_id for n in new if n.note_id not in dirty)
    counts: dict[str, int] = {}
    """Chunks of each note written, for its note point."""
    with ChunkWriter(store, embedder, settings, summary, progress, chunks_of, context, opened.ready,
                     ahead=ahead, counted_from=counted_from, unstored=unstored) as writer:
        writer.expect(len(rewrite))
        sent = set()
        if early is not None:
            sent = writer.add_embedded(early.batches, {i: notes_by_id[i] for i in first})
            early.batches.clear()
        for start in range(0, len(rewrite), step):
            batch = loaded(rewrite[start:start + step])
            writer.add([n for n in batch if n.note_id not in sent])
            opened.ready()  # the encoder has work: a fresh store is made now, before the first edge
            link(batch)
            counts.update((n.note_id, len(chunks_of(n))) for n in batch)
            forget(n.note_id for n in batch)
            progress("link", min(start + step, len(rewrite)), len(rewrite))
        opened.ready()
        edges.replace(set(deleted), [])
        for note_id in deleted:
            store.delete("edges", Filter.all(Equals("note_id", note_id)))
        writer.finish()
    # The note points go last, once every edge is written (their neighbours read them): each is the
    # commit mark of its note, and the journal covers every note until the end.
    points = sorted(set(counts) | (edges.touched - set(deleted)) & set(notes_by_id))
    for start in range(0, len(points), step):
        batch = loaded(points[start:start + step])
        neighbors = _neighbors(store, [n.note_id for n in batch])
        store.upsert("notes", [
            note_point(n, config_hash, counts[n.note_id] if n.note_id in counts else len(chunks_of(n)),
                       neighbors[n.note_id], settings.neighbors)
            for n in batch
        ])
        summary.points_written += len(batch)
        if known is not None:
            for n in batch:
                known.wrote(n, sync_state(n, config_hash))
        forget(n.note_id for n in batch)
        progress("notes", min(start + step, len(points)), len(points))
    store.delete_ids("notes", deleted)
    if known is not None:
        known.deleted(deleted)
    progress("optimize", 0, 1)
    store.optimize()
    progress("optimize", 1, 1)
    journal.clear()
    summary.edges = store.count("edges")
    return summary


class _EdgeWriter:
    """The edges of one import, note batch by note batch: each note's stored edges replaced by its new
    ones (`graph.diff_edges`), counted in the summary; without a store (a dry run) only counted."""

    def __init__(self, store: Store | None, source: StoredEdges, summary: ImportSummary, fresh: bool) -> None:
        self.store = store
        self.source = source
        self.summary = summary
        self.fresh = fresh
        """A store never written: no note has stored edges to read."""
        self.touched: set[str] = set()
        """Notes whose `neighbors` (R18) change: the rebuilt ones and the sources of backlinks added or gone."""

    def replace(self, note_ids: set[str], built: Sequence[Edge]) -> None:
        old = [] if self.fresh or not note_ids else list(self.source.of_notes(note_ids))
        to_add, to_delete = diff_edges(old, built)
        self.touched |= note_ids
        self.touched.update(e.source_id for e in (*to_add, *to_delete) if e.kind == "backlink")
        self.summary.edges_added += len(to_add)
        self.summary.edges_deleted += len(to_delete)
        if self.store is not None:
            self.store.upsert("edges", [PointRecord(e.edge_key, e.payload()) for e in to_add])
            self.store.delete_ids("edges", [e.edge_key for e in to_delete])
            self.summary.points_written += len(to_add)


class _NoteLoader:
    """A note's whole record again, by id, for the batch that writes it: from the notes cache, else the
    file; ids are the ones the read made unique. A note embedded during the read comes from there."""

    def __init__(self, root: Path, settings: Settings, cache: NoteCache, langs: StoredLanguages,
                 slim: Mapping[str, Note], early: _EmbedWhileReading | None) -> None:
        self.root = root
        self.settings = settings
        self.cache = cache
        self.langs = langs
        self.slim = slim
        self.early = early

    def load(self, note_id: str) -> Note | None:
        """The whole note, or None when its file is gone or unreadable now."""
        slim = self.slim.get(note_id)
        if slim is None:
            return None
        note = self.early.note(slim.path) if self.early is not None else None
        if note is None or note.content_hash != slim.content_hash:
            try:
                path, st = stat_note(self.root / slim.path)
                note = self.cache.get(slim.path, st) or read_note(path, slim.path, self.settings, self.langs)
            except (OSError, MindnetError):
                return None
        return note if note.note_id == note_id else dataclasses.replace(note, note_id=note_id)


class _LoadedNotes(Mapping[str, Note]):
    """Whole notes by id, loaded when asked for (the targets of embeds), the last few kept."""

    KEEP = 64

    def __init__(self, loader: _NoteLoader) -> None:
        self.loader = loader
        self._kept: OrderedDict[str, Note | None] = OrderedDict()

    def __getitem__(self, note_id: str) -> Note:
        if note_id not in self._kept:
            self._kept[note_id] = self.loader.load(note_id)
            if len(self._kept) > self.KEEP:
                self._kept.popitem(last=False)
        note = self._kept[note_id]
        if note is None:
            raise KeyError(note_id)
        return note

    def __iter__(self) -> Iterator[str]:
        return iter(self.loader.slim)

    def __len__(self) -> int:
        return len(self.loader.slim)


def _batch_limit(sent: int) -> int:
    """Chunks that close a batch: few in the first, so the encoder starts after a few notes."""
    return _WRITE_BATCH if sent else min(_FIRST_BATCH, _WRITE_BATCH)


class WindowCounter:
    """The import's embed call: the model's `embed_passages`, counting the note windows it embeds.

    A batch holds chunk texts and note windows (`points.WindowText`), embedded in one call: each call
    starts and ends with a core idle (its first group is prepared alone, its last passes finish unevenly),
    and two calls per batch cost a cold import of rustbook-de ~2 % of the encoder's time. The cache tells
    which texts the model embedded (`CachedEmbedder.embed_passages_missed`); an embedder without one counts
    no misses at all (`_embedder_counts`), so its windows are not counted either.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.windows = 0
        """Window texts the model embedded (cache misses) since creation."""

    def __call__(self, texts: Sequence[str]) -> Vectors:
        if not isinstance(self.embedder, CachedEmbedder):
            return self.embedder.embed_passages(texts)
        vectors, missed = self.embedder.embed_passages_missed(texts)
        windows = {content_hash(t) for t in texts if isinstance(t, WindowText)}
        self.windows += len(windows & missed)
        return vectors


def _embedder_counts(embedder: Embedder) -> tuple[int, int]:
    """The text-hash cache's hits and misses so far (0, 0 for an embedder without a cache)."""
    return int(getattr(embedder, "hits", 0)), int(getattr(embedder, "misses", 0))


def _chunk_failures(note_ids: Sequence[str], slim: Mapping[str, Note], loaded: Callable[[Iterable[str]], list[Note]],
                    chunks_of: Callable[[Note], list[Chunk]], forget: Callable[[Iterable[str]], None],
                    settings: Settings) -> dict[str, ChunkingError]:
    """The notes whose chunks cannot be made, by note id, found before anything is written.

    Only the recursive strategy can fail on one note (a user's separator pattern that runs away on
    its text, `ChunkingError`). Such a note is reported and left out of this import: its stored
    chunks stay as they were, and the next import tries it again, while every other note goes on.
    The structure strategy is total, so its notes are not chunked ahead of the encoder here; the
    recursive ones are chunked once here and again where they are written (nothing is kept).
    """
    failures: dict[str, ChunkingError] = {}
    for note_id in note_ids:
        if settings.strategy_for(slim[note_id].type) == "recursive":
            for note in loaded([note_id]):
                try:
                    chunks_of(note)
                except ChunkingError as exc:
                    failures[note_id] = exc
                forget([note_id])
    return failures


@dataclass(slots=True)
class _Early:
    """Whole notes chunked and sent to the encoder while the vault was still being read."""

    notes: list[Note] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    windows: list[list[str]] = field(default_factory=list)
    """Each note's windows (`note_inputs`), in the order of `notes`: they depend on the note alone, so
    `ChunkWriter.add_embedded` takes them as they are instead of cutting them again."""
    chunks: int = 0
    vectors: Future[Vectors] | None = None


class _EmbedWhileReading:
    """A fresh store's notes, chunked and handed to the encoder as `read_vault` reads them (issue 18).

    Reading, parsing and language detection of a whole vault took 4-9 s before the first chunk
    reached the encoder. Every note of a fresh store is new, and what the model sees of a chunk
    (its text, note title and section) does not depend on the other notes, so the encoder can start
    after the first few files. What does depend on them is added later: links are attached to the
    chunks once the vault is read, and `ChunkWriter.add_embedded` checks every batch against what
    `add` would send now (ids made unique, embedded notes' text), using the vectors only if equal.
    Notes that may embed other notes are left out (their text needs the notes they embed). Nothing
    is written before the read ends: the journal still comes first. Batches are the same whether
    the encoder runs on its thread or in line (`submit`), so both make the same store.

    Only the first `EARLY_CHUNKS` chunks' notes are taken (issue 27): they keep the encoder busy
    while the rest is read, and what waits for the read to end (parses, chunks, vectors) stays
    the same size whatever the vault's; the other notes are chunked batch by batch afterwards.
    """

    EARLY_CHUNKS = 2048

    def __init__(self, ahead: EmbedAhead, settings: Settings, tokenizer: Tokenizer) -> None:
        self.ahead = ahead
        self.settings = settings
        self.tokenizer = tokenizer
        self.batches: list[_Early] = []
        self._batch = _Early()
        self._parses: dict[str, tuple[Note, ParsedNote]] = {}
        self._chunks: dict[str, list[Chunk]] = {}
        self._taken = 0
        """Chunks of the notes taken so far."""

    def __call__(self, note: Note) -> None:
        """One note just read: parse, chunk (no links yet) and batch it; a batch full goes to the encoder."""
        if self._taken >= self.EARLY_CHUNKS:
            return
        try:
            note_parse = parse(note, self.tokenizer)
        except MindnetError:
            return  # parsed again after the read, where its error is reported as it always was
        self._parses[note.path] = (note, note_parse)
        if self.settings.transclude_embeds and any(_may_embed_a_note(link) for link in note_parse.links):
            self._taken += 1  # kept for its parse only, but kept: it counts
            return
        try:
            chunks = chunk_parsed(note_parse, self.settings, None, self.tokenizer)
        except MindnetError:
            return  # likewise
        self._chunks[note.path] = chunks
        if self._batch.chunks >= _batch_limit(len(self.batches)):
            self._submit()
        windows = note_inputs(note, self.settings, self.tokenizer)
        self._batch.notes.append(note)
        self._batch.texts.extend(embedding_input(chunk, self.settings) for chunk in chunks)
        self._batch.texts.extend(windows)
        self._batch.windows.append(windows)
        self._batch.chunks += len(chunks)
        self._taken += len(chunks)

    def read_all(self) -> None:
        """The vault is read: the last batch goes too."""
        if self._batch.notes:
            self._submit()

    def note(self, path: str) -> Note | None:
        """The whole note read from `path`, if it was taken (its id as read, maybe not as kept)."""
        found = self._parses.get(path)
        return found[0] if found is not None else None

    def parsed(self, note: Note) -> ParsedNote | None:
        """The parse of `note` made during the read, if it is still this note (same id and text)."""
        found = self._parses.get(note.path)
        return found[1] if found is not None and _same(found[0], note) and found[0].note_id == note.note_id else None

    def take_chunks(self, note: Note) -> list[Chunk] | None:
        """The link-less chunks of `note` made during the read (forgotten here: the caller keeps them linked)."""
        if self.parsed(note) is None or note.path not in self._chunks:
            return None
        return self._chunks.pop(note.path)

    def _submit(self) -> None:
        batch, self._batch = self._batch, _Early()
        batch.vectors = self.ahead.submit(batch.texts)
        self.batches.append(batch)


def _same(kept: Note | None, read: Note) -> bool:
    """Whether `kept` (the note as the import keeps it) is the note `read`: same file, same text."""
    return kept is not None and kept.path == read.path and kept.content_hash == read.content_hash


def _may_embed_a_note(link: Link) -> bool:
    """An embed whose target may be a note (`![[x]]`, `![](x.md)`), not an image or other attachment."""
    if link.kind != "embed" or link.is_url:
        return False
    return Path(link.target).suffix.lower() in ("", ".md")


class _Warmup:
    """The model's start-up (`Embedder.prepare`) on a thread of its own, once an import knows it will embed.

    Loading USE's onnx engine takes seconds that are mostly imports and file reads (about 1 s of CPU
    in 3.8 s at load 40); beside the vault read they cost the import little. A failure is left for
    the first real embedding to raise, where the import reports it as it always has. A no-op
    import never starts it, so it still loads no model.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._prepare, name="mindnet-prepare", daemon=True)
            self._thread.start()

    def _prepare(self) -> None:
        with contextlib.suppress(Exception):  # raised again, and reported, by the first embedding
            self.embedder.prepare_batches()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


@dataclass(slots=True)
class _Opening:
    """A store never written, whose collections and indexes are made once the encoder has work.

    A fresh Edge store's 26 payload indexes are seconds of fsync that Edge's binding waits for
    holding the GIL: a Python thread beside it ran at 1/8 speed, so `ensure` on a thread beside
    `read_vault` overlapped nothing (tried; the read got slower by as much). The encoder's forward
    pass, though, runs outside the GIL. So a fresh store answers the import's reads as empty (it is)
    and `ensure` runs right after the first batches went to the encoder, before the first write.
    The journal still precedes every write, and `ensure` writes its schema record first, so a kill
    at any point leaves a store the next run reads as fresh or as holding journalled notes.
    """

    store: Store
    schema: StoreSchema
    pending: bool = False

    def ready(self) -> None:
        """Create the store's collections and indexes if still pending (before the first write)."""
        if self.pending:
            self.store.ensure(self.schema)
            self.pending = False


class _NothingStored:
    """The reads of an import against a store that holds nothing yet (a dry run, or `--full --dry-run`)."""

    def facet(self, collection: str, key: str) -> dict[str, int]:
        return {}

    def scroll(self, collection: str, flt: Filter | None = None, **options: Any) -> Iterator[Any]:
        return iter(())

    def count(self, collection: str, flt: Filter | None = None) -> int:
        return 0


class StoredEdges:
    """The `graph.EdgeSource` of an import: filtered scrolls, so an edit reads a few edges, not all.

    Many ids or keys are asked for in groups of `MAX_VALUES`, each one filtered scroll, and the
    edges come as they are read: no import holds every edge of a large vault (issue 27).
    """

    MAX_VALUES = 2000
    """Ids or keys per `AnyOf` filter."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def suspects(self, target_ids: set[str], keys: set[str]) -> Iterator[Edge]:
        """May yield an edge more than once (it met two groups): a superset is always correct."""
        for name, values in (("target_id", target_ids), ("link_keys", keys)):
            yield from self._groups(name, values)

    def of_notes(self, note_ids: set[str]) -> Iterator[Edge]:
        yield from self._groups("note_id", note_ids)

    def _groups(self, name: str, values: set[str]) -> Iterator[Edge]:
        ordered = sorted(values)
        for start in range(0, len(ordered), self.MAX_VALUES):
            flt = Filter.all(AnyOf(name, tuple(ordered[start:start + self.MAX_VALUES])))
            for p in self.store.scroll("edges", flt):
                yield edge_from_payload(p.id, p.payload)


_MAX_FILTER_VALUES = 20_000
"""Above this many states, reading every note's state is cheaper than sending them all as a filter."""


class StoredStates:
    """Every stored note's `sync_state` and names by note id, kept by a resident from one import to the next
    (issue 27).

    An import decides what changed by comparing the vault with the stored notes' states; a one-off import asks
    the store for them (a facet of every state and a scroll of the others: ~1 s at 30,000 notes, whatever a
    save changed). A resident of an embedded store is that store's only writer (Edge locks it), so it reads
    them once and each import updates them with the note points it wrote and the notes it deleted. Unknown
    (`known` False) until the first import that uses them reads them; the owner calls `forget` when an import
    fails, so the next one reads them again rather than trust a half-done run.

    The names (`NAME_FIELDS` of each note point) are kept beside the states for the title list: a searcher made
    after a save otherwise read them from every note point again, 0.8-1.7 s and ~40 MB of decoded payloads at
    30,000 notes, on the first search after each save.
    """

    def __init__(self) -> None:
        self._by_id: dict[str, str] | None = None
        self._names: dict[str, tuple[Any, ...]] = {}
        """Note id -> its point's UUID as a number (the store's order), then the note point's `NAME_FIELDS` (~0.4 KB
        a note with its key and title: 11 MB at 30,000 notes)."""
        self.version = 0
        """Changes with every change of what is kept (`rows` of an equal version are equal)."""

    @property
    def known(self) -> bool:
        return self._by_id is not None

    def read(self, store: Store) -> None:
        """Take every stored note's state and names from `store` (one scroll of five payload fields)."""
        self._by_id, self._names = {}, {}
        for p in store.scroll("notes", fields=("sync_state", *NAME_FIELDS)):
            self._by_id[p.id] = str(p.payload.get("sync_state", ""))
            title, aliases, area, project = (p.payload.get(f) for f in NAME_FIELDS)
            self._name(p.id, (title, tuple(aliases or ()), area, project))

    def start_empty(self) -> None:
        """The store holds no note (a fresh or rebuilt store)."""
        self._by_id, self._names = {}, {}
        self.version += 1

    def forget(self) -> None:
        """Unknown again: the next import reads them from the store."""
        self._by_id, self._names = None, {}
        self.version += 1

    def states(self) -> set[str]:
        return set(self._ids().values())

    def ids_except(self, states: set[str]) -> set[str]:
        """Ids of the stored notes whose state is none of `states` (`_stored_ids_except`, from memory)."""
        return {note_id for note_id, state in self._ids().items() if state not in states}

    def wrote(self, note: Note, state: str) -> None:
        """`note`'s point was written with `state` (its names as `points.note_point` writes them)."""
        self._ids()[note.note_id] = state
        self._name(note.note_id, (note.title, tuple(note.aliases), note.area, note.project))

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        """(note id, its `NAME_FIELDS`) of every stored note, in the order a scroll of the notes returns them
        (by point id), so that a title index made from them is the one `search.note_names` makes."""
        ordered = sorted(self._names.items(), key=lambda item: item[1][0])
        return [(note_id, dict(zip(NAME_FIELDS, kept[1:], strict=True))) for note_id, kept in ordered]

    def _name(self, note_id: str, fields: tuple[Any, ...]) -> None:
        old = self._names.get(note_id)
        if old is not None and old[1:] == fields:
            return  # a note point rewritten for its links: a save's other notes keep their names
        order = old[0] if old is not None else int(point_id(note_id).replace("-", ""), 16)
        self._names[note_id] = (order, *fields)
        self.version += 1

    def deleted(self, note_ids: Iterable[str]) -> None:
        by_id = self._ids()
        for note_id in note_ids:
            by_id.pop(note_id, None)
            if self._names.pop(note_id, None) is not None:
                self.version += 1

    def _ids(self) -> dict[str, str]:
        if self._by_id is None:
            raise RuntimeError("stored states asked for before they were read")  # a bug in the caller
        return self._by_id


def _stored_ids_except(store: Store, states: set[str], counts: Mapping[str, int] | None = None) -> set[str]:
    """Ids of the stored notes whose `sync_state` is none of `states`.

    `counts`: the store's own count of each `sync_state` (`Store.facet`), when the caller has it. When every
    stored state is among `states` and the counts add up to the stored notes (so none lacks the field), no
    note can be left, and the store is not read: in a no-op import of 30,000 notes that read was 0.9 s of 4.5
    (issue 27)."""
    if counts is not None and counts.keys() <= states and sum(counts.values()) == store.count("notes"):
        return set()
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
    loads the language model. Lookups query the store's index one hash at a time (each hash once an
    import) until they cost as much as reading every stored language at once, which they then do.
    """

    BULK = 20
    """Lookups always made one at a time, however small the store."""
    BULK_SHARE = 10
    """Every stored language is read once the lookups exceed a tenth of the stored notes: one lookup costs
    ~0.2 ms and reading them all ~0.02 ms a note (30,000 notes: 0.6 s, the price of ~2,600 lookups), so an
    import pays at most about twice the cheaper way. A resident's save of ten notes, which looks each up
    while reading and again while writing it, no longer reads all 30,000 (0.6 s of a 2.2 s save, issue 27)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.lookups = 0
        self._limit: int | None = None
        self._seen: dict[str, str | None] = {}
        self._all: dict[str, str] | None = None

    def get(self, content_hash: str, /) -> str | None:
        if self._all is not None:
            return self._all.get(content_hash)
        if content_hash in self._seen:
            return self._seen[content_hash]
        self.lookups += 1
        if self.lookups > self._bulk_after():
            self._all = {
                p.payload["content_hash"]: p.payload["lang"]
                for p in self.store.scroll("notes", fields=("content_hash", "lang")) if p.payload.get("lang")
            }
            return self._all.get(content_hash)
        found = None
        for p in self.store.scroll("notes", Filter.all(Equals("content_hash", content_hash)), fields=("lang",)):
            if p.payload.get("lang"):
                found = str(p.payload["lang"])
                break
        self._seen[content_hash] = found
        return found

    def _bulk_after(self) -> int:
        """Lookups one at a time before every language is read (the store's notes counted once)."""
        if self.lookups <= self.BULK:
            return self.BULK
        if self._limit is None:
            self._limit = max(self.BULK, self.store.count("notes") // self.BULK_SHARE)
        return self._limit


@dataclass(slots=True)
class _Batch:
    """Whole notes' chunks (`_WRITE_BATCH` or a note more) on their way to the encoder and the store."""

    chunks: list[Chunk] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    """What the model sees, note by note: each chunk (`embedding_input`), in chunk order, then the note's
    windows (`note_inputs`)."""
    windows: list[int] = field(default_factory=list)
    """How many of a note's texts are its windows, for each note of `notes` in order."""
    extra: dict[str, Transcluded] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    """Notes whose last chunk is in this batch: once it is written, their own writes can finish."""
    note_chunks: dict[str, list[Chunk]] = field(default_factory=dict)
    """Each note's chunks, by note id: the importer keeps none once the batch is sent."""


class EmbedAhead:
    """Runs `embed` on one worker thread, up to `ahead` batches ahead of the caller (issue 18).

    The importer spends about a third of a cold import reading, chunking, hashing and writing;
    the encoder, onnxruntime's forward pass, releases the GIL. So while the worker embeds one
    batch, the caller chunks the next and writes the previous one: the two overlap on two cores,
    and on a busy machine two runnable threads get more of it than one. At most `ahead` batches
    wait or run at once (memory stays bounded); results come back in submission order, and an
    error of `embed` is raised by the call that collects its batch. `ahead=0` embeds in line, on
    the caller's thread, as the importer did before.
    """

    def __init__(self, embed: Callable[[Sequence[str]], Vectors], ahead: int,
                 spare_cores: Callable[[], float] | None = None) -> None:
        """Args:
            embed: the model's `embed_passages`.
            ahead: batches the encoder may run ahead; 0 embeds in line.
            spare_cores: asked once, at the first batch (or the first look at `ahead`), for the cores
                other programs leave free: `ahead` then holds only with `OVERLAP_SPARE_CORES` of them
                (`embed_ahead`). Not earlier, so an import can measure the cores over its own first
                second; None: `ahead` as given.
        """
        self._embed = embed
        self._setting = max(0, ahead)
        self._spare_cores = spare_cores
        self._ahead: int | None = None if spare_cores is not None and self._setting else self._setting
        self._pool: ThreadPoolExecutor | None = None
        self._queue: deque[tuple[_Batch, Future[Vectors]]] = deque()
        self._switch: float | None = None
        """The interpreter's switch interval before the worker started, put back by `close`."""

    @property
    def ahead(self) -> int:
        """Batches the encoder may run ahead of the caller (0: in line), decided on first use."""
        if self._ahead is None:
            assert self._spare_cores is not None
            self._ahead = embed_ahead(self._setting, self._spare_cores())
        if self._ahead and self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mindnet-embed")
            self._switch = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch, OVERLAP_SWITCH_INTERVAL))
        return self._ahead

    @property
    def windows_embedded(self) -> int:
        """Note windows the model embedded through this encoder (`WindowCounter`), 0 if it does not count."""
        return int(getattr(self._embed, "windows", 0))

    @property
    def busy(self) -> bool:
        """A batch is still being embedded or waits for the worker."""
        return any(not future.done() for _, future in self._queue)

    @property
    def waiting(self) -> int:
        """Batches submitted and not yet collected (running, queued or done)."""
        return len(self._queue)

    def submit(self, texts: Sequence[str]) -> Future[Vectors]:
        """Embed `texts` on the worker (in line: now), for a batch `put` later with this future."""
        if self.ahead and self._pool is not None:
            return self._pool.submit(self._embed, texts)
        future: Future[Vectors] = Future()
        try:
            future.set_result(self._embed(texts))
        except Exception as exc:  # raised by the `put` that collects it, as the worker's would be
            future.set_exception(exc)
        return future

    def put(self, batch: _Batch, vectors: Future[Vectors] | None = None) -> list[tuple[_Batch, Vectors]]:
        """Queue `batch`, or its `vectors` from `submit`; returns the batches finished by now (waits
        only while more than `ahead` are out)."""
        if not self.ahead or self._pool is None:
            return [(batch, vectors.result() if vectors is not None else self._embed(batch.texts))]
        self._queue.append((batch, vectors or self._pool.submit(self._embed, batch.texts)))
        done: list[tuple[_Batch, Vectors]] = []
        while self._queue and (len(self._queue) > self.ahead or self._queue[0][1].done()):
            queued, future = self._queue[0]
            if done and future.exception() is not None:
                break  # the batches before it are good: they go first, the error with the next call
            self._queue.popleft()
            done.append((queued, future.result()))
        return done

    def drain(self) -> Iterator[tuple[_Batch, Vectors]]:
        """Every batch still out, in order, each as soon as it is embedded."""
        while self._queue:
            queued, future = self._queue.popleft()
            yield queued, future.result()

    def close(self) -> None:
        """Drop the batches not started and wait for the running one (an error path: nothing is written)."""
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None


class ChunkWriter:
    """Chunk notes, embed their chunks (cache first) and write them, the encoder working ahead.

    Per note the order of writes stays: its chunks, then its stale chunks deleted; its note point,
    the commit mark, is written by the importer once every batch is (`finish`). Edges may be written
    at any point in between (the journal covers every note). A batch keeps its notes' chunks, so the
    importer forgets them once a batch is sent (issue 27). Only the caller's thread touches the
    store; the worker of `EmbedAhead` only calls the embedder (the model behind its text-hash cache).
    """

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        summary: ImportSummary,
        progress: Progress,
        chunks_of: Callable[[Note], list[Chunk]],
        transcluder: Transcluder | None = None,
        before_write: Callable[[], None] | None = None,
        *,
        ahead: EmbedAhead,
        counted_from: tuple[int, int, int] | None = None,
        unstored: frozenset[str] = frozenset(),
    ) -> None:
        self.store = store
        self._unstored = unstored
        """Notes with no chunk in the store (new, and not in the journal): nothing of theirs is stale."""
        self.embedder = embedder
        self.settings = settings
        self.summary = summary
        self.progress = progress
        self.chunks_of = chunks_of
        self.transcluder = transcluder
        self.notes = 0
        """Notes handed to `add` so far."""
        self.total = 0
        """Notes this import will hand to `add` (`expect`), for progress; 0: those handed so far."""
        self.written = 0
        """Notes whose chunks are all in the store (and their stale chunks gone)."""
        self._batch = _Batch()
        self._sent = 0
        self._before_write = before_write
        """Called once before the first write, when the encoder has as much work as it may queue."""
        self._ahead = ahead  # the import's: it decides the overlap at the first batch and closes it
        summary.encoder_ahead = self._ahead.ahead
        self._before = counted_from or (*_embedder_counts(embedder), ahead.windows_embedded)
        """The embedder's hits and misses, and the windows embedded, before this import's first embedding
        (maybe during the read)."""

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._ahead.close()

    def expect(self, total: int) -> None:
        """The number of notes this import writes, so progress counts towards it."""
        self.total = total

    def add(self, notes: Sequence[Note]) -> None:
        """Chunk `notes` into batches for the encoder, writing whatever batch it has finished meanwhile."""
        self.notes += len(notes)
        for i, note in enumerate(notes, 1):
            if len(self._batch.chunks) >= _batch_limit(self._sent):
                self._send()  # whole notes per batch: a chunk's stored vectors depend on its section
            self._append(self._batch, note)
            if i % 50 == 0 or i == len(notes):
                self.progress("chunk", self.notes - len(notes) + i, max(self.total, self.notes))
        if self._batch.chunks or self._batch.notes:
            self._send()  # the encoder need not wait for the next notes (after the edges, or none)

    def add_embedded(self, batches: Sequence[_Early], wanted: Mapping[str, Note]) -> set[str]:
        """Send on the batches embedded while the vault was read, each as the same batch `add` would
        build now; returns the ids of the notes sent.

        A batch goes on only if every note is still to be written (ids are made unique after the
        read) and its texts are exactly what the model sees now (an embed's text needs the whole
        vault); otherwise its notes are left for `add` and its vectors are not used.
        """
        sent: set[str] = set()
        for early in batches:
            if not all(_same(wanted.get(n.note_id), n) for n in early.notes):
                continue  # a note skipped, or given another id, when ids were made unique
            batch = _Batch()
            for note, windows in zip(early.notes, early.windows, strict=True):
                self._append(batch, note, windows)
            if batch.texts != early.texts:
                continue
            self.notes += len(early.notes)
            self.progress("chunk", self.notes, max(self.total, self.notes))
            self._send(batch, early.vectors)
            sent.update(n.note_id for n in early.notes)
        return sent

    def _append(self, batch: _Batch, note: Note, windows: list[str] | None = None) -> None:
        """A whole note's chunks and model inputs into `batch`; `windows`: the note's `note_inputs`, if cut already."""
        chunks = self.chunks_of(note)
        batch.note_chunks[note.note_id] = chunks
        extra = self.transcluder.context(note, chunks) if self.transcluder is not None else {}
        for chunk in chunks:
            transcluded = extra.get(chunk.chunk_id, ())
            batch.chunks.append(chunk)
            batch.texts.append(embedding_input(chunk, self.settings, transcluded))
            if transcluded:
                batch.extra[chunk.chunk_id] = transcluded
        if windows is None:
            windows = note_inputs(note, self.settings, default_tokenizer())
        batch.texts.extend(windows)
        batch.windows.append(len(windows))
        batch.notes.append(note)

    def finish(self) -> None:
        """Write every batch still out (with the note points of its notes)."""
        self._prepare()
        if self._ahead.busy:
            # While the encoder finishes, flush what is written: closing the store then has only the
            # last batches left to write (it was 1.5-2.3 s of serial work after the encoder).
            self.store.flush()
        for done, vectors in self._ahead.drain():
            self._write(done, vectors)
        now = (*_embedder_counts(self.embedder), self._ahead.windows_embedded)
        _, misses, windows = (n - b for n, b in zip(now, self._before, strict=True))
        self.summary.windows_embedded += windows
        self.summary.chunks_embedded += misses - windows
        # Written without a model call: the cache's hits overcount them, since a batch embedded while the
        # vault was read and then sent again (one of its notes got another id) hits the cache a second time.
        self.summary.chunks_reused = max(0, self.summary.chunks_written - self.summary.chunks_embedded)
        self.summary.encoder_threads = _encoder_threads(self.embedder)

    def _send(self, batch: _Batch | None = None, vectors: Future[Vectors] | None = None) -> None:
        """Hand a batch (the one being filled, by default) to the encoder, or its vectors if embedded already."""
        if batch is None:
            batch, self._batch = self._batch, _Batch()
        self._sent += 1
        if self._ahead.waiting >= self._ahead.ahead:
            # The encoder holds all the batches it may: what this thread would otherwise wait for
            # runs now (a fresh store's collections and indexes), the encoder working beside it.
            self._prepare()
        finished = self._ahead.put(batch, vectors)
        if finished:
            self._prepare()
        for done, vectors in finished:
            self._write(done, vectors)

    def _prepare(self) -> None:
        """Run `before_write` once, before the first write."""
        if self._before_write is not None:
            before, self._before_write = self._before_write, None
            before()

    def _write(self, batch: _Batch, raw: Vectors) -> None:
        own, windows = self._split(batch, raw)
        vectors = contextual_vectors(batch.chunks, own, self.settings.dense_context,
                                     self.settings.dense_note_tokens)
        sparse = contextual_lexical(batch.chunks, batch.extra, self.settings.lexical_sections,
                                    bm25_shape(self.settings.lexical_shape))
        lead = {chunk_id: note_id for note_id, chunk_id in lead_chunks(batch.chunks, own).items()}
        by_id = {n.note_id: n for n in batch.notes}
        points = [chunk_point(c, vec, batch.extra.get(c.chunk_id, ()), lexical=lex,
                              note=self._note_level(batch, by_id[lead[c.chunk_id]], windows)
                              if c.chunk_id in lead else None)
                  for c, vec, lex in zip(batch.chunks, vectors, sparse, strict=True)]
        self.store.upsert("chunks", points)
        self.summary.chunks_written += len(points)
        self.summary.points_written += len(points)
        stale = [self._stale(batch, note) for note in batch.notes if note.note_id not in self._unstored]
        if stale:  # one call for the batch: a delete per note was a large part of a cold import's writes
            self.store.delete("chunks", stale[0] if len(stale) == 1 else Filter(should=tuple(stale)))
        self.written += len(batch.notes)
        self.progress("embed", self.written, max(self.total, self.notes))

    def _split(self, batch: _Batch, raw: Vectors) -> tuple[list[Any], dict[str, list[Any]]]:
        """The batch's vectors parted into its chunks' (in chunk order) and each note's windows'."""
        own: list[Any] = []
        windows: dict[str, list[Any]] = {}
        at = 0
        for note, count in zip(batch.notes, batch.windows, strict=True):
            n = len(batch.note_chunks[note.note_id])
            own.extend(raw[at:at + n])
            windows[note.note_id] = list(raw[at + n:at + n + count])
            at += n + count
        return own, windows

    def _note_level(self, batch: _Batch, note: Note,
                    windows: Mapping[str, list[Any]]) -> tuple[list[Any], SparseVec]:
        """A note's note-level vectors for its lead chunk: window vectors and fielded BM25 document."""
        return windows.get(note.note_id, []), note_lexical(note, batch.note_chunks[note.note_id])

    def _stale(self, batch: _Batch, note: Note) -> Filter:
        """The note's stored chunks that its new chunks do not replace (R21)."""
        keep = tuple(c.chunk_id for c in batch.note_chunks[note.note_id])
        return Filter(must=(Equals("note_id", note.note_id),), must_not=(AnyOf("chunk_id", keep),) if keep else ())


OVERLAP_SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the GIL while another waits for it, during an overlapped import (Python's
default is 0.005).

The encoder gives the GIL up at every forward pass and needs it back for the numpy work between
passes; the chunking and writing thread, pure Python, then keeps it until the interval runs out. At
the default that made the encoder wait a few milliseconds per pass: a cold import of rustbook-de
(2,789 texts) took 14.1 s against 13.8 s at 0.5 ms, in 6 of 6 paired runs on an idle 2-core machine
(2026-12-03). Set while the encoder's thread runs, put back when the import closes it."""


OVERLAP_SPARE_CORES = 1.5
"""Cores other programs must leave free for the encoder to run on its own thread: one for it and
one for the chunking and writing thread, give or take half a core."""


def embed_ahead(setting: int, spare_cores: float) -> int:
    """Batches the encoder may run ahead: the `embed_ahead` setting while the machine has cores to
    spare, else 0 (in line).

    Overlap pays only with a free core for each thread. On the shared 2-core VM (load 12-40, the
    import getting a third to half of a core) the process's CPU time was the same either way
    (21.9-24.1 s for 1,000 msdocs notes) and overlapped imports ran at 0.90-1.38x the in-line
    ones' speed, paired rounds of bench/import.py --scenarios overlap: the time outside the
    encoder fell from ~19-23 s to 7-9 s, but the encoder got slower by about as much, because
    the second thread competes for the same slice of CPU and for the GIL.
    """
    return setting if spare_cores >= OVERLAP_SPARE_CORES else 0


def _free_cores(meter: LoadAwareThreads) -> float:
    """Cores other programs leave free at an import's first batch: the load average's answer
    (`_spare_cores`) or the cores' busy time since the import began (`meter`), whichever leaves more.

    The load average trails by a minute: an import started just after another program read load
    1.5-1.8 on an idle 2-core machine (bench/before_after.py, right after the old code's import)
    and embedded in line, at 273 chunks/s with the encoder 59 % of the time, against 286-299 and
    91-93 % on its own thread in the same conditions. Taking the larger only turns an in-line
    import into an overlapped one where the cores were measurably free; where the interval is too
    short or cannot be measured, the load average decides as before.
    """
    others = meter.recent_others()
    recent = meter.cpus - others if others is not None else float("-inf")
    return max(_spare_cores(), recent)


def _spare_cores() -> float:
    """Cores the other programs leave free, from the 1-minute load average (0 where it is unavailable)."""
    load = load_average()
    return 0.0 if load is None else (os.cpu_count() or 1) - load


def _encoder_threads(embedder: Embedder) -> int:
    """Threads of the model's latest forward pass, found through any wrappers (0 when it does not say)."""
    model: Any = embedder
    while model is not None:
        threads = getattr(type(model), "threads", None)
        if threads is not None:
            return int(getattr(model, "threads", 0))
        model = getattr(model, "inner", None)
    return 0


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


__all__ = ["ImportLock", "ImportSummary", "import_vault", "open_store", "store_dir"]
