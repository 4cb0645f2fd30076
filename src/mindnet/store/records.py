"""The store's records and its neutral filter language: what callers pass and get back.

No Qdrant import here: `sync` and `search` build `Filter`s and read `ScoredPoint`s in mindnet
terms, and each adapter translates them to its engine's types.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..text import uuid5_string

SCHEMA_VERSION = 1
"""Bumped when the payload or vector layout changes in a way old stores cannot serve."""

ID_NAMESPACE = uuid.UUID("8c4ce21a-fb58-5114-8dc6-9ba5bbbcd937")
"""UUIDv5 namespace of every point id (R12, R16); = uuid5(NAMESPACE_URL, "https://mindnet.invalid/point-id").
NOTE: changing it orphans every stored point."""

CollectionName: TypeAlias = Literal["notes", "chunks", "edges"]
COLLECTIONS: tuple[CollectionName, ...] = ("notes", "chunks", "edges")

ID_FIELDS: Mapping[str, str] = {"notes": "note_id", "chunks": "chunk_id", "edges": "edge_id"}
"""Payload field that keeps each collection's string id next to its UUID point id (R12)."""


def point_id(string_id: str) -> str:
    """The Qdrant point id of a mindnet string id: UUIDv5 in `ID_NAMESPACE` (R12, R16)."""
    return uuid5_string(ID_NAMESPACE, string_id)


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
    multi: bool = False
    """A multivector: each point holds several vectors of `dim` and scores by its best one (MaxSim),
    e.g. a note's windows on its lead chunk (`points.NOTE_VECTOR`)."""


@dataclass(frozen=True, slots=True)
class StoreSchema:
    """What a run expects of the store; recorded on first use and checked by `Store.ensure`."""

    vectors: tuple[VectorSpec, ...]
    """Named dense vectors the run writes to chunks."""
    chunking_hash: str = ""
    """Hash of the chunking settings: chunks made under other settings must not be mixed in."""
    schema_version: int = SCHEMA_VERSION
    """Layout version of payloads and vectors."""
    reserved: tuple[tuple[str, int], ...] = ()
    """Dense vectors a later run may add to chunks, as (name, dimensions): the e5 tier's. A new chunks
    collection is made with them, so that the adapter places them as it places the others (Qdrant Edge
    cannot place a vector added later: it is held in memory and read whole on every open, ~1.5 KB a chunk
    for e5). Recorded and checked only once a run writes them (`vectors`)."""


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


@dataclass(frozen=True, slots=True)
class HasVector:
    """The point holds the named vector (a chunk the e5 tier has reached, for instance)."""

    vector: str


Condition: TypeAlias = "Equals | AnyOf | TextMatch | Prefix | Range | HasVector | Filter"


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
