"""The storage stage: one `Store` interface over Qdrant, the only module that imports Qdrant (R17, R20).

Two adapters implement it:

* `EdgeStore` (default, R20 "embedded"): Qdrant Edge (`qdrant-edge-py`), the real Qdrant engine
  in-process. One Edge shard per collection under the store folder (`<store>/<prefix>_chunks/`, …)
  and `<store>/<prefix>.meta.json`. Edge builds HNSW only in `optimize()`, so call it after bulk
  writes. Its WAL stays on: it is what makes a Ctrl-C mid-import recoverable (R21) and what
  locks a shard against a second writer.
* `ClientStore` (R20 "server or cluster"): `qdrant-client` against a URL + API key, with
  `shard_number` and `replication_factor` passed through. `":memory:"` runs the client's
  in-process engine with the same API; tests use it. Meta lives in a `<prefix>_meta` collection.

Callers speak mindnet types only: string ids (mapped to UUIDv5 point ids, the string kept in the
payload), the neutral `Filter`, `SparseVec`, `PointRecord`, `StoredPoint`, `ScoredPoint`.

The store records which model produced each named dense vector (`use` now, `e5` later), its
dimension and the chunking config hash; `ensure()` refuses a different model or dimension with a
`StoreError` instead of mixing vector spaces silently. A new vector name is added in place.

Lexical vectors (R22) come from Edge's built-in BM25 (`qdrant_edge.Bm25`): it tokenises, drops the
language's stopwords, applies its Snowball stemmer and hashes every term to a sparse index, all
locally (no download, no server). Documents get BM25 term-frequency weights; the collection's
sparse config carries the IDF modifier, so the engine applies IDF at query time over the live
corpus. `lexical_document` / `lexical_query` expose it without leaking Qdrant types.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import shutil
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import qdrant_edge as qe

from .errors import StoreError


class _LazyModule:
    """A module imported on first attribute access.

    qdrant-client takes 0.4-1.5 s to import and only the server adapter needs it; the embedded
    store, i.e. every default CLI call, should not pay for it.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


if TYPE_CHECKING:
    from qdrant_client import models as qm
else:
    qm = _LazyModule("qdrant_client.models")


SCHEMA_VERSION = 1
"""Bumped when the payload or vector layout changes in a way old stores cannot serve."""

ID_NAMESPACE = uuid.UUID("8c4ce21a-fb58-5114-8dc6-9ba5bbbcd937")
"""UUIDv5 namespace of every point id (R12, R16); = uuid5(NAMESPACE_URL, "https://mindnet.invalid/point-id").
NOTE: changing it orphans every stored point."""

CollectionName: TypeAlias = Literal["notes", "chunks", "edges"]
COLLECTIONS: tuple[CollectionName, ...] = ("notes", "chunks", "edges")

ID_FIELDS: Mapping[str, str] = {"notes": "note_id", "chunks": "chunk_id", "edges": "edge_id"}
"""Payload field that keeps each collection's string id next to its UUID point id (R12)."""

SPARSE_VECTOR = "bm25"
"""Name of the lexical sparse vector. Every collection has it, because Edge needs at least one
vector per shard and notes/edges carry no dense vector."""

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

_BATCH = 256
"""Points per write call: large enough to amortise a round trip, small enough for one HTTP body."""
_META_KEY = "meta"


def point_id(string_id: str) -> str:
    """The Qdrant point id of a mindnet string id: UUIDv5 in `ID_NAMESPACE` (R12, R16)."""
    return str(uuid.uuid5(ID_NAMESPACE, string_id))


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SparseVec:
    """A sparse vector, e.g. a BM25 term vector: parallel index and weight tuples."""

    indices: tuple[int, ...]
    """Hashed term ids, unique within the vector."""
    values: tuple[float, ...]
    """Weight of each index."""


@dataclass(frozen=True, slots=True)
class VectorSpec:
    """One named dense vector of the chunks collection and the model that fills it."""

    name: str
    """Vector name in the collection (`use`, `e5`)."""
    model_id: str
    """Model and version (`use-multilingual-v3@0.2.1`): a different id means another vector space."""
    dim: int
    """Dimension; cosine distance always."""


@dataclass(frozen=True, slots=True)
class StoreSchema:
    """What a run expects of the store; recorded on first use and checked by `Store.ensure`."""

    vectors: tuple[VectorSpec, ...]
    """Named dense vectors the run writes to chunks."""
    chunking_hash: str = ""
    """Hash of the chunking settings: chunks made under other settings must not be mixed in."""
    schema_version: int = SCHEMA_VERSION
    """Layout version of payloads and vectors."""


@dataclass(frozen=True, slots=True)
class PointRecord:
    """A point to write. Missing named vectors are simply absent (searches on them skip the point)."""

    id: str
    """mindnet string id (`note_id`, `chunk_id`, edge id); stored under `ID_FIELDS[collection]`."""
    payload: Mapping[str, Any]
    """JSON-compatible payload."""
    vectors: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """Named dense vectors (lists or numpy arrays)."""
    sparse: Mapping[str, SparseVec] = field(default_factory=dict)
    """Named sparse vectors, normally only `bm25`."""


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """A point read back by `retrieve` or `scroll`."""

    id: str
    """mindnet string id."""
    payload: dict[str, Any]
    """Full payload."""
    vectors: dict[str, list[float]] = field(default_factory=dict)
    """Dense vectors, only when asked for."""
    sparse: dict[str, SparseVec] = field(default_factory=dict)
    """Sparse vectors, only when asked for."""


@dataclass(frozen=True, slots=True)
class ScoredPoint:
    """A search result."""

    id: str
    """mindnet string id."""
    score: float
    """Cosine similarity, BM25 score or RRF score, by search kind; higher is better."""
    payload: dict[str, Any]
    """Full payload."""


# ---------------------------------------------------------------------------------------------
# Neutral filter
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Equals:
    """`field` equals `value`; on a list field, any element equals it."""

    field: str
    value: str | int | bool


@dataclass(frozen=True, slots=True)
class AnyOf:
    """`field` (or any element of it) is one of `values`."""

    field: str
    values: tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TextMatch:
    """Full-text match on an indexed text field: every word of `text` occurs."""

    field: str
    text: str


@dataclass(frozen=True, slots=True)
class Prefix:
    """Keyword `field` starts with `prefix` (path prefix filters, R22)."""

    field: str
    prefix: str


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric range, or datetime range when the bounds are ISO 8601 strings."""

    field: str
    gte: float | str | None = None
    gt: float | str | None = None
    lte: float | str | None = None
    lt: float | str | None = None


Condition: TypeAlias = "Equals | AnyOf | TextMatch | Prefix | Range | Filter"


@dataclass(frozen=True, slots=True)
class Filter:
    """Boolean combination of conditions, translated by each adapter; callers never see Qdrant."""

    must: tuple[Condition, ...] = ()
    """All must hold."""
    should: tuple[Condition, ...] = ()
    """At least one must hold (when any are given)."""
    must_not: tuple[Condition, ...] = ()
    """None may hold."""

    @classmethod
    def all(cls, *conditions: Condition) -> Filter:
        """Shorthand for `Filter(must=conditions)`."""
        return cls(must=tuple(conditions))


# ---------------------------------------------------------------------------------------------
# Lexical (BM25) vectors
# ---------------------------------------------------------------------------------------------


@functools.cache
def _bm25(lang: str | None) -> qe.Bm25:
    """Edge's BM25 encoder for a language (ISO 639-1 such as `de`, or a name such as `german`).

    An unknown or missing language gets a neutral encoder (no stemmer, no stopwords) instead of
    English rules that would mangle its words.
    """
    if lang:
        with contextlib.suppress(ValueError):
            return qe.Bm25(qe.Bm25Config(language=lang))
    return qe.Bm25(qe.Bm25Config(stemmer=qe.DisabledStemmer(), stopwords=qe.StopwordsSet()))


def lexical_document(text: str, lang: str | None) -> SparseVec:
    """BM25 document vector of `text` stemmed by the rules of `lang` (R22).

    Weights are BM25 term-frequency parts (k=1.2, b=0.75); IDF is applied by the engine at query
    time because the sparse vector is configured with the IDF modifier.
    """
    vec = _bm25(lang).embed_document(text)
    return SparseVec(tuple(vec.indices), tuple(vec.values))


def lexical_query(text: str, langs: Iterable[str | None] = ("de", "en")) -> SparseVec:
    """BM25 query vector: the union of the query's terms under each language's rules.

    A vault mixes German and English chunks, each stemmed by its own language, and a query's
    language is a guess; the union matches either form. Every term weighs 1.0 as in BM25.
    """
    indices: set[int] = set()
    for lang in dict.fromkeys(langs):
        indices.update(_bm25(lang).embed_query(text).indices)
    ordered = tuple(sorted(indices))
    return SparseVec(ordered, (1.0,) * len(ordered))


# ---------------------------------------------------------------------------------------------
# The interface
# ---------------------------------------------------------------------------------------------


class Store(ABC):
    """Collections `{prefix}_notes`, `{prefix}_chunks`, `{prefix}_edges` with their indexes (R17, R20).

    Public methods validate and map ids once here; adapters implement the `_` primitives on
    full collection names and Qdrant point ids. Writers call `ensure()` first; readers of an
    existing store may skip it (the recorded schema is loaded on first use).
    """

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
            vectors[spec.name] = {"model_id": spec.model_id, "dim": spec.dim}
        meta = {"schema_version": schema.schema_version, "chunking_hash": schema.chunking_hash,
                "vectors": vectors}
        # Meta first: a crash before the collections exist leaves a record that matches what the
        # next run creates, never data without a record.
        if fresh or meta != stored:
            self._write_meta(meta)
        self._meta = meta
        for name in COLLECTIONS:
            dense = {n: v["dim"] for n, v in vectors.items()} if name == "chunks" else {}
            if not self._exists(name):
                self._create(name, dense)
            else:
                have = self._dense_names(name)
                for vec_name, dim in dense.items():
                    if vec_name not in have:
                        self._add_dense(name, vec_name, dim)
            self._index(name, KEYWORD_INDEXES.get(name, ()), TEXT_INDEXES.get(name, ()))

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
            vectors=tuple(VectorSpec(n, v["model_id"], v["dim"]) for n, v in sorted(raw["vectors"].items())),
            chunking_hash=raw["chunking_hash"],
            schema_version=raw["schema_version"],
        )

    @abstractmethod
    def optimize(self) -> None:
        """Build HNSW and merge segments; call after bulk writes (Edge indexes nothing before)."""

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
        for rec in points:
            for name, vec in rec.vectors.items():
                if name not in dims:
                    raise StoreError(f"{collection}: no dense vector named {name!r} in {self.describe()}; "
                                     f"known: {sorted(dims)}")
                if len(vec) != dims[name]:
                    raise StoreError(f"{collection}/{rec.id}: vector {name!r} has {len(vec)} dimensions, "
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
        keys = None if fields is None else list(dict.fromkeys([ID_FIELDS[collection], *fields]))
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
        """
        self._check_collection(collection)
        if key not in KEYWORD_INDEXES.get(collection, ()):
            raise ValueError(f"{collection}.{key} has no keyword index to facet on")
        return self._facet(collection, key, self._count(collection, None) + 1)

    def count(self, collection: CollectionName, flt: Filter | None = None) -> int:
        """Exact number of points matching `flt`."""
        self._check_collection(collection)
        return self._count(collection, flt)

    def search_dense(self, collection: CollectionName, using: str, vector: Sequence[float], *,
                     limit: int = 10, flt: Filter | None = None,
                     score_threshold: float | None = None) -> list[ScoredPoint]:
        """Nearest points by cosine on the named dense vector; points without it are never returned."""
        self._check_collection(collection)
        self._check_dense(collection, using, vector)
        return self._search(collection, ("dense", using, _as_list(vector)), limit, flt, score_threshold)

    def search_sparse(self, collection: CollectionName, vector: SparseVec, *, limit: int = 10,
                      flt: Filter | None = None, using: str = SPARSE_VECTOR) -> list[ScoredPoint]:
        """Best points by sparse dot product with IDF (BM25 with `lexical_query` vectors)."""
        self._check_collection(collection)
        if not vector.indices:
            return []
        return self._search(collection, ("sparse", using, vector), limit, flt, None)

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
        return self._hybrid(collection, using, _as_list(vector), sparse, limit, flt, n, rrf_k, weights)

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
    def _create(self, collection: str, dense: Mapping[str, int]) -> None: ...
    @abstractmethod
    def _drop(self, collection: str) -> None: ...
    @abstractmethod
    def _dense_names(self, collection: str) -> set[str]: ...
    @abstractmethod
    def _add_dense(self, collection: str, name: str, dim: int) -> None: ...
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
                score_threshold: float | None) -> list[ScoredPoint]: ...
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


# ---------------------------------------------------------------------------------------------
# Qdrant Edge adapter
# ---------------------------------------------------------------------------------------------


class EdgeStore(Store):
    """Embedded store: one Qdrant Edge shard per collection under `path` (R20 default).

    A shard's WAL holds an exclusive lock, so a second process opening the same store fails with a
    `StoreError` rather than corrupting it (R21).
    """

    def __init__(self, path: str | os.PathLike[str], *, prefix: str = "mindnet", hnsw_m: int = 16,
                 hnsw_ef_construct: int = 128) -> None:
        super().__init__(prefix, hnsw_m, hnsw_ef_construct)
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, qe.EdgeShard] = {}

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
        shard = self._shards.get(collection)
        if shard is None:
            try:
                shard = qe.EdgeShard.load(str(self._dir(collection)))
            except Exception as exc:  # Edge raises plain Exception; WouldBlock = WAL locked
                raise _edge_error(self._dir(collection), exc) from exc
            self._shards[collection] = shard
        return shard

    def _create(self, collection: str, dense: Mapping[str, int]) -> None:
        config = qe.EdgeConfig(
            vectors={n: qe.EdgeVectorParams(size=d, distance=qe.Distance.Cosine) for n, d in dense.items()},
            sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # full_scan_threshold (KB of vectors) is required by the binding; 10000 is Qdrant's default.
            hnsw_config=qe.HnswIndexConfig(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct,
                                           full_scan_threshold=10_000),
        )
        try:
            self._shards[collection] = qe.EdgeShard.create(str(self._dir(collection)), config)
        except Exception as exc:
            raise _edge_error(self._dir(collection), exc) from exc

    def _drop(self, collection: str) -> None:
        shard = self._shards.pop(collection, None)
        if shard is not None:
            shard.close()
        shutil.rmtree(self._dir(collection), ignore_errors=True)

    def _dense_names(self, collection: str) -> set[str]:
        config = json.loads((self._dir(collection) / "edge_config.json").read_text(encoding="utf-8"))
        self._shard(collection)  # take the lock early: a busy store fails here, not mid-import
        return set(config.get("vectors") or {})

    def _add_dense(self, collection: str, name: str, dim: int) -> None:
        self._shard(collection).update(qe.UpdateOperation.create_dense_vector(name, dim, qe.Distance.Cosine))

    def _index(self, collection: str, keywords: Sequence[str], texts: Sequence[str]) -> None:
        shard = self._shard(collection)
        have = shard.info().payload_schema
        for key in keywords:
            if key not in have:
                params = qe.KeywordIndexParams(prefix=True) if key in PREFIX_INDEXED else qe.PayloadSchemaType.Keyword
                shard.update(qe.UpdateOperation.create_field_index(key, params))
        for key in texts:
            if key not in have:
                shard.update(qe.UpdateOperation.create_field_index(key, _edge_text_index()))

    def _upsert(self, collection: str,
                batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]]) -> None:
        points = []
        for pid, payload, dense, sparse in batch:
            vector: dict[str, Any] = dict(dense)
            for name, sv in sparse.items():
                vector[name] = qe.SparseVector(list(sv.indices), list(sv.values))
            points.append(qe.Point(pid, vector, payload))
        self._shard(collection).update(qe.UpdateOperation.upsert_points(points))

    def _delete_filter(self, collection: str, flt: Filter) -> None:
        self._shard(collection).update(qe.UpdateOperation.delete_points_by_filter(_edge_filter(flt)))

    def _delete_ids(self, collection: str, pids: list[str]) -> None:
        self._shard(collection).update(qe.UpdateOperation.delete_points(list(pids)))

    def _retrieve(self, collection: str, pids: list[str], with_vectors: bool) -> list[StoredPoint]:
        records = self._shard(collection).retrieve(list(pids), with_payload=True, with_vector=with_vectors)
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records]

    def _scroll(self, collection: str, flt: Filter | None, offset: Any, limit: int,
                with_vectors: bool, fields: list[str] | None = None) -> tuple[list[StoredPoint], Any]:
        payload: Any = True if fields is None else qe.PayloadSelector.Include(fields)
        records, nxt = self._shard(collection).scroll(qe.ScrollRequest(
            offset=offset, limit=limit, filter=_edge_filter(flt), with_payload=payload, with_vector=with_vectors))
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records], nxt

    def _count(self, collection: str, flt: Filter | None) -> int:
        return self._shard(collection).count(qe.CountRequest(exact=True, filter=_edge_filter(flt)))

    def _facet(self, collection: str, key: str, limit: int) -> dict[str, int]:
        hits = self._shard(collection).facet(qe.FacetRequest(key, limit=limit, exact=True)).hits
        return {str(h.value): h.count for h in hits}

    def _search(self, collection: str, query: tuple[str, str, Any], limit: int, flt: Filter | None,
                score_threshold: float | None) -> list[ScoredPoint]:
        _, using, vec = query
        if isinstance(vec, SparseVec):
            vec = qe.SparseVector(list(vec.indices), list(vec.values))
        hits = self._shard(collection).query(qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vec, using=using), filter=_edge_filter(flt),
            score_threshold=score_threshold, with_payload=True))
        return [_scored(collection, h.score, h.payload) for h in hits]

    def _hybrid(self, collection: str, using: str, vector: list[float], sparse: SparseVec, limit: int,
                flt: Filter | None, candidates: int, rrf_k: int,
                weights: tuple[float, float] | None) -> list[ScoredPoint]:
        ef = _edge_filter(flt)
        sv = qe.SparseVector(list(sparse.indices), list(sparse.values))
        hits = self._shard(collection).query(qe.QueryRequest(
            limit=limit,
            prefetches=[
                qe.Prefetch(limit=candidates, query=qe.Query.Nearest(vector, using=using), filter=ef),
                qe.Prefetch(limit=candidates, query=qe.Query.Nearest(sv, using=SPARSE_VECTOR), filter=ef),
            ],
            query=qe.Fusion.Rrf(k=rrf_k, weights=list(weights) if weights else None),
            filter=ef, with_payload=True))
        return [_scored(collection, h.score, h.payload) for h in hits]

    def optimize(self) -> None:
        for shard in self._shards.values():
            shard.optimize()

    def close(self) -> None:
        shards, self._shards = self._shards, {}
        for shard in shards.values():
            shard.close()


def _edge_error(path: Path, exc: Exception) -> StoreError:
    if "WouldBlock" in str(exc):
        return StoreError(f"store {path} is in use by another mindnet process; wait for it to finish")
    return StoreError(f"cannot open store {path}: {exc}")


def _edge_text_index() -> qe.TextIndexParams:
    # Multilingual tokenizer: German compounds and umlauts split as a reader expects; no stemmer,
    # so a text filter means "these words occur", as written.
    return qe.TextIndexParams(tokenizer=qe.TokenizerType.Multilingual, lowercase=True)


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
    raise TypeError(f"not a filter condition: {cond!r}")


def _edge_filter(flt: Filter | None) -> qe.Filter | None:
    if flt is None:
        return None
    return qe.Filter(
        must=[_edge_condition(c) for c in flt.must] or None,
        should=[_edge_condition(c) for c in flt.should] or None,
        must_not=[_edge_condition(c) for c in flt.must_not] or None,
    )


def _stored(collection: str, payload: Any, vectors: Any) -> StoredPoint:
    payload = dict(payload or {})
    dense, sparse = _split_vectors(vectors)
    return StoredPoint(str(payload.get(ID_FIELDS[collection], "")), payload, dense, sparse)


def _scored(collection: str, score: float, payload: Any) -> ScoredPoint:
    payload = dict(payload or {})
    return ScoredPoint(str(payload.get(ID_FIELDS[collection], "")), float(score), payload)


# ---------------------------------------------------------------------------------------------
# qdrant-client adapter
# ---------------------------------------------------------------------------------------------


class ClientStore(Store):
    """Remote store: a Qdrant server or cluster through `qdrant-client` (R20).

    `url=":memory:"` runs the client's in-process engine (same API, payload indexes ignored); it
    serves tests. Qdrant's local file mode (`path=`) is deliberately not offered: Edge is the
    embedded backend.
    """

    def __init__(self, url: str, *, api_key: str | None = None, prefix: str = "mindnet",
                 shard_number: int = 1, replication_factor: int = 1, hnsw_m: int = 16,
                 hnsw_ef_construct: int = 128, timeout: int | None = None) -> None:
        super().__init__(prefix, hnsw_m, hnsw_ef_construct)
        self.url = url
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        try:
            if url == ":memory:":
                self._client = _qdrant_client()(location=":memory:")
            else:
                self._client = _qdrant_client()(url=url, api_key=api_key, timeout=timeout)
        except Exception as exc:
            raise StoreError(f"cannot connect to Qdrant at {url}: {exc}") from exc

    def describe(self) -> str:
        return self.url

    def _meta_name(self) -> str:
        return f"{self.prefix}_meta"

    def _read_meta(self) -> dict[str, Any] | None:
        name = self._meta_name()
        try:
            if not self._client.collection_exists(name):
                return None
            recs = self._client.retrieve(name, [point_id(_META_KEY)], with_payload=True)
        except Exception as exc:
            raise StoreError(f"cannot reach Qdrant at {self.url}: {exc}") from exc
        if not recs:
            return None
        return json.loads((recs[0].payload or {})["meta"])  # type: ignore[no-any-return]

    def _write_meta(self, meta: dict[str, Any]) -> None:
        name = self._meta_name()
        if not self._client.collection_exists(name):
            self._client.create_collection(
                name, vectors_config={}, shard_number=1, replication_factor=self.replication_factor)
        self._client.upsert(name, [qm.PointStruct(id=point_id(_META_KEY), vector={},
                                                  payload={"meta": json.dumps(meta, sort_keys=True)})])

    def _drop_meta(self) -> None:
        if self._client.collection_exists(self._meta_name()):
            self._client.delete_collection(self._meta_name())

    def _exists(self, collection: str) -> bool:
        return self._client.collection_exists(self._name(collection))

    def _create(self, collection: str, dense: Mapping[str, int]) -> None:
        self._client.create_collection(
            self._name(collection),
            vectors_config={n: qm.VectorParams(size=d, distance=qm.Distance.COSINE) for n, d in dense.items()},
            sparse_vectors_config={SPARSE_VECTOR: qm.SparseVectorParams(modifier=qm.Modifier.IDF)},
            hnsw_config=qm.HnswConfigDiff(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct),
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
        )

    def _drop(self, collection: str) -> None:
        self._client.delete_collection(self._name(collection))

    def _dense_names(self, collection: str) -> set[str]:
        vectors = self._client.get_collection(self._name(collection)).config.params.vectors
        return set(vectors) if isinstance(vectors, dict) else set()

    def _add_dense(self, collection: str, name: str, dim: int) -> None:
        self._client.create_vector_name(self._name(collection), name, qm.DenseVectorNameConfig(
            dense=qm.DenseVectorConfig(size=dim, distance=qm.Distance.COSINE)))

    def _index(self, collection: str, keywords: Sequence[str], texts: Sequence[str]) -> None:
        name = self._name(collection)
        have = self._client.get_collection(name).payload_schema or {}
        with warnings.catch_warnings():
            # The in-process engine warns that payload indexes have no effect there; a server uses them.
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for key in keywords:
                if key not in have:
                    schema: Any = (qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, prefix=True)
                                   if key in PREFIX_INDEXED else qm.PayloadSchemaType.KEYWORD)
                    self._client.create_payload_index(name, key, schema)
            for key in texts:
                if key not in have:
                    self._client.create_payload_index(name, key, qm.TextIndexParams(
                        type=qm.TextIndexType.TEXT, tokenizer=qm.TokenizerType.MULTILINGUAL, lowercase=True))

    def _upsert(self, collection: str,
                batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]]) -> None:
        points = []
        for pid, payload, dense, sparse in batch:
            vector: dict[str, Any] = dict(dense)
            for name, sv in sparse.items():
                vector[name] = qm.SparseVector(indices=list(sv.indices), values=list(sv.values))
            points.append(qm.PointStruct(id=pid, vector=vector, payload=payload))
        self._client.upsert(self._name(collection), points, wait=True)

    def _delete_filter(self, collection: str, flt: Filter) -> None:
        self._client.delete(self._name(collection), qm.FilterSelector(filter=_client_filter(flt)), wait=True)

    def _delete_ids(self, collection: str, pids: list[str]) -> None:
        self._client.delete(self._name(collection), qm.PointIdsList(points=list(pids)), wait=True)

    def _retrieve(self, collection: str, pids: list[str], with_vectors: bool) -> list[StoredPoint]:
        records = self._client.retrieve(self._name(collection), list(pids), with_payload=True,
                                        with_vectors=with_vectors)
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records]

    def _scroll(self, collection: str, flt: Filter | None, offset: Any, limit: int,
                with_vectors: bool, fields: list[str] | None = None) -> tuple[list[StoredPoint], Any]:
        records, nxt = self._client.scroll(self._name(collection), scroll_filter=_client_filter(flt), limit=limit,
                                           offset=offset, with_payload=True if fields is None else fields,
                                           with_vectors=with_vectors)
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records], nxt

    def _count(self, collection: str, flt: Filter | None) -> int:
        return self._client.count(self._name(collection), count_filter=_client_filter(flt), exact=True).count

    def _facet(self, collection: str, key: str, limit: int) -> dict[str, int]:
        hits = self._client.facet(self._name(collection), key, limit=limit, exact=True).hits
        return {str(h.value): h.count for h in hits}

    def _search(self, collection: str, query: tuple[str, str, Any], limit: int, flt: Filter | None,
                score_threshold: float | None) -> list[ScoredPoint]:
        _, using, vec = query
        if isinstance(vec, SparseVec):
            vec = qm.SparseVector(indices=list(vec.indices), values=list(vec.values))
        res = self._client.query_points(self._name(collection), query=vec, using=using,
                                        query_filter=_client_filter(flt), limit=limit,
                                        score_threshold=score_threshold, with_payload=True)
        return [_scored(collection, h.score, h.payload) for h in res.points]

    def _hybrid(self, collection: str, using: str, vector: list[float], sparse: SparseVec, limit: int,
                flt: Filter | None, candidates: int, rrf_k: int,
                weights: tuple[float, float] | None) -> list[ScoredPoint]:
        cf = _client_filter(flt)
        sv = qm.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        res = self._client.query_points(
            self._name(collection),
            prefetch=[qm.Prefetch(query=vector, using=using, limit=candidates, filter=cf),
                      qm.Prefetch(query=sv, using=SPARSE_VECTOR, limit=candidates, filter=cf)],
            query=qm.RrfQuery(rrf=qm.Rrf(k=rrf_k, weights=list(weights) if weights else None)),
            query_filter=cf, limit=limit, with_payload=True)
        return [_scored(collection, h.score, h.payload) for h in res.points]

    def optimize(self) -> None:
        # A server optimises in the background; nothing to wait for.
        return None

    def close(self) -> None:
        self._client.close()


def _client_condition(cond: Condition) -> Any:
    if isinstance(cond, Filter):
        return _client_filter(cond)
    if isinstance(cond, Equals):
        return qm.FieldCondition(key=cond.field, match=qm.MatchValue(value=cond.value))
    if isinstance(cond, AnyOf):
        return qm.FieldCondition(key=cond.field, match=qm.MatchAny(any=list(cond.values)))
    if isinstance(cond, TextMatch):
        return qm.FieldCondition(key=cond.field, match=qm.MatchText(text=cond.text))
    if isinstance(cond, Prefix):
        return qm.FieldCondition(key=cond.field, match=qm.MatchPrefix(prefix=cond.prefix))
    if isinstance(cond, Range):
        bounds = {"gte": cond.gte, "gt": cond.gt, "lte": cond.lte, "lt": cond.lt}
        if any(isinstance(v, str) for v in bounds.values()):
            return qm.FieldCondition(key=cond.field, range=qm.DatetimeRange(**bounds))
        return qm.FieldCondition(key=cond.field, range=qm.Range(**bounds))
    raise TypeError(f"not a filter condition: {cond!r}")


def _qdrant_client() -> type[Any]:
    from qdrant_client import QdrantClient

    return QdrantClient


def _client_filter(flt: Filter | None) -> qm.Filter | None:
    if flt is None:
        return None
    return qm.Filter(
        must=[_client_condition(c) for c in flt.must] or None,
        should=[_client_condition(c) for c in flt.should] or None,
        must_not=[_client_condition(c) for c in flt.must_not] or None,
    )


def open_store(*, path: str | os.PathLike[str] | None = None, url: str | None = None,
               api_key: str | None = None, prefix: str = "mindnet", shard_number: int = 1,
               replication_factor: int = 1, hnsw_m: int = 16, hnsw_ef_construct: int = 128) -> Store:
    """The store a run asked for: a Qdrant URL wins over the embedded folder (R20).

    Raises:
        StoreError: neither a path nor a URL, or the store cannot be reached or is locked.
    """
    if url:
        return ClientStore(url, api_key=api_key, prefix=prefix, shard_number=shard_number,
                           replication_factor=replication_factor, hnsw_m=hnsw_m,
                           hnsw_ef_construct=hnsw_ef_construct)
    if path is None:
        raise StoreError("no store given: set a store folder (MINDNET_STORE) or MINDNET_QDRANT_URL")
    return EdgeStore(path, prefix=prefix, hnsw_m=hnsw_m, hnsw_ef_construct=hnsw_ef_construct)


def copy_store(source: Store, target: Store, *, progress: Any = None) -> dict[str, int]:
    """Copy every point, vectors included, from one store to another (`mindnet migrate`, issue 6).

    The target gets the source's schema record first, so a later import against it checks the
    same model ids; nothing is re-embedded. Re-running it is harmless: points are upserted by id.

    Raises:
        StoreError: the source was never imported, or the target holds another model's vectors.
    """
    schema = source.meta()
    if schema is None:
        raise StoreError(f"store {source.describe()} is empty: run `mindnet import` first")
    target.ensure(schema)
    copied: dict[str, int] = {}
    for name in COLLECTIONS:
        total = source.count(name)
        done = 0
        batch: list[PointRecord] = []
        for p in source.scroll(name, with_vectors=True):
            batch.append(PointRecord(p.id, p.payload, p.vectors, p.sparse))
            if len(batch) == _BATCH:
                done += target.upsert(name, batch)
                batch = []
                if progress:
                    progress(name, done, total)
        done += target.upsert(name, batch)
        if progress:
            progress(name, done, total)
        copied[name] = done
    target.optimize()
    return copied
