"""The per-direction e5 rule that `bench/search.py loo --e5` measures (issue 15, Build 5).

The bench replays it with its own copy of the fusion steps (`fuse_e5_by_language`), so its
figures only mean something if a flat rule (`same == other`) ranks exactly as the product's
`fuse` with that `e5_weight` does, and if a zero weight really keeps a language out.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import search as bench  # bench/search.py: bench is a folder of scripts, not a package
from mindnet.search import CandidateLists, SearchTuning, fuse
from mindnet.store import ScoredPoint, SparseVec
from mindnet.titles import NamedNote

LANGS = ("de", "en", None)


def _lists(draw: st.DrawFn) -> CandidateLists:
    ids = [f"n{i}#c{j}" for i in range(6) for j in range(3)]
    lang = {cid: draw(st.sampled_from(LANGS)) for cid in ids}

    def ranked() -> list[ScoredPoint]:
        chosen = draw(st.lists(st.sampled_from(ids), unique=True, max_size=12))
        return [ScoredPoint(cid, 1.0 / (r + 1), {"note_id": cid.split("#")[0], "lang": lang[cid], "text": cid})
                for r, cid in enumerate(chosen)]

    p_de = draw(st.sampled_from((0.0, 0.3, 0.5, 0.9, 1.0)))
    named = draw(st.lists(st.sampled_from([f"n{i}" for i in range(6)]), unique=True, max_size=3))
    titles = [NamedNote(note_id, 1, draw(st.sampled_from((1.0, 0.5, 0.2)))) for note_id in named]
    return CandidateLists(ranked(), ranked(), {"de": p_de, "en": 1.0 - p_de}, quality=ranked(), titles=titles)


@st.composite
def cases(draw: st.DrawFn) -> tuple[CandidateLists, SearchTuning]:
    tuning = SearchTuning(rrf_k=draw(st.sampled_from((5, 10, 60))),
                          lexical_weight_same=draw(st.sampled_from((0.5, 1.0, 1.5))),
                          lexical_weight_other=draw(st.sampled_from((0.0, 0.25))),
                          language_confidence=draw(st.booleans()),
                          use_weight_with_e5=draw(st.sampled_from((0.5, 1.0))),
                          e5_weight=draw(st.sampled_from((0.5, 1.0, 2.0))),
                          title_weight=draw(st.sampled_from((0.0, 1.0))),
                          feedback_weight=draw(st.sampled_from((0.0, 0.25))),
                          note_ranks=draw(st.booleans()), language_slots=draw(st.booleans()),
                          dense_floor=draw(st.sampled_from((0.0, 0.25, 0.6))))
    return _lists(draw), tuning


def _fake_feedback(vector: SparseVec) -> Sequence[ScoredPoint]:
    """A deterministic feedback list that depends on the query vector (so the first pass matters)."""
    n = len(vector.indices)
    return [ScoredPoint(f"n{(n + r) % 6}#c{r % 3}", 1.0, {"note_id": f"n{(n + r) % 6}", "lang": "en", "text": "x"})
            for r in range(4)]


@settings(max_examples=200, deadline=None)
@given(cases())
def test_flat_rule_ranks_exactly_as_fuse(case: tuple[CandidateLists, SearchTuning]) -> None:
    lists, tuning = case
    rule = bench.E5ByLanguage(tuning.e5_weight, tuning.e5_weight)
    want = fuse("q", lists, tuning, _fake_feedback)
    got = bench.fuse_e5_by_language("q", lists, tuning, rule, _fake_feedback)
    assert [(c.chunk_id, c.score) for c in got] == [(c.chunk_id, c.score) for c in want]


@settings(max_examples=100, deadline=None)
@given(cases())
def test_zero_weight_keeps_the_other_language_out(case: tuple[CandidateLists, SearchTuning]) -> None:
    lists, tuning = case
    english = CandidateLists(lists.dense, lists.lexical, {"en": 1.0}, quality=lists.quality)
    plain = SearchTuning(rrf_k=tuning.rrf_k, feedback_weight=0.0, language_slots=False)
    got = {c.chunk_id: c for c in bench.fuse_e5_by_language("q", english, plain, bench.E5ByLanguage(1.0, 0.0))}
    elsewhere = {p.id for p in (*lists.dense, *lists.lexical)}
    for p in lists.quality:
        if p.payload["lang"] == "de":
            assert p.id not in got or p.id in elsewhere
            assert "e5" not in got.get(p.id, bench._Cand(p.id, 0.0, {}, "")).via.split("+")
        elif p.id in got:
            assert "e5" in got[p.id].via.split("+")


def test_direction_classes() -> None:
    assert [bench.e5_direction(c) for c in ("foam en→en", "rust de→en", "rust en→mixed", "xquad de→de")] == [
        "same", "cross", "mixed", "same"]
