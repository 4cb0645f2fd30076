"""Fusion steps that decide how chunk lists become a note ranking (issue 15), pure, as properties.

`ranked` (note ranks) and `language_slots` (the dense list's language at every rank) are what keep
lexical evidence from rewarding a note for being cut into many chunks, or a language for being
the question's; each is checked on random lists.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mindnet.search import SearchTuning, _Cand, best_per_note, fuse
from mindnet.search.fusion import CandidateLists, language_slots, ranked
from mindnet.store import ScoredPoint

LANGS = ("de", "en")


def _point(i: int, note: int, lang: str, score: float = 1.0) -> ScoredPoint:
    return ScoredPoint(f"n{note}#c{i}", score, {"note_id": f"n{note}", "lang": lang, "chunk_id": f"n{note}#c{i}"})


points = st.lists(st.tuples(st.integers(0, 6), st.sampled_from(LANGS)), min_size=0, max_size=25).map(
    lambda rows: [_point(i, note, lang, 1.0 - i / 100) for i, (note, lang) in enumerate(rows)])


@settings(max_examples=80, deadline=None)
@given(points)
def test_note_ranks_give_each_note_one_rank_in_list_order(ps: list[ScoredPoint]) -> None:
    out = ranked(ps, True)
    notes = [p.payload["note_id"] for _, p in out]
    assert len(notes) == len(set(notes)) == len({p.payload["note_id"] for p in ps})
    assert [r for r, _ in out] == list(range(1, len(out) + 1))
    first = {}
    for p in ps:
        first.setdefault(p.payload["note_id"], p.id)
    assert [p.id for _, p in out] == list(first.values())
    assert ranked(ps, False) == list(enumerate(ps, 1))


def _cands(ps: list[ScoredPoint]) -> list[_Cand]:
    return [_Cand(p.id, p.score, p.payload, "dense") for p in ps]


@settings(max_examples=120, deadline=None)
@given(points, points)
def test_language_slots_keep_the_dense_languages_and_each_languages_fused_order(
        fused_points: list[ScoredPoint], dense: list[ScoredPoint]) -> None:
    unique = list({p.id: p for p in fused_points}.values())
    cands = _cands(unique)
    out = language_slots(cands, dense)
    assert sorted(c.chunk_id for c in out) == sorted(c.chunk_id for c in cands)  # a permutation
    assert [c.score for c in out] == sorted((c.score for c in cands), reverse=True)  # scores stay in place
    by_score = sorted(cands, key=lambda c: -c.score)
    for lang in LANGS:  # within a language, the fused order stands
        assert [c.chunk_id for c in out if c.payload["lang"] == lang] == [
            c.chunk_id for c in by_score if c.payload["lang"] == lang]
    left = {lang: sum(c.payload["lang"] == lang for c in cands) for lang in LANGS}
    for rank, c in enumerate(out):  # rank r holds dense's language at r while that language lasts
        if rank < len(dense) and left[dense[rank].payload["lang"]] > 0:
            assert c.payload["lang"] == dense[rank].payload["lang"]
        left[c.payload["lang"]] -= 1


def test_slots_stop_same_language_bm25_hits_from_pushing_the_other_languages_answer_down() -> None:
    """A German question on a mixed vault: dense puts the English answer first, BM25 only has German hits."""
    dense = [_point(1, 1, "en", 0.9), _point(2, 2, "de", 0.8), _point(3, 3, "de", 0.7)]
    lexical = [_point(2, 2, "de", 9.0), _point(3, 3, "de", 8.0), _point(4, 4, "de", 7.0)]
    lists = CandidateLists(dense, lexical, {"de": 1.0})
    plain = best_per_note(fuse("frage", lists, SearchTuning(rrf_k=5, language_slots=False)))
    slots = best_per_note(fuse("frage", lists, SearchTuning(rrf_k=5, language_slots=True)))
    assert plain[0].payload["note_id"] != "n1"  # the failure the slots exist for
    assert slots[0].payload["note_id"] == "n1"
    assert [c.payload["note_id"] for c in slots[1:3]] == ["n2", "n3"]  # German still ordered by fusion


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False),
       st.sampled_from(["dense", "lexical+note"]), st.none() | st.floats(-1, 1),
       st.dictionaries(st.sampled_from(["dense", "lexical", "slots"]), st.floats(-1, 1)),
       st.dictionaries(st.sampled_from(["dense", "lexical", "slots"]), st.integers(1, 99)))
def test_a_candidates_copy_holds_every_field_and_parts_of_its_own(chunk_id: str, score: float, via: str,
                                                                  dense: float | None, parts: dict[str, float],
                                                                  ranks: dict[str, int]) -> None:
    """`_Cand.copy` is written out field by field (for speed): a field it forgot, or parts it shared with the
    original, would change a later step's scores or explanation without a trace."""
    import dataclasses

    c = _Cand(chunk_id, score, {"note_id": "n"}, via, dense, parts, ranks)
    d = c.copy()
    assert all(getattr(d, f.name) == getattr(c, f.name) for f in dataclasses.fields(_Cand))
    d.add("feedback", 0.5, 3)
    assert c.parts == parts and c.ranks == ranks and "feedback" not in c.parts
    assert d.parts["feedback"] == 0.5 and d.ranks["feedback"] == 3
