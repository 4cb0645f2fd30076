"""The `Store` interface both adapters implement, and the helpers they share.

Both adapters share the schema check, the vector splitting and the mapping of engine results to
`StoredPoint` / `ScoredPoint` kept here, so they differ only in how they talk to their engine.
"""

from __future__ import annotations

import contextlib
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..errors import StoreError
from .lexical import SPARSE_VECTOR, SPARSE_VECTORS
from .records import (
    COLLECTIONS,
    ID_FIELDS,
    CollectionName,
    Filter,
    PointRecord,
    ScoredPoint,
    SparseVec,
    StoredPoint,
    StoreSchema,
    VectorSpec,
    point_id,
)

KEYWORD_INDEXES: Mapping[str, tuple[str, ...]] = {
    # R17 lists note_id, type, tags, lang, path for chunks; area and project are the other R22 filters.
    "chunks": ("note_id", "type", "tags", "lang", "path", "area", "project"),
    "notes": ("note_id", "type", "status", "tags", "aliases", "lang", "path", "area", "project", "sync_state",
              "content_hash"),
    "edges": ("note_id", "kind", "scope", "source_id", "target_id", "status", "link_keys"),
}
PREFIX_INDEXED = frozenset({"path"})
"""Keyword fields indexed for prefix matching (R22 "path prefix")."""
TEXT_INDEXES: Mapping[str, tuple[str, ...]] = {"chunks": ("text",)}
"""Full-text payload indexes (R17: chunk `text`)."""
TEXT_TOKENIZER = "word"
"""Qdrant's tokenizer of the full-text indexes: words of letters and digits, split at everything else.

Not `multilingual` (the tokenizer before 2026-12-06; `ensure` remakes an index made with it): that one loads
a dictionary the first time a text in Chinese (+47 MB) or Japanese (+14 MB) reaches it, kept for good, so one
such line anywhere in a vault stepped a resident's memory up at the save that brought it (issue 27: ~46 MB at one
edit of a 30,000-note vault); it indexes no number ("404", "2020") and misses words written against markup
(`<span>Listing 3-1`). On German and English words both cut alike (docs/decisions/large-vaults.md)."""

INDEX_LAYOUT = ";".join(f"{name}:{','.join(KEYWORD_INDEXES.get(name, ()))}:{','.join(TEXT_INDEXES.get(name, ()))}"
                        f":{','.join(SPARSE_VECTORS[name])}"
                        for name in ("chunks", "notes", "edges")) + ";prefix:" + ",".join(sorted(PREFIX_INDEXED)) \
    + f";text:{TEXT_TOKENIZER}"
"""Every payload index and sparse vector `ensure` makes, as the store's record keeps it (`indexes`): a new one
in a later version differs from what an older store recorded, so `ensure` makes it then."""


def text_tokenizer(info: Any) -> str:
    """The tokenizer of a full-text index as an engine's payload schema describes it (`word`, `multilingual`):
    Edge's and qdrant-client's `params.tokenizer` are enums of different types, both named by their last part."""
    params = getattr(info, "params", None)
    return str(getattr(params, "tokenizer", "")).rpartition(".")[2].lower()


SEARCH_EF = 768
"""Candidates a dense HNSW walk keeps (Qdrant's `hnsw_ef`; its default is the build's 128), in both adapters.

Why wider than the default: USE's vectors crowd into a narrow cone, where a walk with few candidates stops early,
and with 128 the chunk list of an indexed store (msdocs' 19k chunks) missed about an eighth of the exact top 10.
768 is the smallest value of the measured grid whose recall@10 against the exact scan reached 0.98 on the dev
sets' questions; on msdocs' own questions and at 30,000 notes the list is then the exact one in nearly every
query, for a few ms more at 30k (figures: docs/decisions/large-vaults.md). A segment under the full-scan
threshold and the note list (no graph) are scanned whole: it changes nothing there."""

_BATCH = 256
"""Points per write call: large enough to amortise a round trip, small enough for one HTTP body."""


class Store(ABC):
    """Collections `{prefix}_notes`, `{prefix}_chunks`, `{prefix}_edges` with their indexes (R17, R20).

    Public methods validate and map ids once here; adapters implement the `_` primitives on
    full collection names and Qdrant point ids. Writers call `ensure()` first; readers of an
    existing store may skip it (the recorded schema is loaded on first use).
    """

    leave_to_exit = False
    """Given by an owner whose process ends with `os._exit` right after it closes the store (the console
    script's one-off commands: `mindnet search`, `context`, `graph`, `status`, `import`): closing a store that wrote
    nothing then leaves its files to the exit. Qdrant Edge's close msyncs every map a shard opened (25-33 ms
    of a cold search on a 180-note vault) and drops the shard's pages from the page cache, which the next
    search then reads from disk again; the exit drops the maps and the lock as a kill does, which a store
    survives by design (its WAL; the kill -9 tests). Only the embedded adapter has anything to leave."""

    writes: int | None = None
    """Writing calls that reached the store's contents through this object (points, vectors, indexes,
    collections made or dropped); None where the adapter does not count them. An owner compares it before
    and after an operation to know that the operation wrote nothing (`api.Index._writing`)."""

    reserves = False
    """Whether a new chunks collection is made with the schema's reserved vectors (`StoreSchema.reserved`):
    only where a vector added later is placed worse than one made with the collection (Qdrant Edge)."""

    def __init__(self, prefix: str, hnsw_m: int, hnsw_ef_construct: int) -> None:
        self.prefix = prefix
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construct = hnsw_ef_construct
        self._meta: dict[str, Any] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def ensure(self, schema: StoreSchema) -> None:
        """Create missing collections, vectors and indexes, and check the recorded schema.

        Idempotent. A vector name new to the store is added; an existing name with another model
        id or dimension, another chunking hash or schema version raises.

        Raises:
            StoreError: what differs and how to fix it (`--full` re-import or another `--store`).
        """
        stored = self._read_meta()
        fresh = stored is None
        if stored is None:
            populated = [c for c in COLLECTIONS if self._exists(c) and self._count(c, None) > 0]
            if populated:
                raise StoreError(
                    f"store {self.describe()} holds data in {', '.join(populated)} but no record of the "
                    "model that made it; re-import with `mindnet import --full` or use another --store"
                )
            stored = {"schema_version": schema.schema_version, "chunking_hash": schema.chunking_hash,
                      "vectors": {}}
        _check_schema(stored, schema, self.describe())
        vectors = dict(stored["vectors"])
        for spec in schema.vectors:
            vectors[spec.name] = {"model_id": spec.model_id, "dim": spec.dim, **({"multi": True} if spec.multi else {})}
        meta = {"schema_version": schema.schema_version, "chunking_hash": schema.chunking_hash,
                "vectors": vectors}
        # What the store's collections already hold: every vector and index of this layout, as the
        # record says once they were all made. Then only a missing collection needs work, and an
        # import that changes nothing opens no collection to look (issue 26).
        done = not fresh and vectors == stored["vectors"] and stored.get("indexes") == INDEX_LAYOUT
        if "indexes" in stored:
            meta["indexes"] = stored["indexes"]
        # Meta first: a crash before the collections exist leaves a record that matches what the
        # next run creates, never data without a record.
        if fresh or meta != stored:
            self._write_meta(meta)
        self._meta = meta
        for name in COLLECTIONS:
            dense = {n: (v["dim"], bool(v.get("multi"))) for n, v in vectors.items()} if name == "chunks" else {}
            sparse = SPARSE_VECTORS[name]
            if not self._exists(name):
                reserved = {n: (d, False) for n, d in schema.reserved} if name == "chunks" and self.reserves else {}
                self._create(name, {**reserved, **dense}, sparse)
            elif done:
                if name == "notes":
                    self._dense_names(name)  # opens it: a store another process holds fails here, as before
                continue
            else:
                have = self._dense_names(name)
                for vec_name, (dim, multi) in dense.items():
                    if have.get(vec_name, dim) != dim and vec_name not in stored["vectors"]:
                        self._drop_dense(name, vec_name)  # reserved at another size, never written: made anew
                        del have[vec_name]
                    if vec_name not in have:
                        self._add_dense(name, vec_name, dim, multi)
                have_sparse = self._sparse_names(name)
                for vec_name in sparse:
                    if vec_name not in have_sparse:
                        self._add_sparse(name, vec_name)
            self._index(name, KEYWORD_INDEXES.get(name, ()), TEXT_INDEXES.get(name, ()))
        if meta.get("indexes") != INDEX_LAYOUT:  # last: recorded only once every collection has them
            meta = {**meta, "indexes": INDEX_LAYOUT}
            self._write_meta(meta)
            self._meta = meta

    def check(self, schema: StoreSchema) -> bool:
        """What `ensure` checks, writing nothing (`import --dry-run`): False for a store never written.

        Raises:
            StoreError: the recorded schema differs (another model, chunking or schema version).
        """
        stored = self._read_meta()
        if stored is None:
            return False
        _check_schema(stored, schema, self.describe())
        return True

    def reset(self, schema: StoreSchema) -> None:
        """Drop every collection and the meta record, then `ensure(schema)`: the `--full` path."""
        for name in COLLECTIONS:
            if self._exists(name):
                self._drop(name)
        self._drop_meta()
        self._meta = None
        self.ensure(schema)

    def meta(self) -> StoreSchema | None:
        """The schema recorded in the store, or None for a new store."""
        raw = self._meta or self._read_meta()
        if raw is None:
            return None
        return StoreSchema(
            vectors=tuple(VectorSpec(n, v["model_id"], v["dim"], bool(v.get("multi")))
                          for n, v in sorted(raw["vectors"].items())),
            chunking_hash=raw["chunking_hash"],
            schema_version=raw["schema_version"],
        )

    def lease(self) -> AbstractContextManager[Any]:
        """The store's own import lease, for stores shared between machines; the embedded store's
        folder lock (`sync.ImportLock`) already excludes every other writer, so nothing here."""
        return contextlib.nullcontext()

    @abstractmethod
    def optimize(self) -> None:
        """Build HNSW and merge segments; call after bulk writes (Edge indexes nothing before)."""

    def flush(self) -> None:  # noqa: B027 - optional: a server store writes through, nothing to do
        """Write what is buffered to disk now, so that `close` has less left to do (Edge; a server: nothing)."""

    used: float = 0.0
    """`time.monotonic()` of the store's latest call (Edge; 0.0: none yet, or a store that does not say)."""

    def release_pages(self) -> int:
        """Let go of the store's file pages this process maps (Edge: `embedded.release_mapped_pages`), in
        bytes; a server store maps nothing: 0."""
        return 0

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store (Edge: its WAL locks); the object is unusable afterwards."""

    @abstractmethod
    def describe(self) -> str:
        """Where the store lives, for messages (folder or URL, never the API key)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ----------------------------------------------------------------------------------

    def upsert(self, collection: CollectionName, points: Iterable[PointRecord]) -> int:
        """Insert or replace points (whole points: vectors not given are gone afterwards).

        Returns:
            The number of points written.

        Raises:
            StoreError: an unknown vector name or a vector of the wrong dimension.
        """
        self._check_collection(collection)
        dims = self._dims(collection)
        written = 0
        batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]] = []
        id_field = ID_FIELDS[collection]
        multi = self._multi(collection)
        for rec in points:
            for name, vec in rec.vectors.items():
                if name not in dims:
                    raise StoreError(f"{collection}: no dense vector named {name!r} in {self.describe()}; "
                                     f"known: {sorted(dims)}")
                for row in (vec if name in multi else [vec]):
                    if len(row) != dims[name]:
                        raise StoreError(f"{collection}/{rec.id}: vector {name!r} has {len(row)} dimensions, "
                                         f"the store expects {dims[name]}")
            payload = dict(rec.payload)
            if payload.setdefault(id_field, rec.id) != rec.id:
                raise StoreError(f"{collection}: payload {id_field}={payload[id_field]!r} differs from id {rec.id!r}")
            dense = {n: v.tolist() if hasattr(v, "tolist") else list(v) for n, v in rec.vectors.items()}
            batch.append((point_id(rec.id), payload, dense, dict(rec.sparse)))
            if len(batch) >= _BATCH:
                self._upsert(collection, batch)
                written += len(batch)
                batch = []
        if batch:
            self._upsert(collection, batch)
            written += len(batch)
        return written

    def delete(self, collection: CollectionName, flt: Filter) -> None:
        """Delete every point matching `flt` (a whole note's chunks, its edges…)."""
        self._check_collection(collection)
        if not (flt.must or flt.should or flt.must_not):
            raise StoreError("refusing to delete with an empty filter; use reset() to empty the store")
        self._delete_filter(collection, flt)

    def delete_ids(self, collection: CollectionName, ids: Sequence[str]) -> None:
        """Delete points by string id; unknown ids are ignored."""
        self._check_collection(collection)
        for start in range(0, len(ids), _BATCH):
            self._delete_ids(collection, [point_id(i) for i in ids[start:start + _BATCH]])

    # -- reads -----------------------------------------------------------------------------------

    def retrieve(self, collection: CollectionName, ids: Sequence[str], *,
                 with_vectors: bool = False) -> list[StoredPoint]:
        """Points by string id, in the order asked, missing ids skipped."""
        self._check_collection(collection)
        found: dict[str, StoredPoint] = {}
        for start in range(0, len(ids), _BATCH):
            for p in self._retrieve(collection, [point_id(i) for i in ids[start:start + _BATCH]], with_vectors):
                found[p.id] = p
        return [found[i] for i in ids if i in found]

    def scroll(self, collection: CollectionName, flt: Filter | None = None, *,
               with_vectors: bool = False, page_size: int = _BATCH,
               fields: Sequence[str] | None = None) -> Iterator[StoredPoint]:
        """Every point matching `flt`, paged lazily (order: by point id).

        `fields` limits the payload read back (the id field is always included): a no-op import
        needs each note's hashes, not its `fulltext`.
        """
        self._check_collection(collection)
        keys = self._keys(collection, fields)
        offset: Any = None
        while True:
            page, offset = self._scroll(collection, flt, offset, page_size, with_vectors, keys)
            yield from page
            if offset is None:
                return

    def facet(self, collection: CollectionName, key: str) -> dict[str, int]:
        """Every value of the keyword-indexed `key` with its number of points.

        Answered from the payload index alone, without reading payloads: an import learns which
        notes are unchanged (`sync_state`) in a tenth of the time a scroll of every note takes.

        Values no point holds any more are dropped. Qdrant Edge, replaying its WAL after a killed
        process, keeps the overwritten value of an updated point in the index with a count of 0;
        taken as a stored `sync_state`, it made a note whose file went back to that content look
        unchanged, and the killed run's newer chunks and note point stayed (R21).
        """
        self._check_collection(collection)
        if key not in KEYWORD_INDEXES.get(collection, ()):
            raise ValueError(f"{collection}.{key} has no keyword index to facet on")
        counts = self._facet(collection, key, self._count(collection, None) + 1)
        return {value: n for value, n in counts.items() if n > 0}

    def count(self, collection: CollectionName, flt: Filter | None = None) -> int:
        """Exact number of points matching `flt`."""
        self._check_collection(collection)
        return self._count(collection, flt)

    def count_up_to(self, collection: CollectionName, flt: Filter, cap: int) -> int:
        """The number of points matching `flt`, or `cap` when at least that many do: `min(count, cap)`.

        Whether a word is rare needs no exact count, which reads every matching id: for a word in 58,000 of
        the 196,000 chunks of 30,000 notes 6 ms warm and 330 ms cold, where the first `cap` ids take 0.4 ms
        (issue 27's search latency)."""
        return sum(1 for _ in itertools.islice(self.scroll(collection, flt, page_size=max(1, cap), fields=()), cap))

    def search_dense(self, collection: CollectionName, using: str, vector: Sequence[float], *,
                     limit: int = 10, flt: Filter | None = None, score_threshold: float | None = None,
                     fields: Sequence[str] | None = None) -> list[ScoredPoint]:
        """Nearest points by cosine on the named dense vector; points without it are never returned.
        On a multivector a point scores by its closest vector (MaxSim with the one query vector).

        `fields` limits the payload read back, as in `scroll`: a search's candidate lists need a few
        small fields, and reading every candidate's whole payload (its text above all) was a quarter of
        a hybrid query at 100k chunks (issue 25). The hits and their order do not depend on it.
        """
        self._check_collection(collection)
        self._check_dense(collection, using, vector)
        query: Any = _as_list(vector)
        if using in self._multi(collection):
            query = [query]
        return _ties_by_id(self._search(collection, ("dense", using, query), limit + TIE_SPARE, flt, score_threshold,
                                        self._keys(collection, fields)))[:limit]

    def search_sparse(self, collection: CollectionName, vector: SparseVec, *, limit: int = 10,
                      flt: Filter | None = None, using: str = SPARSE_VECTOR,
                      fields: Sequence[str] | None = None) -> list[ScoredPoint]:
        """Best points by sparse dot product with IDF (BM25 with `lexical_query` vectors); `fields` as in
        `search_dense`."""
        self._check_collection(collection)
        if not vector.indices:
            return []
        return _ties_by_id(_settled(self._search(collection, ("sparse", using, vector), limit + TIE_SPARE, flt, None,
                                                 self._keys(collection, fields))))[:limit]

    @staticmethod
    def _keys(collection: CollectionName, fields: Sequence[str] | None) -> list[str] | None:
        """The payload keys to read for `fields` (the id field always among them), None for all."""
        return None if fields is None else list(dict.fromkeys([ID_FIELDS[collection], *fields]))

    def search_hybrid(self, collection: CollectionName, using: str, vector: Sequence[float],
                      sparse: SparseVec, *, limit: int = 10, flt: Filter | None = None,
                      candidates: int | None = None, rrf_k: int = 60,
                      weights: tuple[float, float] | None = None) -> list[ScoredPoint]:
        """Dense and sparse candidates fused with Reciprocal Rank Fusion inside the engine (R22).

        Args:
            candidates: Candidates per branch before fusion; default `max(4 * limit, 50)`.
            rrf_k: RRF constant; 60 is the literature's default.
            weights: Optional (dense, sparse) weights of the two rankings.
        """
        self._check_collection(collection)
        self._check_dense(collection, using, vector)
        if not sparse.indices:
            return self.search_dense(collection, using, vector, limit=limit, flt=flt)
        n = candidates or max(4 * limit, 50)
        return _ties_by_id(self._hybrid(collection, using, _as_list(vector), sparse, limit, flt, n, rrf_k, weights))

    # -- helpers ---------------------------------------------------------------------------------

    def _check_collection(self, collection: str) -> None:
        if collection not in ID_FIELDS:
            raise StoreError(f"unknown collection {collection!r}; one of {', '.join(COLLECTIONS)}")
        if self._meta is None:
            # Readers (search, status) have no schema to ensure: an existing store's record suffices.
            self._meta = self._read_meta()
            if self._meta is None:
                raise StoreError(f"store {self.describe()} is empty; run `mindnet import` first")

    def _dims(self, collection: str) -> dict[str, int]:
        assert self._meta is not None
        if collection != "chunks":
            return {}
        return {n: v["dim"] for n, v in self._meta["vectors"].items()}

    def _multi(self, collection: str) -> set[str]:
        """The collection's multivector names."""
        assert self._meta is not None
        if collection != "chunks":
            return set()
        return {n for n, v in self._meta["vectors"].items() if v.get("multi")}

    def _check_dense(self, collection: str, using: str, vector: Sequence[float]) -> None:
        dims = self._dims(collection)
        if using not in dims:
            raise StoreError(f"{collection}: no dense vector named {using!r}; known: {sorted(dims)}")
        if len(vector) != dims[using]:
            raise StoreError(f"query vector for {using!r} has {len(vector)} dimensions, the store expects "
                             f"{dims[using]}")

    def _name(self, collection: str) -> str:
        return f"{self.prefix}_{collection}"

    # -- adapter primitives ----------------------------------------------------------------------

    @abstractmethod
    def _read_meta(self) -> dict[str, Any] | None: ...
    @abstractmethod
    def _write_meta(self, meta: dict[str, Any]) -> None: ...
    @abstractmethod
    def _drop_meta(self) -> None: ...
    @abstractmethod
    def _exists(self, collection: str) -> bool: ...
    @abstractmethod
    def _create(self, collection: str, dense: Mapping[str, tuple[int, bool]], sparse: Sequence[str]) -> None: ...
    @abstractmethod
    def _drop(self, collection: str) -> None: ...
    @abstractmethod
    def _dense_names(self, collection: str) -> dict[str, int]:
        """The collection's dense vectors and their dimensions."""

    def _drop_dense(self, collection: str, name: str) -> None:
        """Remove a dense vector no run recorded (a reservation, `reserves`); only an adapter that reserves
        is ever asked to."""
        raise StoreError(f"{self.describe()}: cannot remove the vector {name!r} of {collection}")

    @abstractmethod
    def _add_dense(self, collection: str, name: str, dim: int, multi: bool) -> None: ...

    @abstractmethod
    def _sparse_names(self, collection: str) -> set[str]: ...

    @abstractmethod
    def _add_sparse(self, collection: str, name: str) -> None: ...
    @abstractmethod
    def _index(self, collection: str, keywords: Sequence[str], texts: Sequence[str]) -> None: ...
    @abstractmethod
    def _upsert(self, collection: str,
                batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]]) -> None: ...
    @abstractmethod
    def _delete_filter(self, collection: str, flt: Filter) -> None: ...
    @abstractmethod
    def _delete_ids(self, collection: str, pids: list[str]) -> None: ...
    @abstractmethod
    def _retrieve(self, collection: str, pids: list[str], with_vectors: bool) -> list[StoredPoint]: ...
    @abstractmethod
    def _scroll(self, collection: str, flt: Filter | None, offset: Any, limit: int,
                with_vectors: bool, fields: list[str] | None = None) -> tuple[list[StoredPoint], Any]: ...
    @abstractmethod
    def _count(self, collection: str, flt: Filter | None) -> int: ...
    @abstractmethod
    def _facet(self, collection: str, key: str, limit: int) -> dict[str, int]: ...
    @abstractmethod
    def _search(self, collection: str, query: tuple[str, str, Any], limit: int, flt: Filter | None,
                score_threshold: float | None, fields: list[str] | None = None) -> list[ScoredPoint]: ...
    @abstractmethod
    def _hybrid(self, collection: str, using: str, vector: list[float], sparse: SparseVec, limit: int,
                flt: Filter | None, candidates: int, rrf_k: int,
                weights: tuple[float, float] | None) -> list[ScoredPoint]: ...


def _as_list(vector: Sequence[float]) -> list[float]:
    return vector.tolist() if hasattr(vector, "tolist") else list(vector)  # type: ignore[union-attr]


def _check_schema(stored: Mapping[str, Any], schema: StoreSchema, where: str) -> None:
    """Raise one StoreError listing every difference between the recorded and the wanted schema."""
    diffs: list[str] = []
    if stored["schema_version"] != schema.schema_version:
        diffs.append(f"schema version {stored['schema_version']} (store) vs {schema.schema_version} (this mindnet)")
    if stored["chunking_hash"] != schema.chunking_hash:
        diffs.append(f"chunking config {stored['chunking_hash'] or '-'} (store) vs {schema.chunking_hash or '-'} "
                     "(this run)")
    for spec in schema.vectors:
        old = stored["vectors"].get(spec.name)
        if old is None:
            continue
        if old["model_id"] != spec.model_id:
            diffs.append(f"vector {spec.name!r}: model {old['model_id']} (store) vs {spec.model_id} (this run)")
        if old["dim"] != spec.dim:
            diffs.append(f"vector {spec.name!r}: dimension {old['dim']} (store) vs {spec.dim} (this run)")
        if bool(old.get("multi")) != spec.multi:
            diffs.append(f"vector {spec.name!r}: {'multi' if old.get('multi') else 'single'} (store) vs "
                         f"{'multi' if spec.multi else 'single'} (this run)")
    if diffs:
        raise StoreError(
            f"store {where} was built differently: {'; '.join(diffs)}. Re-import with "
            "`mindnet import --full` to rebuild it, or point --store (or the collection prefix) elsewhere"
        )


def _sparse_of(vec: Any) -> SparseVec:
    return SparseVec(tuple(vec.indices), tuple(float(v) for v in vec.values))


def _split_vectors(raw: Any) -> tuple[dict[str, list[float]], dict[str, SparseVec]]:
    """Dense and sparse parts of a returned named-vector mapping (either adapter's types)."""
    dense: dict[str, list[float]] = {}
    sparse: dict[str, SparseVec] = {}
    for name, vec in (raw or {}).items():
        if hasattr(vec, "indices"):
            sparse[name] = _sparse_of(vec)
        else:
            dense[name] = list(vec)
    return dense, sparse


def _stored(collection: str, payload: Any, vectors: Any) -> StoredPoint:
    payload = dict(payload or {})
    dense, sparse = _split_vectors(vectors)
    return StoredPoint(str(payload.get(ID_FIELDS[collection], "")), payload, dense, sparse)


TIE_SPARE = 8
"""Hits asked beyond a search's limit, so that points tied at its last place are cut in id order, not in the
engine's (a hash map's, new in every process): BM25 ties are common among short chunks. More than this many
ties at the cut still come back in the engine's order."""
SPARSE_DIGITS = 5
"""Significant digits a BM25 score keeps (`_settled`)."""


def _settled(hits: list[ScoredPoint]) -> list[ScoredPoint]:
    """BM25 scores rounded to `SPARSE_DIGITS` significant digits, so that equal sums compare equal.

    Edge inserts the points of each upsert in its own order (a hash map's, new in every process), and its
    sparse scores are float32 sums whose last bit depends on that order: two imports of one vault gave
    9.314895629882812 and 9.314896583557129 for one chunk, and near-ties swapped places in the lexical list
    and in the fused ranking (`bench/golden_hits.py`, two records of one commit: 28 of 666 searches differed in
    a score, 2 in their hits). Rounded, such scores are equal and `_ties_by_id` orders them; a score still
    moves when the noise carries it across a rounding step (~1e-6 of a 1e-4 step)."""
    return [ScoredPoint(h.id, float(f"{h.score:.{SPARSE_DIGITS}g}"), h.payload) for h in hits]


def _ties_by_id(hits: list[ScoredPoint]) -> list[ScoredPoint]:
    """Equal scores in id order: the engine orders ties by its internal ids, which depend on how its
    segments were written and merged, so the same store content could rank two tied chunks either way."""
    return sorted(hits, key=lambda h: (-h.score, h.id))


def _scored(collection: str, score: float, payload: Any) -> ScoredPoint:
    payload = dict(payload or {})
    return ScoredPoint(str(payload.get(ID_FIELDS[collection], "")), float(score), payload)
