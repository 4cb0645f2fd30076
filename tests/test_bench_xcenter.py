"""The cross-lingual dense candidates of `bench/xcenter.py` (issue 15).

Their figures only mean something if each candidate is what its docstring says: the in-memory
top list is the exact cosine ranking, a per-language offset never reorders a language within
itself, a knob at its neutral value is the plain dense list, and the stopword-free query keeps
every content word.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import xcenter  # bench/xcenter.py: bench is a folder of scripts, not a package

DIM = 8


def _view(seed: int, n: int, langs: tuple[str, ...]) -> xcenter.StoreView:
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lang = np.asarray([langs[i % len(langs)] for i in range(n)])
    means = {code: vecs[lang == code].mean(axis=0) for code in langs}
    counts = {code: int((lang == code).sum()) for code in langs}
    return xcenter.StoreView([f"c{i}" for i in range(n)], [{"lang": str(x)} for x in lang], vecs, lang, means,
                             counts)


def _query(seed: int) -> np.ndarray:
    q = np.random.default_rng(seed + 1).normal(size=DIM).astype(np.float32)
    return q / np.linalg.norm(q)


views = st.builds(_view, st.integers(0, 10_000), st.integers(2, 300), st.sampled_from((("de", "en"), ("en",))))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=1, max_size=400), st.integers(1, 200))
def test_top_is_the_full_sort_cut(scores: list[float], n: int) -> None:
    arr = np.asarray(scores, dtype=np.float32)
    rows, got = xcenter._top(arr, n)
    assert len(rows) == min(n, len(arr))
    assert list(got) == sorted(arr.tolist(), reverse=True)[: len(rows)]
    assert np.array_equal(arr[rows], got)


@settings(max_examples=40, deadline=None)
@given(views, st.integers(0, 100), st.sampled_from((0.5, 1.0)))
def test_offset_keeps_each_language_in_its_order(view: xcenter.StoreView, seed: int, alpha: float) -> None:
    ctx = xcenter.Ctx(view, {}, {})
    q = _query(seed)
    shifted, _ = xcenter.offset(alpha, "store")(q, {"de": 0.5, "en": 0.5}, ctx)
    all_rows, _ = xcenter.base(q, {}, ctx)
    for lang in set(view.langs.tolist()):
        before = [int(i) for i in all_rows if view.langs[i] == lang]
        after = [int(i) for i in shifted if view.langs[i] == lang]
        # Both lists are cut at the pool size, so compare the chunks both hold.
        common = [i for i in after if i in set(before)]
        assert common == [i for i in before if i in set(common)]


@settings(max_examples=40, deadline=None)
@given(views, st.integers(0, 100))
def test_neutral_knobs_are_the_plain_dense_list(view: xcenter.StoreView, seed: int) -> None:
    ctx = xcenter.Ctx(view, {}, {})
    q = _query(seed)
    plain, plain_scores = xcenter.base(q, {"en": 1.0}, ctx)
    for ranker in (xcenter.center(0.0, "store"), xcenter.shift(0.0, "store"), xcenter.csls(0.0, "centroid")):
        _, scores = ranker(q, {"en": 1.0}, ctx)
        assert np.allclose(scores, plain_scores, atol=1e-5)
    # The query without stopwords meets only chunks of another language than the question's.
    if set(view.langs.tolist()) == {"en"}:
        rows, _ = xcenter.Requery(xcenter.strip_stopwords, 1.0, True).rank(q, _query(seed + 7), {"en": 1.0}, ctx)
        assert list(rows) == list(plain)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(("Wie", "kann", "ich", "die", "Notiz", "PDF", "exportieren", "how", "do", "the",
                                 "link", "heading", "Box<T>", "?", "--allow-writes")), min_size=1, max_size=10))
def test_stripped_query_keeps_every_content_word(words: list[str]) -> None:
    text = " ".join(words)
    out = xcenter.strip_stopwords(text, ("de", "en"))
    assert out.strip()
    for word in ("Notiz", "PDF", "exportieren", "link", "heading", "Box<T>", "--allow-writes"):
        if word in words:
            assert word in out
    if any(w in words for w in ("Notiz", "PDF", "link")):
        for stop in ("die", "the", "ich"):
            assert stop not in out.split()


def test_shipped_means_leave_the_cells_family_out() -> None:
    views = {"foam": _view(1, 20, ("en",)), "rust-de": _view(2, 20, ("de",)), "xquad-en": _view(3, 20, ("en",))}
    pooled = xcenter.pooled_means(views, "foam")
    assert set(pooled) == {"de", "en"}
    assert np.allclose(pooled["en"], views["xquad-en"].vecs.mean(axis=0), atol=1e-6)
    assert "de" not in xcenter.pooled_means(views, "rust")
