"""`ClientStore`: the server or cluster adapter over `qdrant-client` (R20).

qdrant-client is imported on first use, never by `import mindnet.store`: the embedded default
must not pay its import time.
"""

from __future__ import annotations

import importlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .base import PREFIX_INDEXED, SEARCH_EF, TEXT_TOKENIZER, Store, _scored, _stored, text_tokenizer
from .lease import DEFAULT_TTL, ImportLease
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
    point_id,
)
from .server_errors import server_call


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


_META_KEY = "meta"


def _user() -> str:
    import getpass  # here: only a lease on a server store names its user

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's anonymous uid)
        return f"uid {os.getuid()}"


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

    @server_call("read the schema record")
    def _read_meta(self) -> dict[str, Any] | None:
        name = self._meta_name()
        if not self._client.collection_exists(name):
            return None
        recs = self._client.retrieve(name, [point_id(_META_KEY)], with_payload=True)
        if not recs:
            return None
        return json.loads((recs[0].payload or {})["meta"])  # type: ignore[no-any-return]

    @server_call("write the schema record")
    def _write_meta(self, meta: dict[str, Any]) -> None:
        name = self._meta_name()
        self._meta_collection()
        self._client.upsert(name, [qm.PointStruct(id=point_id(_META_KEY), vector={},
                                                  payload={"meta": json.dumps(meta, sort_keys=True)})])

    @server_call("drop the schema record")
    def _drop_meta(self) -> None:
        # The record only, not its collection: the import lease lives there too (`--full` holds it).
        if self._client.collection_exists(self._meta_name()):
            self._client.delete(self._meta_name(), qm.PointIdsList(points=[point_id(_META_KEY)]), wait=True)

    def lease(self, ttl: float = DEFAULT_TTL) -> ImportLease:
        """An import lease in this server's meta collection (created when missing), to enter around an import."""
        self._meta_collection()
        return ImportLease(self._client, self._meta_name(), self.url, ttl=ttl, holder=f"mindnet import by {_user()}")

    @server_call("create the meta collection")
    def _meta_collection(self) -> None:
        if not self._client.collection_exists(self._meta_name()):
            self._client.create_collection(
                self._meta_name(), vectors_config={}, shard_number=1, replication_factor=self.replication_factor)

    @server_call("look up collection")
    def _exists(self, collection: str) -> bool:
        return self._client.collection_exists(self._name(collection))

    @server_call("create collection")
    def _create(self, collection: str, dense: Mapping[str, tuple[int, bool]], sparse: Sequence[str]) -> None:
        self._client.create_collection(
            self._name(collection),
            vectors_config={n: qm.VectorParams(size=d, distance=qm.Distance.COSINE, multivector_config=_multi(m),
                                               datatype=_datatype(m), hnsw_config=_graph(m))
                            for n, (d, m) in dense.items()},
            sparse_vectors_config={n: qm.SparseVectorParams(modifier=qm.Modifier.IDF) for n in sparse},
            hnsw_config=qm.HnswConfigDiff(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct),
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
        )

    @server_call("drop collection")
    def _drop(self, collection: str) -> None:
        self._client.delete_collection(self._name(collection))

    @server_call("read the vectors of collection")
    def _dense_names(self, collection: str) -> dict[str, int]:
        vectors = self._client.get_collection(self._name(collection)).config.params.vectors
        return {n: v.size for n, v in vectors.items()} if isinstance(vectors, dict) else {}

    @server_call("add a vector to collection")
    def _add_dense(self, collection: str, name: str, dim: int, multi: bool) -> None:
        self._client.create_vector_name(self._name(collection), name, qm.DenseVectorNameConfig(
            dense=qm.DenseVectorConfig(size=dim, distance=qm.Distance.COSINE, multivector_config=_multi(multi),
                                       datatype=qm.VectorStorageDatatype.FLOAT16 if multi else None)))

    @server_call("read the sparse vectors of collection")
    def _sparse_names(self, collection: str) -> set[str]:
        return set(self._client.get_collection(self._name(collection)).config.params.sparse_vectors or {})

    @server_call("add a sparse vector to collection")
    def _add_sparse(self, collection: str, name: str) -> None:
        self._client.create_vector_name(self._name(collection), name, qm.SparseVectorNameConfig(
            sparse=qm.SparseVectorConfig(modifier=qm.Modifier.IDF)))

    @server_call("create payload indexes in collection")
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
                if key in have and text_tokenizer(have[key]) == TEXT_TOKENIZER:
                    continue
                if key in have:  # made with another tokenizer: made anew
                    self._client.delete_payload_index(name, key)
                self._client.create_payload_index(name, key, qm.TextIndexParams(
                    type=qm.TextIndexType.TEXT, tokenizer=qm.TokenizerType.WORD, lowercase=True))

    @server_call("write points to collection")
    def _upsert(self, collection: str,
                batch: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, SparseVec]]]) -> None:
        points = []
        for pid, payload, dense, sparse in batch:
            vector: dict[str, Any] = dict(dense)
            for name, sv in sparse.items():
                vector[name] = qm.SparseVector(indices=list(sv.indices), values=list(sv.values))
            points.append(qm.PointStruct(id=pid, vector=vector, payload=payload))
        self._client.upsert(self._name(collection), points, wait=True)

    @server_call("delete points from collection")
    def _delete_filter(self, collection: str, flt: Filter) -> None:
        self._client.delete(self._name(collection), qm.FilterSelector(filter=_client_filter(flt)), wait=True)

    @server_call("delete points from collection")
    def _delete_ids(self, collection: str, pids: list[str]) -> None:
        self._client.delete(self._name(collection), qm.PointIdsList(points=list(pids)), wait=True)

    @server_call("read points of collection")
    def _retrieve(self, collection: str, pids: list[str], with_vectors: bool) -> list[StoredPoint]:
        records = self._client.retrieve(self._name(collection), list(pids), with_payload=True,
                                        with_vectors=with_vectors)
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records]

    @server_call("scroll collection")
    def _scroll(self, collection: str, flt: Filter | None, offset: Any, limit: int,
                with_vectors: bool, fields: list[str] | None = None) -> tuple[list[StoredPoint], Any]:
        records, nxt = self._client.scroll(self._name(collection), scroll_filter=_client_filter(flt), limit=limit,
                                           offset=offset, with_payload=True if fields is None else fields,
                                           with_vectors=with_vectors)
        return [_stored(collection, r.payload, r.vector if with_vectors else None) for r in records], nxt

    @server_call("count collection")
    def _count(self, collection: str, flt: Filter | None) -> int:
        return self._client.count(self._name(collection), count_filter=_client_filter(flt), exact=True).count

    @server_call("facet collection")
    def _facet(self, collection: str, key: str, limit: int) -> dict[str, int]:
        hits = self._client.facet(self._name(collection), key, limit=limit, exact=True).hits
        return {str(h.value): h.count for h in hits}

    @server_call("search collection")
    def _search(self, collection: str, query: tuple[str, str, Any], limit: int, flt: Filter | None,
                score_threshold: float | None, fields: list[str] | None = None) -> list[ScoredPoint]:
        _, using, vec = query
        if isinstance(vec, SparseVec):
            vec = qm.SparseVector(indices=list(vec.indices), values=list(vec.values))
        params = None if isinstance(vec, qm.SparseVector) else qm.SearchParams(hnsw_ef=SEARCH_EF)
        res = self._client.query_points(self._name(collection), query=vec, using=using,
                                        query_filter=_client_filter(flt), limit=limit,
                                        score_threshold=score_threshold, search_params=params,
                                        with_payload=True if fields is None else fields)
        return [_scored(collection, h.score, h.payload) for h in res.points]

    @server_call("search collection")
    def _hybrid(self, collection: str, using: str, vector: list[float], sparse: SparseVec, limit: int,
                flt: Filter | None, candidates: int, rrf_k: int,
                weights: tuple[float, float] | None) -> list[ScoredPoint]:
        cf = _client_filter(flt)
        sv = qm.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
        res = self._client.query_points(
            self._name(collection),
            prefetch=[qm.Prefetch(query=vector, using=using, limit=candidates, filter=cf,
                                  params=qm.SearchParams(hnsw_ef=SEARCH_EF)),
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
    if isinstance(cond, HasVector):
        return qm.HasVectorCondition(has_vector=cond.vector)
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


def _multi(multi: bool) -> Any:
    """The server's multivector setting: a point scores by its best vector (MaxSim)."""
    return qm.MultiVectorConfig(comparator=qm.MultiVectorComparator.MAX_SIM) if multi else None


def _graph(multi: bool) -> Any:
    """A multivector's index on the server: no HNSW graph, an exact scan (as `embedded._graph`)."""
    return qm.HnswConfigDiff(m=0) if multi else None


def _datatype(multi: bool) -> Any:
    """A multivector's storage type on the server: half floats, as in the embedded store (`embedded._datatype`)."""
    return qm.Datatype.FLOAT16 if multi else None
