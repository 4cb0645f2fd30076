"""The storage stage: one `Store` interface over Qdrant; this package is the only code that imports Qdrant (R17, R20).

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

Modules: `records` (ids, records, filter language; pure), `lexical` (BM25 vectors), `base` (the
`Store` interface and shared helpers), `embedded` (`EdgeStore`), `client` (`ClientStore`, which
imports qdrant-client only when opened), `copy` (`copy_store`), `lease` (`ImportLease`, a server
store's import lease), `server_errors` (server errors as `StoreError`). Import from the package
itself.
"""

from __future__ import annotations

import os

from ..errors import StoreError
from .base import KEYWORD_INDEXES, PREFIX_INDEXED, TEXT_INDEXES, Store
from .client import ClientStore
from .copy import copy_store
from .embedded import EdgeStore, limit_arenas, map_large_blocks, release_freed_memory
from .lease import ImportLease
from .lexical import (
    BM25_SHAPES,
    CHUNK_BM25,
    MEASURED_BM25,
    NOTE_BM25,
    NOTE_SPARSE,
    PLAIN_BM25,
    SPARSE_VECTOR,
    SPARSE_VECTORS,
    Bm25Shape,
    bm25_shape,
    content_words,
    lexical_document,
    lexical_query,
    shape_fingerprint,
)
from .records import (
    COLLECTIONS,
    ID_FIELDS,
    ID_NAMESPACE,
    SCHEMA_VERSION,
    AnyOf,
    CollectionName,
    Condition,
    Equals,
    Filter,
    HasVector,
    PointRecord,
    Prefix,
    Range,
    ScoredPoint,
    SparseVec,
    StoredPoint,
    StoreSchema,
    TextMatch,
    VectorSpec,
    point_id,
)

__all__ = [
    "BM25_SHAPES",
    "CHUNK_BM25",
    "COLLECTIONS",
    "ID_FIELDS",
    "ID_NAMESPACE",
    "KEYWORD_INDEXES",
    "MEASURED_BM25",
    "NOTE_BM25",
    "NOTE_SPARSE",
    "PLAIN_BM25",
    "PREFIX_INDEXED",
    "SCHEMA_VERSION",
    "SPARSE_VECTOR",
    "SPARSE_VECTORS",
    "TEXT_INDEXES",
    "AnyOf",
    "Bm25Shape",
    "ClientStore",
    "CollectionName",
    "Condition",
    "EdgeStore",
    "Equals",
    "Filter",
    "HasVector",
    "ImportLease",
    "PointRecord",
    "Prefix",
    "Range",
    "ScoredPoint",
    "SparseVec",
    "Store",
    "StoreSchema",
    "StoredPoint",
    "TextMatch",
    "VectorSpec",
    "bm25_shape",
    "content_words",
    "copy_store",
    "lexical_document",
    "lexical_query",
    "limit_arenas",
    "map_large_blocks",
    "open_store",
    "point_id",
    "release_freed_memory",
    "shape_fingerprint",
]


def open_store(*, path: str | os.PathLike[str] | None = None, url: str | None = None,
               api_key: str | None = None, prefix: str = "mindnet", shard_number: int = 1,
               replication_factor: int = 1, hnsw_m: int = 16, hnsw_ef_construct: int = 128,
               leave_to_exit: bool = False) -> Store:
    """The store a run asked for: a Qdrant URL wins over the embedded folder (R20); `leave_to_exit` (the
    embedded store's), see `Store.leave_to_exit`.

    Raises:
        StoreError: neither a path nor a URL, or the store cannot be reached or is locked.
    """
    if url:
        return ClientStore(url, api_key=api_key, prefix=prefix, shard_number=shard_number,
                           replication_factor=replication_factor, hnsw_m=hnsw_m,
                           hnsw_ef_construct=hnsw_ef_construct)
    if path is None:
        raise StoreError("no store given: set a store folder (MINDNET_STORE) or MINDNET_QDRANT_URL")
    return EdgeStore(path, prefix=prefix, hnsw_m=hnsw_m, hnsw_ef_construct=hnsw_ef_construct,
                     leave_to_exit=leave_to_exit)

