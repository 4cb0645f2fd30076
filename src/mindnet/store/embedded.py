"""`EdgeStore`: the embedded adapter, one Qdrant Edge shard per collection (R20 default)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from ..errors import StoreError
from .base import PREFIX_INDEXED, SEARCH_EF, TEXT_TOKENIZER, Store, _scored, _stored, text_tokenizer
from .lexical import SPARSE_VECTOR
from .records import (
    AnyOf,
    Condition,
    Equals,
    Filter,
    HasVector,
    Prefix,
    Range,
    ScoredPoint,
    SparseVec,
    StoredPoint,
    TextMatch,
)

PRESENT = "present"
"""A one-entry sparse vector on every point of a collection without dense vectors (edges, notes).

Qdrant's optimiser turns a segment into its immutable, memory-mapped form only once its vectors pass the
indexing threshold; a collection of payloads alone would stay in the appendable form forever, with every
payload index held in memory (233k edges of a 10k-note vault: ~500 MB, and a second to load). The marker
gives the optimiser something to count. Stores created before it have no marker and keep working."""

RELEASE_POINTS = 4096
"""Points written between two `release_pages` of a writing store: an import's pages of the segments it
writes and reads (every edge and chunk of a 30,000-note vault) otherwise all stayed counted in its memory;
a release costs a read of /proc/self/maps and a few hundred `madvise` calls, a millisecond or two."""
SETTLE_POINTS = 20_000
"""Points written to one collection between two settles in a bulk import: optimise what was written into
bounded immutable segments, reopen the shard and hand freed memory back, so that an import's peak memory is
set by this figure and not by the vault (issue 27)."""

LAST_OPERATION = qe.UpdateOperation.delete_points(["00000000-0000-0000-0000-000000000000"])
"""What a shard written to is given last before it closes: the deletion of a point that cannot exist (every point
id is a UUID of version 5, never the nil one). Edge keeps a shard's last operation in its write-ahead log and reads
it back each time the shard loads, so without this every load decoded and applied an import's last batch again
(its vectors, payloads and text index entries), with Python's lock held: a fifth of a cold search's load of the
chunks (docs/benchmarks.md, "Start-up")."""

REOPEN_AFTER = 2_000
"""Points written since the last reopen above which `optimize` also reopens: small saves (watch mode) keep
their shard open; a large import drops the pages its optimiser touched."""

INDEXING_THRESHOLD_KB = 10_000
"""Vectors (KB) an appendable segment holds before the optimiser indexes it into an immutable segment
(Qdrant's default, ~5k chunk vectors): a small vault stays one appendable segment, searched exactly, and its
import builds no HNSW (1 MB made the cold import of a 1.7k-chunk book 1.3 s slower)."""

MARKER_INDEXING_KB = 64
"""The same threshold for a collection whose only vector is the marker (~5 bytes a point): ~13k edges or
notes, so a settle of 20k points always leaves an immutable segment."""

FULL_SCAN_KB = 10_000
"""Vectors (KB) under which Qdrant scans a segment instead of walking its graph: Qdrant's default. The
binding requires it in every HNSW setting, the collection's and the `note` multivector's (`_graph`)."""

MAX_SEGMENT_KB = 65_536
"""Largest segment (KB of vectors) the optimiser builds or merges into: ~30k chunks, what one optimisation
holds at once."""

MARKER_SEGMENT_KB = 128
"""The same bound for a collection whose only vector is the marker (~5 bytes a point): ~25k edges or notes.
Qdrant counts vector bytes only, so the chunks' bound would let every edge merge into one segment, rewritten
whole on each merge."""

RESCORE_OVERSAMPLING = 2.0
"""Candidates a quantized search of a plain vector keeps per hit asked for, rescored with the stored vectors
(`_quantized`). Measured on the note list when it was rescored too: with 2, the top 40 scores equalled the exact
scan's in 30 of 30 queries at 30,000 notes and on msdocs; with 1, in 22 of 30 (docs/decisions/large-vaults.md)."""

_RESCORED = qe.SearchParams(hnsw_ef=SEARCH_EF, quantization=qe.QuantizationSearchParams(
    rescore=True, oversampling=RESCORE_OVERSAMPLING))
"""A dense search's parameters: walk with `SEARCH_EF`, read the int8 copies, rescore the best with the stored
vectors (`_quantized`)."""

_SCANNED = qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=False))
"""The note list's parameters: its windows' int8 copies scanned, and the notes ranked by them as they are.

Why not rescored like the other lists: rescoring reads the best notes' windows in half floats, at random, and the
kernel maps 64 KB of a cached file around each read (fault-around; `MADV_RANDOM` does not change it), so a few
searches of a large vault mapped nearly all of the windows' half floats, and a warm `serve` held more memory per
note than issue 27 allows. Ranked by the copies, the order moves little, and a small vault's appendable segment has
no copies: it is scanned exactly as before (figures: docs/decisions/large-vaults.md, "The note list without
rescoring")."""

_LEFT_FOR_EXIT: dict[str, qe.EdgeShard] = {}
"""Shards of stores that wrote nothing, left open for the process's exit (`Store.leave_to_exit`), by
folder; referenced here so that their destructors, which close them, never run before it. Opening the
same collection again in the process takes its shard back."""


def _cold() -> Any:
    """Memory placement for everything the store keeps: on disk, paged in when read, never preloaded.

    A resident then holds what its searches touch (the page cache can drop it), and opening a store does
    not read it whole; the HNSW graph and vectors of a warm store stay in the page cache all the same."""
    return qe.Memory.Cold


class EdgeStore(Store):
    """Embedded store: one Qdrant Edge shard per collection under `path` (R20 default).

    A shard's WAL holds an exclusive lock, so a second process opening the same store fails with a
    `StoreError` rather than corrupting it (R21).
    """

    reserves = True  # Edge cannot place a vector added later: it would be held in memory, read whole on open

    def __init__(self, path: str | os.PathLike[str], *, prefix: str = "mindnet", hnsw_m: int = 16,
                 hnsw_ef_construct: int = 128, leave_to_exit: bool = False) -> None:
        super().__init__(prefix, hnsw_m, hnsw_ef_construct)
        self.path = Path(path)
        self.leave_to_exit = leave_to_exit
        # Created on the first write, not here: a status or a search of a vault that was never
        # imported (or a typo) must not leave a store folder behind.
        self._shards: dict[str, qe.EdgeShard] = {}
        self._pending: dict[str, int] = {}  # points written per collection since its shard was reopened
        self._markers: dict[str, bool] = {}  # whether a collection's shard carries the PRESENT vector
        self._search_params: dict[str, dict[str, qe.SearchParams]] = {}  # of each vector with int8 copies
        self._wrote = False  # whether anything was written through this store (`close` flushes then)
        self._written: set[str] = set()  # collections updated since their shard was loaded (`LAST_OPERATION`)
        self._unreleased = 0  # points written since the store's pages were last let go (`RELEASE_POINTS`)
        self.writes = 0
        self._loading = threading.Lock()
        """Held while a shard loads: a search's e5 list (on the index's executor) and its other lists (on the
        caller's thread) may both ask for a shard not loaded yet, and a second load of it in the same process
        finds its WAL locked by the first."""

    def describe(self) -> str:
        return str(self.path)

    # meta: a small JSON file, replaced atomically
    def _meta_path(self) -> Path:
        return self.path / f"{self.prefix}.meta.json"

    def _read_meta(self) -> dict[str, Any] | None:
        try:
            return json.loads(self._meta_path().read_text(encoding="utf-8"))  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read {self._meta_path()}: {exc}") from exc

    def _write_meta(self, meta: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self._meta_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self._meta_path())

    def _drop_meta(self) -> None:
        self._meta_path().unlink(missing_ok=True)

    # shards
    def _dir(self, collection: str) -> Path:
        return self.path / self._name(collection)

    def _exists(self, collection: str) -> bool:
        return collection in self._shards or (self._dir(collection) / "edge_config.json").is_file()

    def _shard(self, collection: str) -> qe.EdgeShard:
        self.used = time.monotonic()
        shard = self._shards.get(collection)
        if shard is not None:
            return shard
        with self._loading:
            shard = self._shards.get(collection) or _LEFT_FOR_EXIT.pop(str(self._dir(collection)), None)
            if shard is None:
                try:
                    shard = qe.EdgeShard.load(str(self._dir(collection)))
                except Exception as exc:  # Edge raises plain Exception; WouldBlock = WAL locked
                    raise _edge_error(self._dir(collection), exc) from exc
            self._shards[collection] = shard
            return shard

    def _create(self, collection: str, dense: Mapping[str, tuple[int, bool]], sparse: Sequence[str]) -> None:
        sparse_params = {n: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=_cold()) for n in sparse}
        if not dense:
            sparse_params[PRESENT] = qe.EdgeSparseVectorParams(memory=_cold())
        config = qe.EdgeConfig(
            vectors={n: qe.EdgeVectorParams(size=d, distance=qe.Distance.Cosine, multivector_config=_multi(m),
                                            datatype=_datatype(m), hnsw_config=_graph(m),
                                            quantization_config=_quantized(), memory=_cold())
                     for n, (d, m) in dense.items()},
            sparse_vectors=sparse_params,
            hnsw_config=qe.HnswIndexConfig(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct,
                                           full_scan_threshold=FULL_SCAN_KB, memory=_cold()),
            optimizers=qe.EdgeOptimizersConfig(
                indexing_threshold=INDEXING_THRESHOLD_KB if dense else MARKER_INDEXING_KB,
                max_segment_size=MAX_SEGMENT_KB if dense else MARKER_SEGMENT_KB),
            payload_memory=_cold(),
            id_tracker_memory=_cold(),
        )
        self._wrote = True
        self.writes += 1
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._shards[collection] = qe.EdgeShard.create(str(self._dir(collection)), config)
        except Exception as exc:
            raise _edge_error(self._dir(collection), exc) from exc

    def _drop(self, collection: str) -> None:
        self._wrote = True
        self.writes += 1
        shard = self._shards.pop(collection, None)
        self._pending.pop(collection, None)
        self._markers.pop(collection, None)
        self._search_params.pop(collection, None)
        self._written.discard(collection)
        if shard is not None:
            shard.close()
        shutil.rmtree(self._dir(collection), ignore_errors=True)

    def _config(self, collection: str) -> dict[str, Any]:
        """The collection's `edge_config.json` as Edge keeps it: its vectors, their settings, its sparse vectors."""
        return json.loads((self._dir(collection) / "edge_config.json").read_text(encoding="utf-8"))

    def _dense_names(self, collection: str) -> dict[str, int]:
        config = self._config(collection)
        self._shard(collection)  # take the lock early: a busy store fails here, not mid-import
        return {n: int(v["size"]) for n, v in (config.get("vectors") or {}).items()}

    def _drop_dense(self, collection: str, name: str) -> None:
        self._search_params.pop(collection, None)
        self._update(collection, qe.UpdateOperation.delete_vector_name(name))

    def _add_dense(self, collection: str, name: str, dim: int, multi: bool) -> None:
        self._search_params.pop(collection, None)
        self._update(collection, qe.UpdateOperation.create_dense_vector(
            name, dim, qe.Distance.Cosine, multivector_config=_multi(multi), datatype=_datatype(multi)))

    def _sparse_names(self, collection: str) -> set[str]:
        config = self._config(collection)
        return set(config.get("sparse_vectors") or {})

    def _add_sparse(self, collection: str, name: str) -> None:
        self._update(collection, qe.UpdateOperation.create_sparse_vector(name, modifier=qe.Modifier.Idf))

    def _index(self, collection: str, keywords: Sequence[str], texts: Sequence[str]) -> None:
        shard = self._shard(collection)
        have = shard.info().payload_schema
        for key in keywords:
            if key not in have:
                # No HNSW links per payload value (Qdrant builds a subgraph per keyword value otherwise: most of
                # an import's optimise time for no gain, filters on these fields are small or exact scans).
                params = qe.KeywordIndexParams(prefix=key in PREFIX_INDEXED or None, memory=_cold(), on_disk=True,
                                               enable_hnsw=False)
                self._update(collection, qe.UpdateOperation.create_field_index(key, params))
        for key in texts:
            if key in have and text_tokenizer(have[key]) == TEXT_TOKENIZER:
                continue
            if key in have:  # made with another tokenizer: made anew
                self._update(collection, qe.UpdateOperation.delete_field_index(key))
            self._update(collection, qe.UpdateOperation.create_field_index(key, _edge_text_index()))

    def _upsert(self, collection: str,
                batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]]) -> None:
        points = []
        # One marker for the batch: a point takes a copy of it, and the marker is most of an edge's vectors.
        marker = qe.SparseVector([0], [1.0]) if self._has_marker(collection) else None
        for pid, payload, dense, sparse in batch:
            vector: dict[str, Any] = dict(dense)
            for name, sv in sparse.items():
                vector[name] = qe.SparseVector(list(sv.indices), list(sv.values))
            if marker is not None:
                vector[PRESENT] = marker
            points.append(qe.Point(pid, vector, payload))
        self._update(collection, qe.UpdateOperation.upsert_points(points))
        self._pending[collection] = self._pending.get(collection, 0) + len(points)
        self._unreleased += len(points)
        if self._pending[collection] >= SETTLE_POINTS:
            self._settle(collection)
        if self._unreleased >= RELEASE_POINTS:
            self.release_pages()

    def _update(self, collection: str, operation: qe.UpdateOperation) -> None:
        """Every write goes through here, so that `close` knows whether this store has anything to flush."""
        self._wrote = True
        self.writes += 1
        self._shard(collection).update(operation)
        self._written.add(collection)

    def _params(self, collection: str, using: str) -> qe.SearchParams | None:
        """For a dense vector stored with an int8 copy, `_RESCORED` (a plain vector) or `_SCANNED` (the `note`
        multivector); None (Qdrant's defaults) for one without.

        Why not `SEARCH_EF` alone for the latter: a store made before the int8 copies walks float32 vectors,
        and the wider walk made its chunk list ~3× slower at 30,000 notes; it keeps its old walk until
        `mindnet import --full` rebuilds it with the copies (docs/decisions/large-vaults.md)."""
        if collection not in self._search_params:
            config = self._config(collection)
            self._search_params[collection] = {
                n: _SCANNED if v.get("multivector_config") else _RESCORED
                for n, v in (config.get("vectors") or {}).items() if v.get("quantization_config")}
        return self._search_params[collection].get(using)

    def _has_marker(self, collection: str) -> bool:
        if collection not in self._markers:
            self._markers[collection] = PRESENT in self._sparse_names(collection)
        return self._markers[collection]

    def _settle(self, collection: str) -> None:
        """Optimise a collection's shard and reopen it: what was written becomes bounded immutable segments,
        and the pages and allocations the writing and optimising touched are let go."""
        shard = self._shards.pop(collection, None)
        self._pending[collection] = 0
        if shard is None:
            return
        self._wrote = True
        # What was read and written since the last release stays mapped through the optimisation otherwise: at the
        # end of a 30,000-note import, the edges the note points read (~280 MB) beside the segment being built.
        self.release_pages()
        shard.optimize()
        self._close_shard(collection, shard)
        release_freed_memory()
        for attempt in range(50):  # a reader (a cold `mindnet search`) may hold the shard for a moment
            try:
                self._shard(collection)
                self.release_pages()  # what the optimiser and the reopening read is not needed again
                return
            except StoreError:
                if attempt == 49:
                    raise
                time.sleep(0.2)

    def _delete_filter(self, collection: str, flt: Filter) -> None:
        self._update(collection, qe.UpdateOperation.delete_points_by_filter(_edge_filter(flt)))

    def _delete_ids(self, collection: str, pids: list[str]) -> None:
        self._update(collection, qe.UpdateOperation.delete_points(list(pids)))

    def _retrieve(self, collection: str, pids: list[str], with_vectors: bool) -> list[StoredPoint]:
        records = self._shard(collection).retrieve(list(pids), with_payload=True, with_vector=with_vectors)
        return [_stored(collection, r.payload, _own(r.vector) if with_vectors else None) for r in records]

    def _scroll(self, collection: str, flt: Filter | None, offset: Any, limit: int,
                with_vectors: bool, fields: list[str] | None = None) -> tuple[list[StoredPoint], Any]:
        payload: Any = True if fields is None else qe.PayloadSelector.Include(fields)
        records, nxt = self._shard(collection).scroll(qe.ScrollRequest(
            offset=offset, limit=limit, filter=_edge_filter(flt), with_payload=payload, with_vector=with_vectors))
        return [_stored(collection, r.payload, _own(r.vector) if with_vectors else None) for r in records], nxt

    def _count(self, collection: str, flt: Filter | None) -> int:
        # Without a filter, Edge's estimate is each segment's number of live points: the exact figure, in
        # 0.2 ms. Its exact count reads every id instead: 100 ms and ~30 MB of a resident's memory for the
        # 735k edges of 30,000 notes, at the end of every import (issue 27).
        return self._shard(collection).count(qe.CountRequest(exact=flt is not None, filter=_edge_filter(flt)))

    def _facet(self, collection: str, key: str, limit: int) -> dict[str, int]:
        hits = self._shard(collection).facet(qe.FacetRequest(key, limit=limit, exact=True)).hits
        return {str(h.value): h.count for h in hits}

    def _search(self, collection: str, query: tuple[str, str, Any], limit: int, flt: Filter | None,
                score_threshold: float | None, fields: list[str] | None = None) -> list[ScoredPoint]:
        _, using, vec = query
        if isinstance(vec, SparseVec):
            vec = qe.SparseVector(list(vec.indices), list(vec.values))
        payload: Any = True if fields is None else qe.PayloadSelector.Include(fields)
        shard = self._shard(collection)  # first: a missing store is its StoreError, not a missing config
        params = None if isinstance(vec, qe.SparseVector) else self._params(collection, using)
        hits = shard.query(qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vec, using=using), filter=_edge_filter(flt),
            score_threshold=score_threshold, with_payload=payload, params=params))
        return [_scored(collection, h.score, h.payload) for h in hits]

    def _hybrid(self, collection: str, using: str, vector: list[float], sparse: SparseVec, limit: int,
                flt: Filter | None, candidates: int, rrf_k: int,
                weights: tuple[float, float] | None) -> list[ScoredPoint]:
        ef = _edge_filter(flt)
        sv = qe.SparseVector(list(sparse.indices), list(sparse.values))
        shard = self._shard(collection)
        hits = shard.query(qe.QueryRequest(
            limit=limit,
            prefetches=[
                qe.Prefetch(limit=candidates, query=qe.Query.Nearest(vector, using=using), filter=ef,
                            params=self._params(collection, using)),
                qe.Prefetch(limit=candidates, query=qe.Query.Nearest(sv, using=SPARSE_VECTOR), filter=ef),
            ],
            query=qe.Fusion.Rrf(k=rrf_k, weights=list(weights) if weights else None),
            filter=ef, with_payload=True))
        return [_scored(collection, h.score, h.payload) for h in hits]

    def optimize(self) -> None:
        self._wrote = self._wrote or bool(self._shards)
        for collection, shard in list(self._shards.items()):
            if self._pending.get(collection, 0) >= REOPEN_AFTER:
                self._settle(collection)
            else:
                shard.optimize()

    def flush(self) -> None:
        for shard in self._shards.values():
            shard.flush()

    def release_pages(self) -> int:
        self._unreleased = 0
        return release_mapped_pages(self.path)

    def close(self) -> None:
        shards, self._shards = self._shards, {}
        if self.leave_to_exit and not self._wrote:
            _LEFT_FOR_EXIT.update((str(self._dir(c)), shard) for c, shard in shards.items())
            return
        for collection, shard in shards.items():
            self._close_shard(collection, shard)
        if shards:
            release_freed_memory()

    def _close_shard(self, collection: str, shard: qe.EdgeShard) -> None:
        """Close a shard, ending it with `LAST_OPERATION` when it was written to since it loaded."""
        try:
            if collection in self._written:
                self._written.discard(collection)
                shard.update(LAST_OPERATION)
        finally:
            shard.close()


MADV_DONTNEED = 4
"""Linux's `madvise` advice that unmaps a range's pages from the process; a shared file's stay in the page cache."""


def release_mapped_pages(folder: Path) -> int:
    """Unmap from this process every page of the files under `folder` it has mapped shared; bytes let go.

    Why: Edge reads its segment files through shared maps, and every page a process has touched (64 KB
    around each fault of a cached file) counts in its resident memory until the map goes: a store opened
    and searched holds hundreds of MB of pages it will not touch again (opening reads id tracker and
    indexes once; a search reads a few vectors in each block). Unmapping them loses nothing: a shared
    map's pages, dirty ones too, live in the page cache, which keeps them as long as memory allows, and
    a later read maps them again (minor faults: the first search after a release is a few ms slower).
    Only shared maps of the store's own files are touched; a private map (copy-on-write) would lose its
    writes, so it is left alone. Call it where no other thread can unmap and reuse a range meanwhile:
    under the store's lock or on the one thread that uses the store. Returns the size of the maps advised
    (pages not resident count too); 0 where there is no /proc or no glibc.
    """
    libc = _libc()
    if libc is None:
        return 0
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    root = os.path.realpath(folder) + os.sep
    released = 0
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[1][3:4] != "s" or not fields[5].startswith(root):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if madvise(start, end - start, MADV_DONTNEED) == 0:
            released += end - start
    return released


def release_freed_memory() -> None:
    """Hand freed memory back to the system (glibc keeps freed arenas otherwise: after an optimise,
    hundreds of MB stay in a process that holds nothing; after a resident's import, what its parse and
    write batches held). A no-op where there is no glibc."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.malloc_trim(0)


M_MMAP_THRESHOLD = -3
"""glibc's `mallopt` parameter number of the size from which a block is mapped on its own."""
LARGE_BLOCK_BYTES = 1 << 20
"""What a resident maps on its own (`map_large_blocks`): blocks of 1 MiB and more."""


def map_large_blocks(size: int = LARGE_BLOCK_BYTES) -> bool:
    """From now on, serve every allocation of `size` bytes or more by its own mapping, returned to the system
    when it is freed. For a process that imports edit after edit for hours (a resident); True when glibc took it.

    Why: glibc raises that threshold by itself each time a large block is freed (up to 32 MiB), after which
    an import's batch buffers (Qdrant Edge's, numpy's, the parser's) are cut from the heap, and what is left
    between the small blocks that outlive them stays resident: at 6,000 notes the heap's free space grew by
    ~17 MB per round of 10 edits with ~88 MB in use throughout, and a resident's anonymous memory by
    ~5 MB per round, which `malloc_trim` could not hand back. With a fixed threshold of 1 MiB the heap held
    85-100 MB and the memory grew by ~0.4 MB per round (docs/decisions/large-vaults.md). A fixed threshold
    also stops glibc moving its trim threshold. A no-op where there is no glibc.
    """
    return _mallopt(M_MMAP_THRESHOLD, size)


M_ARENA_MAX = -8
"""glibc's `mallopt` parameter number of the most arenas (per-thread heaps) it makes."""
RESIDENT_ARENAS = 2
"""The arenas a resident's threads share (`limit_arenas`)."""


def limit_arenas(count: int = RESIDENT_ARENAS) -> bool:
    """Let the threads started from now on share at most `count` of glibc's arenas; True when glibc took it.
    For a resident, before it starts its threads (the writer, the watcher, the encoder's pass workers).

    Why: glibc gives a thread that meets a busy arena one of its own (up to 8 per core), and the free space left
    between the blocks of each stays resident. A resident's saves are made by several threads in turn (the
    writer parses and writes, the encoder's workers run the model), so every one of their arenas kept its own
    free pages: at 30,000 notes, one edit per save, anonymous memory grew ~22 MB over saves 1-40 with the free
    space inside the arenas 10 -> 26 MB; with two arenas ~13 MB, flat from the 10th save
    (docs/decisions/large-vaults.md). A no-op where there is no glibc."""
    return _mallopt(M_ARENA_MAX, count)


def _mallopt(param: int, value: int) -> bool:
    """glibc's `mallopt(param, value)`; True when glibc took it, False where there is no glibc (or no `mallopt`)."""
    libc = _libc()
    if libc is None:
        return False
    with contextlib.suppress(AttributeError):
        return bool(libc.mallopt(param, value))
    return False


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, loaded once for `release_freed_memory`, `release_mapped_pages` and `_mallopt`; None where there is
    none."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def _own(vector: Any) -> Any:
    """A point's vectors without the optimiser's marker: it is the adapter's, never the caller's."""
    if isinstance(vector, dict) and PRESENT in vector:
        return {k: v for k, v in vector.items() if k != PRESENT}
    return vector


def _multi(multi: bool) -> qe.MultiVectorConfig | None:
    """Edge's multivector setting: a point scores by its best vector (MaxSim)."""
    return qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim) if multi else None


def _datatype(multi: bool) -> qe.VectorStorageDatatype | None:
    """A multivector's storage type: half floats. The note list scans every window of every note (MaxSim over
    Qdrant's multivector HNSW missed a third of the exact top 20 at 30k notes); in half floats the scan reads
    half the bytes and takes ~0.6 of the time, with the same top 20 (docs/decisions/large-vaults.md). A plain
    vector keeps Qdrant's default: its HNSW reads few of them."""
    return qe.VectorStorageDatatype.Float16 if multi else None


def _quantized() -> qe.ScalarQuantizationConfig:
    """Every dense vector's quantization: an int8 copy (placed cold like the vectors), which a search reads
    first; for a plain vector the best `RESCORE_OVERSAMPLING` × limit are then rescored with the stored vectors,
    so the scores and their order are those of the stored vectors (`_RESCORED`); the note list ranks by the
    copies themselves (`_SCANNED`).

    Why for the `note` multivector: the note list scans every window of every note; at 30,000 notes (143k
    windows) it took 5.2 ms instead of 14.3 ms. Why for a plain vector (`use`, `e5`):
    its HNSW walk reads a few thousand vectors per query, at random, from pages the kernel maps 64 KB at a
    time; an int8 copy is a quarter of a float32 vector, so the walk touches a quarter of the pages and
    computes each distance faster (issue 27's search time and a resident's RSS; docs/decisions/large-vaults.md).
    Qdrant quantizes a segment when it optimises it: a small vault's appendable segment is scanned exactly as
    before."""
    return qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, always_ram=False, memory=_cold())


def _graph(multi: bool) -> qe.HnswIndexConfig | None:
    """A multivector's HNSW setting: no graph (m = 0), so the note list is always a scan of every window.

    Qdrant searched the `note` multivector by scanning in every store measured (a segment's note vectors
    stay under the full-scan threshold), so its graph was built at each optimise and not read; where a
    segment did pass the threshold, the graph lost a third of the exact top 20 (decisions/large-vaults.md).
    Without it, msdocs' optimise took 15.5 s instead of 20.6 s, with the same top 20. A `note` vector
    added to an older collection (`_add_dense`) keeps Edge's default: that call takes no index setting.
    `ef_construct` is required by the binding and unused without links (Qdrant's default)."""
    if not multi:
        return None
    return qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=FULL_SCAN_KB, memory=_cold())


def _edge_error(path: Path, exc: Exception) -> StoreError:
    if "WouldBlock" in str(exc):
        return StoreError(f"store {path} is in use by another mindnet process; wait for it to finish")
    return StoreError(f"cannot open store {path}: {exc}")


def _edge_text_index() -> qe.TextIndexParams:
    """The chunk text's full-text index (R17): Qdrant's word tokenizer (`TEXT_TOKENIZER`), lower-cased, no stemmer,
    so that a text filter means "these words occur", as written."""
    return qe.TextIndexParams(tokenizer=qe.TokenizerType.Word, lowercase=True, memory=_cold(), on_disk=True,
                              enable_hnsw=False)


def _edge_condition(cond: Condition) -> Any:
    if isinstance(cond, Filter):
        return _edge_filter(cond)
    if isinstance(cond, Equals):
        return qe.FieldCondition(key=cond.field, match=qe.MatchValue(cond.value))
    if isinstance(cond, AnyOf):
        return qe.FieldCondition(key=cond.field, match=qe.MatchAny(list(cond.values)))
    if isinstance(cond, TextMatch):
        return qe.FieldCondition(key=cond.field, match=qe.MatchText(cond.text))
    if isinstance(cond, Prefix):
        return qe.FieldCondition(key=cond.field, match=qe.MatchPrefix(cond.prefix))
    if isinstance(cond, Range):
        bounds = {"gte": cond.gte, "gt": cond.gt, "lte": cond.lte, "lt": cond.lt}
        if any(isinstance(v, str) for v in bounds.values()):
            return qe.FieldCondition(key=cond.field, range=qe.RangeDateTime(**bounds))  # type: ignore[arg-type]
        return qe.FieldCondition(key=cond.field, range=qe.RangeFloat(**bounds))  # type: ignore[arg-type]
    if isinstance(cond, HasVector):
        return qe.HasVectorCondition(cond.vector)
    raise TypeError(f"not a filter condition: {cond!r}")


def _edge_filter(flt: Filter | None) -> qe.Filter | None:
    if flt is None:
        return None
    return qe.Filter(
        must=[_edge_condition(c) for c in flt.must] or None,
        should=[_edge_condition(c) for c in flt.should] or None,
        must_not=[_edge_condition(c) for c in flt.must_not] or None,
    )
