"""The caches behind `bench/search.py`'s replays: what a store answered, asked again, answers the same.

`loo` replays hundreds of fusion settings over lists fetched once; the caches keep its memory bounded
(ids and scores per feedback answer, one payload and one text per chunk), and a figure is only worth
printing if a cached answer is exactly the store's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import search as bench  # bench/search.py: bench is a folder of scripts, not a package
from mindnet.store import ScoredPoint, SparseVec

_ids = st.lists(st.sampled_from([f"c{i}" for i in range(8)]), max_size=6)


class _Store:
    """A searcher's two store reads, counting what each was asked."""

    def __init__(self) -> None:
        self.texts_asked: list[str] = []
        self.searches = 0

    def chunk_texts(self, ids: Sequence[str]) -> dict[str, str]:
        self.texts_asked.extend(ids)
        return {i: f"text of {i}" for i in ids if i != "c7"}  # c7: gone from the store

    def feedback_search(self, pool: int, fields: Sequence[str] | None = None):  # type: ignore[no-untyped-def]
        assert fields == bench.REPLAY_FIELDS

        def run(vector: SparseVec) -> list[ScoredPoint]:
            self.searches += 1
            return [ScoredPoint(f"c{i}", 1.0 / (1 + i + sum(vector.indices)), {"note_id": f"n{i}"})
                    for i in range(pool)]

        return run


@given(st.lists(_ids, max_size=5))
def test_texts_are_the_stores_and_each_is_read_once(asks: list[list[str]]) -> None:
    store = _Store()
    texts = bench.cached_texts(store)  # type: ignore[arg-type]
    for ids in asks:
        assert texts(ids) == {i: "" if i == "c7" else f"text of {i}" for i in ids}
    assert sorted(store.texts_asked) == sorted({i for ids in asks for i in ids})


@given(st.lists(st.integers(0, 3), max_size=8))
def test_a_feedback_answer_asked_again_is_the_first_one(queries: list[int]) -> None:
    store = _Store()
    cached = bench.cached_feedback(store, 4)  # type: ignore[arg-type]
    first: dict[int, list[ScoredPoint]] = {}
    for q in queries:
        answer = cached(SparseVec((q,), (1.0,)))
        assert answer == first.setdefault(q, answer)
        assert answer == store.feedback_search(4, bench.REPLAY_FIELDS)(SparseVec((q,), (1.0,)))
        store.searches -= 1  # the check's own search
    assert store.searches == len(set(queries))
