"""Search (R22) and context building (R23) over a real Edge store under tmp_path.

Most tests are about filters, aggregation, expansion and merging, not the model, so they use the
deterministic fake embedder; `test_german_query_finds_english_note` runs the real USE model.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from conftest import corpus
from fakes import FakeEmbedder
from mindnet.api import Index
from mindnet.chunking.base import Chunk
from mindnet.chunking.pipeline import chunk_note
from mindnet.config import Settings
from mindnet.embedding import Embedder, UseEmbedder
from mindnet.errors import MindnetError
from mindnet.points import DENSE_VECTOR as DENSE
from mindnet.search import (
    CandidateLists,
    Context,
    Hit,
    Searcher,
    SearchFilters,
    SearchTuning,
    _Cand,
    add_feedback,
    add_title_list,
    best_per_note,
    build_context,
    feedback_query,
    fuse,
    note_fulltexts,
    query_languages,
    rrf_fuse,
    title_match,
)
from mindnet.search.fusion import LISTS
from mindnet.store import Filter, PointRecord, ScoredPoint, SparseVec, Store, StoreSchema, VectorSpec, lexical_document
from mindnet.sync import open_store
from mindnet.titles import NamedNote
from mindnet.vault import read_note

NOTES = {
    "en/coffee.md": """---
title: Brewing coffee
id: coffee
type: concept
status: draft
created: 2024-01-05
tags: [drink, morning]
area: home
lang: en
---
# Brewing coffee

Grind the beans just before brewing. A burr grinder gives an even grind, and an even grind
extracts evenly. Water just off the boil, around 94 degrees, extracts the most flavour.

## Methods

A pour-over takes three minutes. A French press steeps for four minutes before you press the
plunger. Espresso needs a fine grind and nine bars of pressure. See also [[tea]].
""",
    "de/tee.md": """---
title: Tee zubereiten
id: tea
type: concept
status: draft
created: 2024-03-10
tags: [drink]
area: home
lang: de
---
# Tee zubereiten

Grüner Tee mag kein kochendes Wasser: achtzig Grad genügen, und nach zwei Minuten wird er
bitter. Schwarzer Tee zieht vier Minuten in sprudelnd heißem Wasser.
""",
    "projects/garden.md": """---
title: Vegetable garden
id: garden
type: project
status: active
created: 2023-06-01
tags: [outdoor]
project: garden
lang: en
---
# Vegetable garden

## Tomatoes

Tomatoes want six hours of sun a day. Plant them deep, up to the first leaves, so the stem
grows roots along its buried length. Water at the base in the morning, never on the leaves.

Stake every plant before it flowers. Pinch the side shoots weekly so the plant puts its
strength into fruit instead of leaves.

## Compost

Compost turns kitchen scraps into soil. Mix green waste and brown waste in equal parts and turn
the heap every two weeks. A hot heap is ready in three months.

## Watering

Water deeply twice a week rather than a little every day. Deep watering grows deep roots.
Mulch keeps the soil moist between waterings.
""",
    "journal/2024-02-01.md": """---
title: Journal 2024-02-01
id: j-2024-02-01
type: journal
status: done
created: 2024-02-01
tags: [log]
lang: en
---
# Journal 2024-02-01

Ordered seeds for the [[garden]]: four kinds of tomatoes and some basil.
""",
}

SMALL_PROFILE = {"profiles": {"project": {"target_min": 20, "target_max": 40, "max": 60, "overlap_min": 0,
                                          "overlap_max": 10}}}


def write_vault(root: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _settings(store: Path) -> Settings:
    from mindnet.config import load_settings

    return load_settings(env={}, overrides={"store_path": str(store), "quality_tier": False, **SMALL_PROFILE})


def _import(vault: Path, settings: Settings, embedder: Embedder, e5: Embedder | None = None) -> None:
    with Index(vault, settings, embedder=embedder, e5=e5) as index:
        index.import_vault(e5=e5 is not None)


def _open(vault: Path, settings: Settings, embedder: Embedder) -> Store:
    _import(vault, settings, embedder)
    store = open_store(vault, settings)
    store.ensure(StoreSchema(vectors=(VectorSpec(DENSE, embedder.model_id, embedder.dim),)))
    return store


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    root = tmp_path_factory.mktemp("search")
    vault = write_vault(root / "vault", NOTES)
    settings = _settings(root / "store")
    embedder = FakeEmbedder()
    store = _open(vault, settings, embedder)
    yield Searcher(store, embedder, settings)
    store.close()


def note_ids(hits: list[Hit]) -> set[str]:
    return {h.note_id for h in hits}


# -- modes and records ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_modes_return_ranked_hits(searcher: Searcher, mode: str) -> None:
    hits = searcher.search("tomatoes sun stake plant", k=5, mode=mode)  # type: ignore[arg-type]
    assert hits
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    lists = LISTS
    assert all(set(h.via.split("+")) <= set(lists) and h.via.split("+") == sorted(h.via.split("+"), key=lists.index)
               for h in hits)
    if mode != "hybrid":
        assert {h.via for h in hits} == {mode}
    if mode == "lexical":  # the fake embedder only approximates meaning; BM25 is exact
        assert hits[0].note_id == "garden"


def test_lexical_hit_carries_citation_data(searcher: Searcher) -> None:
    hit = searcher.search("compost heap", k=1, mode="lexical")[0]
    assert (hit.note_id, hit.path, hit.title) == ("garden", "projects/garden.md", "Vegetable garden")
    assert hit.section_path == "/Compost" and hit.section_title == "Compost"
    full = note_fulltexts(searcher.store, ["garden"])["garden"]
    assert "Compost turns kitchen scraps" in full[hit.char_start:hit.char_end]
    assert hit.line_start <= hit.line_end
    # line numbers are file lines (frontmatter counted): the Compost heading is line 21
    assert hit.line_start == 21


def test_hit_is_json_serialisable(searcher: Searcher) -> None:
    hits = searcher.search("coffee grind", k=3)
    data = json.loads(json.dumps([h.as_dict() for h in hits]))
    assert set(data[0]) == {"rank", "score", "note_id", "path", "title", "chunk_id", "section_path", "section_title",
                            "text", "char_start", "char_end", "line_start", "line_end", "lang", "via"}
    explained = json.loads(json.dumps([h.as_dict() for h in searcher.search("coffee grind", k=3, explain=True)]))
    assert set(explained[0]) == {*data[0], "explain"}
    assert {"list", "rank", "score"} == set(explained[0]["explain"][0])


def test_bad_arguments(searcher: Searcher) -> None:
    assert searcher.search("   ") == []
    with pytest.raises(MindnetError, match="unknown search mode"):
        searcher.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(MindnetError, match="k must be"):
        searcher.search("x", k=0)


# -- filters ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("filters", "allowed"), [
    (SearchFilters(type=("project",)), {"garden"}),
    (SearchFilters(type=("concept", "journal")), {"coffee", "tea", "j-2024-02-01"}),
    (SearchFilters(tags=("drink",)), {"coffee", "tea"}),
    (SearchFilters(tags=("drink", "morning")), {"coffee"}),
    (SearchFilters(area="home"), {"coffee", "tea"}),
    (SearchFilters(project="garden"), {"garden"}),
    (SearchFilters(lang="de"), {"tea"}),
    (SearchFilters(path_prefix="projects/"), {"garden"}),
    (SearchFilters(path_prefix="en/"), {"coffee"}),
    (SearchFilters(note_id=("tea", "garden")), {"tea", "garden"}),
    (SearchFilters(created_from="2024-01-01"), {"coffee", "tea", "j-2024-02-01"}),
    (SearchFilters(created_to="2024-01-05"), {"coffee", "garden"}),
    (SearchFilters(created_from="2024-01-06", created_to="2024-02-01"), {"j-2024-02-01"}),
    (SearchFilters(type=("concept",), lang="en"), {"coffee"}),
])
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_filters_restrict_results(searcher: Searcher, filters: SearchFilters, allowed: set[str], mode: str) -> None:
    hits = searcher.search("water minutes plant tomatoes coffee tea seeds", k=20, mode=mode,  # type: ignore[arg-type]
                           filters=filters, expand=True)
    assert hits, filters
    assert note_ids(hits) == allowed  # every allowed note has chunks, k is large: all of them come back


def test_empty_filters_mean_no_filter() -> None:
    assert SearchFilters().to_filter() is None
    flt = SearchFilters(tags=("a", "b"), created_to="2024-01-05").to_filter()
    assert isinstance(flt, Filter) and len(flt.must) == 3


# -- by note ------------------------------------------------------------------------------------


def test_by_note_keeps_the_best_chunk_of_each_note(searcher: Searcher) -> None:
    chunks = searcher.search("water roots soil leaves", k=50, mode="lexical")
    notes = searcher.search("water roots soil leaves", k=50, mode="lexical", by_note=True)
    assert len(notes) == len(note_ids(notes))  # one hit per note
    assert note_ids(notes) == note_ids(chunks)
    for hit in notes:
        best = max((c for c in chunks if c.note_id == hit.note_id), key=lambda c: c.score)
        assert (hit.chunk_id, hit.score) == (best.chunk_id, best.score)
    assert [h.score for h in notes] == sorted((h.score for h in notes), reverse=True)


# -- expansion ----------------------------------------------------------------------------------


def test_expand_adds_neighbours_below_their_hit(searcher: Searcher) -> None:
    plain = searcher.search("compost heap green brown waste", k=1, mode="lexical")
    top = plain[0]
    expanded = searcher.search("compost heap green brown waste", k=50, mode="lexical", expand=True)
    extra = [h for h in expanded if h.via == "expand"]
    garden_chunks = sorted(h.chunk_id for h in expanded if h.note_id == "garden")
    assert top.chunk_id in garden_chunks
    i = garden_chunks.index(top.chunk_id)
    neighbours = set(garden_chunks[max(0, i - 1):i]) | set(garden_chunks[i + 1:i + 2])
    assert neighbours  # the note has several chunks
    assert all(h.score < top.score for h in extra)
    assert neighbours <= {h.chunk_id for h in expanded}


def test_expand_follows_links_both_ways(searcher: Searcher) -> None:
    # Only the journal matches "seeds basil"; it links the garden, so expansion brings the garden.
    flt = SearchFilters(note_id=("j-2024-02-01", "garden", "coffee"))
    plain = searcher.search("seeds basil", k=10, mode="lexical", filters=flt)
    assert note_ids(plain) == {"j-2024-02-01"}
    expanded = searcher.search("seeds basil", k=10, mode="lexical", filters=flt, expand=True)
    assert "garden" in note_ids(expanded)
    assert "coffee" not in note_ids(expanded)  # not linked
    linked = [h for h in expanded if h.note_id == "garden"]
    assert all(h.via == "expand" and h.score < expanded[0].score for h in linked)
    # Backlinks: tea is linked *from* coffee; a tea-only query reaches coffee through the backlink.
    back = searcher.search("Grüner Tee", k=10, mode="lexical", expand=True,
                           filters=SearchFilters(note_id=("tea", "coffee")))
    assert note_ids(back) == {"tea", "coffee"}


def test_expand_respects_filters(searcher: Searcher) -> None:
    hits = searcher.search("seeds basil", k=10, mode="lexical", expand=True,
                           filters=SearchFilters(type=("journal",)))
    assert note_ids(hits) == {"j-2024-02-01"}


# -- fusion -------------------------------------------------------------------------------------


def _point(pid: str, lang: str, score: float = 1.0) -> ScoredPoint:
    return ScoredPoint(pid, score, {"chunk_id": pid, "lang": lang})


def test_rrf_fuse_weights_lexical_ranks_by_language() -> None:
    dense = [_point("a", "en"), _point("b", "de")]
    lexical = [_point("b", "de"), _point("c", "en")]
    fused = {c.chunk_id: c for c in rrf_fuse(dense, lexical, "de", rrf_k=60, weight_same=1.0, weight_other=0.5)}
    assert fused["a"].score == pytest.approx(1 / 61)
    assert fused["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"].score == pytest.approx(0.5 / 62)
    assert (fused["a"].via, fused["b"].via, fused["c"].via) == ("dense", "dense+lexical", "lexical")
    order = [c.chunk_id for c in rrf_fuse(dense, lexical, "de")]
    assert order == ["b", "a", "c"]


def test_rrf_fuse_weighs_by_language_confidence() -> None:
    lexical = [_point("en1", "en"), _point("de1", "de"), _point("x", "")]
    fused = {c.chunk_id: c for c in rrf_fuse([], lexical, {"en": 0.8, "de": 0.2}, rrf_k=10, weight_same=2.0,
                                             weight_other=0.0)}
    # w = other + (same - other) * P(lang): 0 + 2 * 0.8 for English, 2 * 0.2 for German
    assert fused["en1"].score == pytest.approx(1.6 / 11)
    assert fused["de1"].score == pytest.approx(0.4 / 12)
    assert fused["x"].score == pytest.approx(2.0 / 13)  # unknown chunk language: nothing says "accidental"
    # a certain guess is the old hard rule
    hard = {c.chunk_id: c.score for c in rrf_fuse([], lexical, {"en": 1.0}, rrf_k=10, weight_other=0.25)}
    assert hard == {c.chunk_id: c.score for c in rrf_fuse([], lexical, "en", rrf_k=10, weight_other=0.25)}


def test_query_languages() -> None:
    assert query_languages("anything", ("de",)) == {"de": 1.0}
    assert query_languages("`code` [[Link]]", ("de", "en")) == {"de": 0.5, "en": 0.5}  # no prose left
    probs = query_languages("Wie erstelle ich eine tägliche Notiz?", ("de", "en"))
    assert probs["de"] > 0.99 and sum(probs.values()) == pytest.approx(1.0)


def test_fuse_hard_guess_and_title_boost() -> None:
    dense = [ScoredPoint("a", 0.9, {"lang": "en", "note_title": "Other"}),
             ScoredPoint("b", 0.8, {"lang": "en", "note_title": "Daily Notes"})]
    lists = CandidateLists(dense, [], {"en": 0.6, "de": 0.4})
    assert [c.chunk_id for c in fuse("daily notes", lists, SearchTuning())] == ["a", "b"]
    boosted = fuse("daily notes", lists, SearchTuning(rrf_k=10, title_boost=1.0))
    assert [c.chunk_id for c in boosted] == ["b", "a"]
    assert boosted[0].score == pytest.approx(1 / 12 + 1 / 11)  # rank 2 plus a full title match
    assert title_match({"daily"}, "Daily Notes") == pytest.approx(0.5)
    assert title_match({"daily"}, "") == 0.0
    # hard guess: English (0.6) wins, the German chunk counts with weight_other
    lex = CandidateLists([], [_point("d", "de")], {"en": 0.6, "de": 0.4})
    tuning = SearchTuning(rrf_k=10, lexical_weight_same=1.0, lexical_weight_other=0.0)
    soft = fuse("q", lex, tuning)[0].score
    hard = fuse("q", lex, dataclasses.replace(tuning, language_confidence=False))[0].score
    assert (soft, hard) == (pytest.approx(0.4 / 11), 0.0)


def test_best_per_note_can_add_the_other_chunks() -> None:
    cands = [_Cand("a1", 0.5, {"note_id": "a"}, "dense"), _Cand("b1", 0.4, {"note_id": "b"}, "dense"),
             _Cand("b2", 0.3, {"note_id": "b"}, "dense")]
    assert [(c.chunk_id, c.score) for c in best_per_note(cands)] == [("a1", 0.5), ("b1", 0.4)]
    summed = best_per_note(cands, 0.5)
    assert [(c.chunk_id, c.score) for c in summed] == [("b1", pytest.approx(0.55)), ("a1", 0.5)]
    assert cands[1].score == 0.4  # inputs untouched
    # a chunk added by graph expansion is context, not evidence: it does not add to its note
    with_context = [*cands[:2], _Cand("b9", 0.3, {"note_id": "b"}, "expand")]
    assert [c.chunk_id for c in best_per_note(with_context, 0.5)] == ["a1", "b1"]


def _text_cand(pid: str, text: str, lang: str, score: float = 1.0) -> _Cand:
    return _Cand(pid, score, {"chunk_id": pid, "note_id": pid, "text": text, "lang": lang}, "dense")


def test_feedback_query_weighs_the_top_chunks_by_rank_in_their_own_language() -> None:
    top = [_text_cand("a", "Paste images from the clipboard", "en"),
           _text_cand("b", "Die Bilder werden eingefügt; images", "de")]
    vec = feedback_query(top, terms=100)
    weight = dict(zip(vec.indices, vec.values, strict=True))
    assert list(vec.indices) == sorted(vec.indices) and max(vec.values) == pytest.approx(1.0)
    en = lexical_document("Paste images from the clipboard", "en")
    de = lexical_document("Die Bilder werden eingefügt; images", "de")
    # every term of the first chunk, stemmed as English; the second chunk's, stemmed as German
    assert set(en.indices) | set(de.indices) == set(weight)
    [bilder] = [i for i in de.indices if i not in en.indices and i in lexical_document("Bilder", "de").indices]
    [paste] = [i for i in en.indices if i in lexical_document("paste", "en").indices]
    # the same single occurrence counts half at rank 2 (BM25 tf parts differ only by chunk length)
    tf_bilder = dict(zip(de.indices, de.values, strict=True))[bilder]
    tf_paste = dict(zip(en.indices, en.values, strict=True))[paste]
    assert weight[bilder] / weight[paste] == pytest.approx((tf_bilder / 2) / tf_paste)
    # "images" is in both chunks, so it is the heaviest term; a cap keeps the heaviest only
    capped = feedback_query(top, terms=1)
    assert capped.values == (1.0,) and capped.indices[0] in en.indices and capped.indices[0] in de.indices
    assert feedback_query([_text_cand("x", "", "en"), _text_cand("y", "the and of", "en")], 20) == SparseVec((), ())
    assert feedback_query(top, terms=0) == SparseVec((), ())
    # texts read apart from the payloads (lists that carry no `text`) give the same query
    bare = [_Cand(c.chunk_id, c.score, {k: v for k, v in c.payload.items() if k != "text"}, c.via) for c in top]
    assert feedback_query(bare, 100, {c.chunk_id: c.payload["text"] for c in top}) == vec
    assert feedback_query(bare, 100) == SparseVec((), ())


def test_a_chunk_gone_between_the_lists_and_the_hits_is_left_out(searcher: Searcher,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A resident's import may delete a chunk after a search read its lists and before it reads the hits'
    payloads: that hit is dropped, never shown without its text."""
    query = "compost heap garden"
    # no feedback and no exact words: the only whole payloads this search reads are its hits'
    plain = Searcher(searcher.store, searcher.embedder, searcher.settings,
                     tuning=dataclasses.replace(searcher.tuning, feedback_weight=0.0, exact_words=False))
    before = plain.search(query, k=5)
    gone = before[0].chunk_id
    retrieve = searcher.store.retrieve
    monkeypatch.setattr(searcher.store, "retrieve", lambda collection, ids, **kw: [
        p for p in retrieve(collection, ids, **kw) if p.id != gone])
    after = plain.search(query, k=5)
    assert [h.chunk_id for h in after] == [h.chunk_id for h in before[1:]]
    assert all(h.text for h in after)
    notes = plain.search_notes(query, k=5)
    assert gone not in {c.chunk_id for n in notes for c in n.sections}
    assert [n.rank for n in notes] == list(range(1, len(notes) + 1))


def test_add_feedback_adds_rrf_terms_without_touching_the_input() -> None:
    first = [_Cand("a", 0.5, {"note_id": "a"}, "dense"), _Cand("b", 0.4, {"note_id": "b"}, "dense+lexical")]
    feedback = [_point("b", "en"), _point("c", "en")]
    out = add_feedback(first, feedback, rrf_k=5, weight=2.0)
    assert [(c.chunk_id, c.via) for c in out] == [("b", "dense+lexical+feedback"), ("a", "dense"), ("c", "feedback")]
    assert out[0].score == pytest.approx(0.4 + 2 / 6)
    assert out[2].score == pytest.approx(2 / 7)
    assert (first[1].score, first[1].via) == (0.4, "dense+lexical")  # inputs untouched


def test_fuse_searches_the_first_pass_words_and_fuses_that_list() -> None:
    dense = [ScoredPoint("a", 0.9, {"lang": "en", "text": "graph view of the notes"}),
             ScoredPoint("b", 0.8, {"lang": "en", "text": "daily notes template"}),
             ScoredPoint("c", 0.7, {"lang": "en", "text": "unrelated words"})]
    lists = CandidateLists(dense, [], {"de": 1.0, "en": 0.0})
    asked: list[SparseVec] = []

    def feedback(vec: SparseVec) -> list[ScoredPoint]:
        asked.append(vec)
        return [dense[2]]

    tuning = SearchTuning(rrf_k=5, feedback_weight=1.0, feedback_docs=2, feedback_terms=20)
    first = fuse("q", lists, dataclasses.replace(tuning, feedback_weight=0.0), feedback)
    assert asked == []  # weight 0: no feedback query at all
    assert [c.chunk_id for c in first] == ["a", "b", "c"]
    assert [c.chunk_id for c in fuse("q", lists, tuning)] == ["a", "b", "c"]  # no feedback search given
    fused = fuse("q", lists, tuning, feedback)
    assert asked == [feedback_query(first[:2], 20)]  # the words of the first-pass top 2, nothing else
    assert [c.chunk_id for c in fused] == ["c", "a", "b"]  # 1/8 + 1/6 beats 1/6 and 1/7
    assert fused[0].score == pytest.approx(1 / 8 + 1 / 6)


def test_hybrid_search_is_fuse_with_the_store_feedback_list(searcher: Searcher) -> None:
    query = "compost heap garden"
    pool = max(4 * 5, searcher.tuning.candidates)
    lists = searcher.candidate_lists(query, pool)
    expected = fuse(query, lists, searcher.tuning, searcher.feedback_search(pool))
    hits = searcher.search(query, k=5)
    assert [(h.chunk_id, h.score, h.via) for h in hits] == [(c.chunk_id, pytest.approx(c.score), c.via)
                                                            for c in expected[:5]]
    assert any(h.via.endswith("feedback") for h in hits)
    assert expected != fuse(query, lists, searcher.tuning)  # the feedback list changed something
    # the lists the search read carried a few fields; its hits carry every one (issue 25)
    whole = {p.id: p.payload for p in searcher.store.retrieve("chunks", [h.chunk_id for h in hits])}
    assert [(h.text, h.path, h.section_path, h.line_start) for h in hits] == [
        (whole[h.chunk_id]["text"], whole[h.chunk_id]["path"], whole[h.chunk_id]["section_path"],
         whole[h.chunk_id]["line_start"]) for h in hits]
    off = Searcher(searcher.store, searcher.embedder, searcher.settings,
                   tuning=dataclasses.replace(searcher.tuning, feedback_weight=0.0))
    assert all("feedback" not in h.via for h in off.search(query, k=5))


def test_lexical_strict_is_the_query_every_bm25_search_sends(tmp_path: Path) -> None:
    """`Settings.lexical_strict` reaches the BM25 list of every mode: the German stopword "als" is
    a rare English word (stemmed "al", as in "et al.") in the plain union and no term when strict."""
    vault = write_vault(tmp_path / "vault", {"paper.md": "# Paper\n\nSmith et al. wrote about compost heaps.\n"})
    strict = _settings(tmp_path / "store")
    assert strict.lexical_strict  # the default
    embedder = FakeEmbedder()
    store = _open(vault, strict, embedder)
    try:
        plain = dataclasses.replace(strict, lexical_strict=False)
        assert [h.note_id for h in Searcher(store, embedder, plain).search("als", mode="lexical")] == ["paper"]
        assert Searcher(store, embedder, strict).search("als", mode="lexical") == []
        assert Searcher(store, embedder, plain).candidate_lists("als", 10).lexical
        assert not Searcher(store, embedder, strict).candidate_lists("als", 10).lexical
        engine = SearchTuning(language_fusion=False)
        vias = {h.via for h in Searcher(store, embedder, strict, tuning=engine).search("als compost")}
        assert vias == {"dense+lexical"}  # the engine's own fusion gets the strict query too (it still matches)
    finally:
        store.close()


def test_engine_fusion_gives_the_same_notes(searcher: Searcher) -> None:
    engine = Searcher(searcher.store, searcher.embedder, searcher.settings,
                      tuning=SearchTuning(language_fusion=False))
    a = searcher.search("compost heap", k=3, by_note=True)
    b = engine.search("compost heap", k=3, by_note=True)
    assert a[0].note_id == b[0].note_id == "garden"


# -- context (R23) --------------------------------------------------------------------------------


class WordCounter:
    """Tokens = whitespace-separated words: easy to reason about in assertions."""

    def count(self, text: str) -> int:
        return len(text.split())


FULL = "Alpha one two three.\n\nBeta four five six.\n\nGamma seven eight nine.\n\nDelta ten eleven twelve.\n"


def _hit(rank: int, note: str, start: int, end: int, line: int, full: str = FULL) -> Hit:
    return Hit(rank=rank, score=1.0 / rank, note_id=note, path=f"{note}.md", title=note.title(),
               chunk_id=f"{note}#c{start:03d}", section_path="/", section_title="", text=full[start:end].strip(),
               char_start=start, char_end=end, line_start=line, line_end=line + full[start:end].strip().count("\n"),
               lang="en", via="dense")


def _span(word: str) -> tuple[int, int]:
    start = FULL.index(word)
    return start, FULL.index("\n", start)


def test_context_merges_overlapping_and_adjacent_hits_exactly() -> None:
    a, b, d = _span("Alpha"), _span("Beta"), _span("Delta")
    hits = [
        _hit(1, "n", b[0], b[1], 3),
        _hit(2, "n", a[0], a[1], 1),  # adjacent to Beta: only whitespace between
        _hit(3, "n", d[0], d[1], 7),  # Gamma lies between: not adjacent
        _hit(4, "n", a[0] + 6, a[1], 1),  # contained in Alpha
    ]
    ctx = build_context(hits, 1000, WordCounter(), fulltexts={"n": FULL})
    assert len(ctx.citations) == 2
    first, second = ctx.citations
    assert (first.char_start, first.char_end) == (a[0], b[1])
    assert (first.line_start, first.line_end) == (1, 3)
    assert set(first.chunk_ids) == {hits[0].chunk_id, hits[1].chunk_id, hits[3].chunk_id}
    assert FULL[a[0]:b[1]] in ctx.text  # cut exactly from the fulltext, blank line kept
    assert (second.char_start, second.char_end, second.line_start) == (d[0], d[1], 7)
    assert ctx.text.index("Alpha") < ctx.text.index("Delta")  # position order within the note
    assert "Gamma" not in ctx.text
    assert ctx.tokens == WordCounter().count(ctx.text)


def test_context_orders_notes_by_relevance_and_keeps_the_budget() -> None:
    other = "Zeta words here.\n"
    hits = [_hit(1, "m", 0, len(other) - 1, 5, other), _hit(2, "n", *_span("Gamma"), 5),
            _hit(3, "n", *_span("Alpha"), 1)]
    ctx = build_context(hits, 1000, WordCounter(), fulltexts={"n": FULL, "m": other})
    assert [c.note_id for c in ctx.citations] == ["m", "n", "n"]
    assert [c.n for c in ctx.citations] == [1, 2, 3]
    assert ctx.text.startswith("[1] M — m.md (lines 5–5)\nZeta words here.")
    assert ctx.text.index("Alpha") < ctx.text.index("Gamma")
    for budget in (0, 5, 12, 20, 30, 1000):
        small = build_context(hits, budget, WordCounter(), fulltexts={"n": FULL, "m": other})
        assert small.tokens <= budget
        assert WordCounter().count(small.text) == small.tokens


def test_context_truncates_a_long_passage_at_a_boundary() -> None:
    long = "\n".join(f"Line {i} has five words." for i in range(1, 41)) + "\n"
    hit = _hit(1, "n", 0, len(long) - 1, 1, long)
    ctx = build_context([hit], 60, WordCounter(), fulltexts={"n": long})
    assert ctx.tokens <= 60
    (cit,) = ctx.citations
    assert cit.truncated
    body = ctx.text.split("\n", 1)[1]
    assert body.endswith("…")
    kept = body.removesuffix(" …")
    assert long.startswith(kept)  # a prefix of the passage, cut at a line end
    assert kept.endswith("words.")
    assert cit.line_end == 1 + kept.count("\n")


@given(st.integers(12, 80), st.sampled_from(["```", "~~~~", "```python"]), st.integers(0, 6))
@hyp_settings(max_examples=60, deadline=None)
def test_a_passage_cut_inside_a_code_block_closes_its_fence(budget: int, opener: str, prose: int) -> None:
    """A cut inside a fenced block left the fence open, so all that followed in the prompt read as
    code: every fence the context opens it closes, and the cut marker is outside the block."""
    code = "\n".join(f"    call_{i}(arg, other, third)" for i in range(30))
    fence = opener.rstrip("python")
    long = " ".join(["Prose word"] * prose) + f"\n\n{opener}\n{code}\n{fence}\n\nAfter the block.\n"
    ctx = build_context([_hit(1, "n", 0, len(long) - 1, 1, long)], budget, WordCounter(), fulltexts={"n": long})
    assert ctx.tokens <= budget
    fences = [line for line in ctx.text.splitlines() if line.strip().startswith(("```", "~~~"))]
    assert len(fences) % 2 == 0, ctx.text
    if ctx.citations and ctx.citations[0].truncated:
        assert ctx.text.endswith("…") and not ctx.text.endswith(f"{fence} …")


def test_context_without_fulltext_keeps_hits_separate() -> None:
    a, b = _span("Alpha"), _span("Beta")
    ctx = build_context([_hit(1, "n", *a, 1), _hit(2, "n", *b, 3)], 1000, WordCounter())
    assert len(ctx.citations) == 2


def _chunk_hit(chunk: Chunk, rank: int, via: str = "dense") -> Hit:
    return Hit(rank=rank, score=1.0 / rank, note_id=chunk.note_id, path=chunk.path, title=chunk.note_title,
               chunk_id=chunk.chunk_id, section_path=chunk.section_path, section_title=chunk.section_title,
               text=chunk.text, char_start=chunk.char_start, char_end=chunk.char_end, line_start=chunk.line_start,
               line_end=chunk.line_end, lang=chunk.lang, via=via)


HEADER = re.compile(r"^\[(\d+)\] .*$", re.M)


def _passages(ctx: Context) -> dict[str, str]:
    """Header line -> the passage below it."""
    heads = list(HEADER.finditer(ctx.text))
    ends = [m.start() for m in heads[1:]] + [len(ctx.text)]
    return {m.group(0): ctx.text[m.end():end] for m, end in zip(heads, ends, strict=True)}


def test_a_passage_names_the_section_it_quotes() -> None:
    """Issue 28 (foam-docs FAQ, "Does Foam collect any data?"): the hit and the chunk before it
    (another section, added by expansion) became one passage under the first section's name. A
    passage ends at its section's end, so each header names the section it quotes, and the hit's
    section gets the budget first."""
    rel = "user/frequently-asked-questions.md"
    note = read_note(corpus("foam-docs/vault") / rel, rel, Settings())
    chunks = {c.section_title: c for c in chunk_note(note, Settings())}
    asked = chunks["Does Foam collect any data?"]
    before = chunks["I want to publish the graph view to GitHub pages or Vercel"]
    assert before.char_end < asked.char_start and not note.fulltext[before.char_end:asked.char_start].strip()
    hits = [_chunk_hit(asked, 1), _chunk_hit(before, 2, via="expand")]
    ctx = build_context(hits, 10_000, WordCounter(), fulltexts={note.note_id: note.fulltext})
    passages = _passages(ctx)
    data = next(head for head, text in passages.items() if "Foam collects anonymous usage data" in text)
    assert data.endswith("› Does Foam collect any data? (lines 26–39)")
    assert "foam-gatsby" not in passages[data]
    assert [c.sections for c in ctx.citations] == [(before.section_title,), (asked.section_title,)]
    fits_one = WordCounter().count(note.fulltext[asked.char_start:asked.char_end]) + 20
    small = build_context(hits, fits_one, WordCounter(), fulltexts={note.note_id: note.fulltext})
    assert "No note content, file names, or personal information is ever collected." in small.text
    assert [c.section_title for c in small.citations] == ["Does Foam collect any data?"]


@given(st.lists(st.sampled_from(["", "A", "B"]), min_size=4, max_size=4), st.permutations([1, 2, 3, 4]))
@hyp_settings(max_examples=80, deadline=None)
def test_every_passage_quotes_one_section_and_its_header_names_it(sections: list[str], ranks: list[int]) -> None:
    """Touching hits merge within a section and never across one: as many passages as runs of one
    section, each header naming its section."""
    spans = [_span(word) for word in ("Alpha", "Beta", "Gamma", "Delta")]
    hits = [dataclasses.replace(_hit(rank, "n", *span, 1 + 2 * i), section_title=title,
                                section_path=f"/{title}" if title else "/")
            for i, (span, title, rank) in enumerate(zip(spans, sections, ranks, strict=True))]
    ctx = build_context(hits, 1000, WordCounter(), fulltexts={"n": FULL})
    runs = [title for i, title in enumerate(sections) if i == 0 or sections[i - 1] != title]
    assert [c.sections for c in ctx.citations] == [(t,) if t else () for t in runs]
    for head, cit in zip(_passages(ctx), ctx.citations, strict=True):
        assert head.endswith(f"› {cit.sections[0]} (lines {cit.line_start}–{cit.line_end})" if cit.sections
                             else f"n.md (lines {cit.line_start}–{cit.line_end})")


def test_searcher_context_reads_fulltext_from_the_store(searcher: Searcher) -> None:
    hits = searcher.search("tomatoes stake compost watering", k=10, mode="lexical", filters=SearchFilters(
        note_id=("garden",)))
    ctx = searcher.build_context(hits, 10_000, WordCounter())
    full = note_fulltexts(searcher.store, ["garden"])["garden"]
    for cit in ctx.citations:
        assert cit.path == "projects/garden.md"
        assert full[cit.char_start:cit.char_end].strip() in ctx.text
    assert sum(c.char_end - c.char_start for c in ctx.citations) <= len(full)


# -- real model -----------------------------------------------------------------------------------


def test_german_query_finds_english_note(tmp_path: Path) -> None:
    notes = {
        "coffee.md": NOTES["en/coffee.md"],
        "garden.md": NOTES["projects/garden.md"],
        "steuer.md": "---\ntitle: Steuererklärung\nlang: de\n---\n# Steuererklärung\n\nDie Steuererklärung "
                     "muss bis Ende Juli beim Finanzamt sein. Belege für Handwerkerleistungen sammeln.\n",
    }
    vault = write_vault(tmp_path / "vault", notes)
    settings = _settings(tmp_path / "store")
    embedder = UseEmbedder(threads=1)
    store = _open(vault, settings, embedder)
    try:
        searcher = Searcher(store, embedder, settings)
        for mode in ("dense", "hybrid"):
            hits = searcher.search("Wie mahle ich Kaffeebohnen für den Filterkaffee?", k=3, mode=mode,  # type: ignore[arg-type]
                                   by_note=True)
            assert hits[0].note_id == "coffee", (mode, [(h.note_id, h.score) for h in hits])
        hits = searcher.search("Wann muss die Steuer abgegeben werden?", k=1, by_note=True)
        assert hits[0].note_id == "steuer"
    finally:
        store.close()


# -- the e5 quality tier as a third list --------------------------------------------------------


class _CountingE5(FakeEmbedder):
    """The fake quality tier, counting query embeddings: a query must embed with it once."""

    def __init__(self) -> None:
        super().__init__(dim=16, model_id="fake-e5@1")
        self.queries = 0

    def embed_query(self, text: str) -> np.ndarray:  # type: ignore[override]
        self.queries += 1
        return super().embed_query(text)


@pytest.fixture(scope="module")
def e5_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Settings]]:
    root = tmp_path_factory.mktemp("search-e5")
    vault = write_vault(root / "vault", NOTES)
    settings = _settings(root / "store")
    _import(vault, settings, FakeEmbedder(), FakeEmbedder(dim=16, model_id="fake-e5@1"))
    store = open_store(vault, settings)
    yield store, settings
    store.close()


def test_rrf_fuse_adds_the_e5_list_with_its_weight() -> None:
    dense = [_point("a", "en"), _point("b", "en")]
    quality = [_point("b", "en"), _point("d", "en")]
    lexical = [_point("b", "en")]
    fused = {c.chunk_id: c for c in rrf_fuse(dense, lexical, "en", rrf_k=10, quality=quality, dense_weight=0.5,
                                             quality_weight=2.0)}
    assert fused["a"].score == pytest.approx(0.5 / 11)
    assert fused["b"].score == pytest.approx(0.5 / 12 + 2 / 11 + 1 / 11)
    assert fused["d"].score == pytest.approx(2 / 12)
    assert (fused["a"].via, fused["b"].via, fused["d"].via) == ("dense", "dense+e5+lexical", "e5")


def test_fuse_without_an_e5_list_is_the_two_list_fusion() -> None:
    dense = [_point("a", "en"), _point("b", "de")]
    lexical = [_point("b", "de"), _point("c", "en")]
    plain = CandidateLists(dense, lexical, {"en": 0.7, "de": 0.3})
    before = [(c.chunk_id, c.score, c.via) for c in fuse("q", plain, SearchTuning(e5_weight=0.0))]
    tuned = SearchTuning(e5_weight=2.0, use_weight_with_e5=0.5)  # weights that must not matter without the list
    assert [(c.chunk_id, c.score, c.via) for c in fuse("q", plain, tuned)] == before
    with_e5 = dataclasses.replace(plain, quality=[_point("c", "en")])
    assert [(c.chunk_id, c.score, c.via) for c in fuse("q", with_e5, SearchTuning(e5_weight=0.0))] == before
    assert {c.chunk_id: c.via for c in fuse("q", with_e5, tuned)}["c"] == "e5+lexical"


def test_hybrid_fuses_the_e5_list_when_the_store_has_it(e5_store: tuple[Store, Settings]) -> None:
    store, settings = e5_store
    e5 = _CountingE5()
    searcher = Searcher(store, FakeEmbedder(), settings, quality=e5)
    assert searcher.quality_embedder() is e5
    lists = searcher.candidate_lists("tomatoes sun stake plant", 50)
    assert lists.quality and {p.id for p in lists.quality} <= {p.id for p in store.scroll("chunks")}
    e5.queries = 0
    hits = searcher.search("tomatoes sun stake plant", k=5)
    assert e5.queries == 1  # one e5 query embedding per search
    assert any("e5" in h.via for h in hits)
    assert hits[0].note_id == "garden"
    expected = fuse("tomatoes sun stake plant", lists, searcher.tuning, searcher.feedback_search(50))[:5]
    assert [(h.chunk_id, h.score) for h in hits] == [(c.chunk_id, pytest.approx(c.score)) for c in expected]
    # dense and lexical modes, and a zero e5 weight, leave the tier alone
    e5.queries = 0
    searcher.search("tomatoes", mode="dense")
    searcher.search("tomatoes", mode="lexical")
    off = Searcher(store, FakeEmbedder(), settings, quality=e5, tuning=SearchTuning(e5_weight=0.0))
    assert all("e5" not in h.via for h in off.search("tomatoes sun stake plant", k=5))
    assert e5.queries == 0


def test_chunks_without_e5_are_only_missing_from_the_e5_list(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "vault", NOTES)
    settings = _settings(tmp_path / "store")
    _import(vault, settings, FakeEmbedder(), FakeEmbedder(dim=16, model_id="fake-e5@1"))
    with open_store(vault, settings) as store:
        tea = [p for p in store.scroll("chunks", with_vectors=True) if p.payload.get("note_id") == "tea"]
        store.upsert("chunks", [PointRecord(p.id, p.payload, {DENSE: p.vectors[DENSE]}, p.sparse) for p in tea])
        searcher = Searcher(store, FakeEmbedder(), settings, quality=FakeEmbedder(dim=16, model_id="fake-e5@1"))
        lists = searcher.candidate_lists("Grüner Tee Wasser", 50)
        assert lists.quality and not {p.id for p in tea} & {p.id for p in lists.quality}
        hits = searcher.search("Grüner Tee Wasser", k=3)
        assert hits[0].note_id == "tea" and "e5" not in hits[0].via


def test_search_works_without_the_quality_tier(searcher: Searcher, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_model(name: str, threads: int = 0) -> Embedder:
        raise AssertionError("a store without e5 vectors must not load the e5 model")

    auto = Searcher(searcher.store, searcher.embedder, searcher.settings, quality=lambda: no_model("e5"))
    e5 = _CountingE5()
    given = Searcher(searcher.store, searcher.embedder, searcher.settings, quality=e5)
    for s in (auto, given):
        assert s.quality_embedder() is None
        hits = s.search("tomatoes sun stake plant", k=5)
        assert hits[0].note_id == "garden"
        assert [(h.chunk_id, h.score, h.via) for h in hits] == [
            (h.chunk_id, h.score, h.via) for h in searcher.search("tomatoes sun stake plant", k=5)]
    assert e5.queries == 0


def test_e5_model_is_loaded_once_and_must_match_the_store(e5_store: tuple[Store, Settings],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store, settings = e5_store
    made: list[str] = []

    def fake_make(name: str, threads: int = 0) -> Embedder:
        made.append(name)
        return FakeEmbedder(dim=16, model_id="fake-e5@1")

    searcher = Searcher(store, FakeEmbedder(), settings, quality=lambda: fake_make("e5"))
    for _ in range(3):
        assert any("e5" in h.via for h in searcher.search("compost heap", k=5))
    assert made == ["e5"]
    other = Searcher(store, FakeEmbedder(), settings, quality=FakeEmbedder(dim=16, model_id="other-e5@2"))
    assert other.quality_embedder() is None
    assert all("e5" not in h.via for h in other.search("compost heap", k=5))


# -- the title/alias list ---------------------------------------------------------------------------


def _note_cand(chunk_id: str, note_id: str, score: float) -> _Cand:
    return _Cand(chunk_id, score, {"chunk_id": chunk_id, "note_id": note_id}, "dense")


def test_the_title_list_lifts_the_named_notes_best_chunk_only() -> None:
    cands = [_note_cand("a#1", "a", 0.30), _note_cand("b#1", "b", 0.20), _note_cand("b#2", "b", 0.10)]
    named = [NamedNote("b", 1, 1.0), NamedNote("missing", 1, 1.0)]
    out = {c.chunk_id: c for c in add_title_list(cands, named, rrf_k=5, weight=1.0)}
    assert out["b#1"].score == pytest.approx(0.20 + 1 / 6)
    assert (out["b#2"].score, out["a#1"].score) == (0.10, 0.30)
    assert out["b#1"].via == "dense+title" and out["b#2"].via == "dense"
    assert set(out) == {"a#1", "b#1", "b#2"}  # a named note no content list found is not brought in
    assert cands[1].score == 0.20  # inputs unchanged


def test_a_name_many_notes_share_counts_a_share_for_each() -> None:
    """Five paragraphs under one article title: the title says which article, not which paragraph."""
    cands = [_note_cand(f"p{i}#1", f"p{i}", 0.30 - 0.01 * i) for i in range(5)] + [_note_cand("x#1", "x", 0.05)]
    shared = [NamedNote(f"p{i}", 2, 1 / 5) for i in range(5)]
    out = add_title_list(cands, shared, rrf_k=10, weight=1.0)
    assert [c.chunk_id for c in out] == [c.chunk_id for c in cands]  # the group keeps its content order
    assert out[0].score == pytest.approx(0.30 + 1 / 5 / 11)
    alone = add_title_list(cands, [NamedNote("x", 1, 1.0)], rrf_k=10, weight=1.0)
    assert alone[-1].chunk_id == "x#1" and alone[-1].score == pytest.approx(0.05 + 1 / 11)


@given(scores=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8), share=st.floats(0.0, 1.0),
       weight=st.floats(0.0, 4.0), target=st.integers(0, 7))
def test_the_title_list_adds_at_most_one_term_per_named_note(scores: list[float], share: float, weight: float,
                                                             target: int) -> None:
    cands = [_note_cand(f"n{i % 3}#{i}", f"n{i % 3}", s) for i, s in enumerate(scores)]
    note = f"n{target % 3}"
    before = sum(c.score for c in cands)
    out = add_title_list(cands, [NamedNote(note, 1, share)], rrf_k=10, weight=weight)
    gained = sum(c.score for c in out) - before
    present = any(c.payload["note_id"] == note for c in cands)
    assert gained == pytest.approx(weight * share / 11 if present else 0.0, abs=1e-9)
    assert [c.score for c in out] == sorted((c.score for c in out), reverse=True)
    assert sorted(c.chunk_id for c in out) == sorted(c.chunk_id for c in cands)


def test_fuse_adds_the_title_list_only_with_a_weight() -> None:
    dense = [ScoredPoint("a#1", 0.9, {"chunk_id": "a#1", "note_id": "a", "lang": "en"}),
             ScoredPoint("b#1", 0.8, {"chunk_id": "b#1", "note_id": "b", "lang": "en"})]
    lists = CandidateLists(dense, (), {"de": 1.0, "en": 0.0}, titles=[NamedNote("b", 1, 1.0)])
    off = SearchTuning(title_weight=0.0, title_weight_same=0.0)
    assert [c.chunk_id for c in fuse("q", lists, off)] == ["a#1", "b#1"]
    assert [c.chunk_id for c in fuse("q", lists, SearchTuning())] == ["b#1", "a#1"]


def test_a_name_counts_across_languages_and_not_where_bm25_already_saw_it() -> None:
    """The default weighs a name match by 1 - P(query in the note's language): full weight for an
    English note named in a German question, none in the question's own language (BM25 matched the
    words there already), and half for a coin-toss keyword query."""
    cands = [_note_cand("a#1", "a", 0.30), _note_cand("b#1", "b", 0.25)]
    cands[1].payload["lang"] = "en"
    named = [NamedNote("b", 1, 1.0)]
    t = SearchTuning()

    def gain(langs: dict[str, float]) -> float:
        out = add_title_list(cands, named, rrf_k=10, weight=t.title_weight, weight_same=t.title_weight_same,
                             query_langs=langs)
        return next(c.score for c in out if c.chunk_id == "b#1") - 0.25

    assert gain({"de": 1.0, "en": 0.0}) == pytest.approx(1 / 11)
    assert gain({"de": 0.0, "en": 1.0}) == pytest.approx(0.0)
    assert gain({"de": 0.5, "en": 0.5}) == pytest.approx(0.5 / 11)
    assert gain({}) == pytest.approx(0.0)  # no odds: the same-language weight, as for BM25


def test_the_searcher_matches_titles_and_aliases_of_the_store(tmp_path: Path) -> None:
    notes = {"a.md": "---\ntitle: Chunking\naliases: [Chunking-Strategie]\n---\n# Chunking\n\nText splitting.\n",
             "b.md": "---\ntitle: Notizen\n---\n# Notizen\n\nÜber Notizen.\n"}
    vault = write_vault(tmp_path / "vault", notes)
    settings = _settings(tmp_path / "store")
    store = _open(vault, settings, FakeEmbedder())
    try:
        searcher = Searcher(store, FakeEmbedder(), settings, tuning=SearchTuning(title_weight=1.0))
        by_title = {p.payload["title"]: p.id for p in store.scroll("notes")}
        assert [m.note_id for m in searcher.title_matches("Wie funktioniert die chunking-strategie?")] == \
            [by_title["Chunking"]]
        assert [m.note_id for m in searcher.title_matches("Chunking von Notizen")] == \
            [by_title["Chunking"], by_title["Notizen"]]
        hits = searcher.search("Wie funktioniert die Chunking-Strategie?", k=2, by_note=True)
        assert hits[0].note_id == by_title["Chunking"] and "title" in hits[0].via
    finally:
        store.close()


def test_a_tag_filter_finds_its_nested_tags_as_obsidian_does(tmp_path: Path) -> None:
    """`--tag topic` found nothing tagged `topic/chunking`; Obsidian's tag search finds nested tags,
    ignoring case. A tag never matches a mere prefix of another (`top` is not `topic`)."""
    vault = write_vault(tmp_path / "vault", {
        "a.md": "---\ntags: [topic/chunking]\n---\n# A\n\ncompost heaps and soil\n",
        "b.md": "---\ntags: [Topic]\n---\n# B\n\ncompost heaps and soil\n",
        "c.md": "---\ntags: [topical, other/topic]\n---\n# C\n\ncompost heaps and soil\n",
    })
    settings = _settings(tmp_path / "store")
    embedder = FakeEmbedder()
    store = _open(vault, settings, embedder)
    try:
        searcher = Searcher(store, embedder, settings)

        def found(*tags: str) -> set[str]:
            return {h.note_id for h in searcher.search("compost", k=10, filters=SearchFilters(tags=tags))}

        assert found("topic") == {"a", "b"}
        assert found("#topic") == {"a", "b"}
        assert found("topic/chunking") == {"a"}
        assert found("top") == set()
        assert found("topic", "other") == set()  # all tags must hold, each with its nested ones
        assert found("other") == {"c"}
    finally:
        store.close()


def test_nested_tags_keeps_the_tag_first_and_only_whole_segments() -> None:
    from mindnet.search.filters import nested_tags

    assert nested_tags("topic", ["topic/b", "topical", "Topic", "x/topic", "topic/a/deep"]) == (
        "topic", "Topic", "topic/a/deep", "topic/b")
    assert nested_tags("gone", ["topic"]) == ("gone",)


def test_a_language_filter_outside_the_vault_languages_is_an_error(searcher: Searcher) -> None:
    """`--lang fr` in a de/en vault answered "no results", as if French notes had been searched."""
    with pytest.raises(MindnetError, match=r"^lang 'fr' is not a vault language \(de, en\)"):
        searcher.search("compost", filters=SearchFilters(lang="fr"))
    assert searcher.search("compost", filters=SearchFilters(lang="en"))


def test_a_number_is_rare_only_where_few_chunks_hold_it(tmp_path: Path) -> None:
    """The exact-words rule counts a number's chunks too: the full-text index does not index numbers, and every
    number counted as held by none, so "404" in every note pinned its lexical top chunk as an exact word."""
    notes = {f"n{i}.md": f"# Log {i}\n\nThe server answered 404 for page {i} and logged Zebrafisch{i}.\n"
             for i in range(12)}
    notes["code.md"] = "# Installer\n\nThe installer stopped with error 80070005 on the second run.\n"
    vault = write_vault(tmp_path / "vault", notes)
    settings = _settings(tmp_path / "store")
    _import(vault, settings, FakeEmbedder())
    with open_store(vault, settings) as store:
        searcher = Searcher(store, FakeEmbedder(), settings)
        for query, rare in (("404", None), ("80070005", ("80070005",)), ("Zebrafisch3", ("Zebrafisch3",)),
                            ("page 80070005 404", ("80070005",))):
            found = searcher._rare(query, searcher._lexical(query, 20, None))
            assert (found.words if found else None) == rare, query
