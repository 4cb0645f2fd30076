"""`bench/search.py singles`' one-list reading of mindnet's dense vectors ("dense chunks∪notes (max)").

The row stands beside the issue's fused row as a yardstick, so it must be what its label says: every note
once, ranked by the best cosine any of its chunks or windows has, whichever list that vector came from.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import search as bench  # bench/search.py: bench is a folder of scripts, not a package
from mindnet.evaluation import EvalQuery
from mindnet.search.fusion import CandidateLists
from mindnet.store import ScoredPoint

_point = st.builds(lambda note, score, i: ScoredPoint(f"{note}-{i}", score, {"note_id": note}),
                   st.sampled_from("abcdef"), st.floats(-1.0, 1.0, allow_nan=False), st.integers(0, 99))


def _replay(chunks: list[ScoredPoint], windows: list[ScoredPoint]) -> bench.Replay:
    lists = CandidateLists(dense=chunks, lexical=(), query_langs={}, notes=windows)
    question = EvalQuery("q1", "how do I publish", {"a": 1.0})
    return bench.Replay("cell", [question], [lists], None, lambda *_: [])  # type: ignore[arg-type]


@given(st.lists(_point, max_size=12), st.lists(_point, max_size=12))
def test_a_note_ranks_by_its_closest_vector_of_either_kind(chunks: list[ScoredPoint],
                                                           windows: list[ScoredPoint]) -> None:
    r = _replay(chunks, windows)
    ranked = bench.replay_notes(r, 0, "dense-max", bench.SearchTuning())
    best: dict[str, float] = {}
    for p in [*chunks, *windows]:
        best[p.payload["note_id"]] = max(best.get(p.payload["note_id"], -2.0), p.score)
    assert dict(ranked) == best
    assert [s for _, s in ranked] == sorted(best.values(), reverse=True)
