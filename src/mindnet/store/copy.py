"""`copy_store`: every point from one store to another, for `mindnet migrate`."""

from __future__ import annotations

from typing import Any

from ..errors import StoreError
from .base import _BATCH, Store
from .records import COLLECTIONS, PointRecord


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
