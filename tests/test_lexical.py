"""The BM25 query and document vectors of `mindnet.store.lexical` (R22, issue 15)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import qdrant_edge as qe
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet import sync
from mindnet.api import Index
from mindnet.config import LEXICAL_SHAPES, Settings, load_settings
from mindnet.store import BM25_SHAPES, bm25_shape, lexical_document, lexical_query, shape_fingerprint
from mindnet.store.lexical import CHUNK_BM25, MEASURED_BM25, PLAIN_BM25, Bm25Shape

_TEXT = st.text(st.sampled_from("abcdeäöüßxyz ÄÖÜ_-:.,?!'’/()<>0123\n"), max_size=60)


def _terms(text: str, lang: str) -> set[int]:
    return set(lexical_document(text, lang).indices)


def test_a_stopword_of_any_language_is_no_query_term() -> None:
    # Under English rules `als` is a word (stemmed to `al`, as in "et al."); it is a German stopword.
    assert lexical_query("als", ["en"], strict=True).indices
    assert lexical_query("als", ["de", "en"]).indices  # the plain union keeps it
    assert lexical_query("als", ["de", "en"], strict=True).indices == ()
    assert (lexical_query("Eine Notiz als PDF", ["de", "en"], strict=True).indices
            == lexical_query("Notiz PDF", ["de", "en"], strict=True).indices)
    # A word that is a stopword in neither language keeps both forms.
    both = set(lexical_query("Variablen", ["de", "en"], strict=True).indices)
    assert _terms("Variablen", "de") | _terms("Variablen", "en") <= both


def test_an_inflected_loanword_finds_the_other_languages_stem() -> None:
    # German `Iteratoren` -> German stem `iterator` -> English rules -> the stem of "iterators".
    assert _terms("iterators", "en") <= set(lexical_query("Iteratoren", ["de", "en"], strict=True).indices)
    assert not _terms("iterators", "en") & set(lexical_query("Iteratoren", ["de"], strict=True).indices)
    assert not _terms("iterators", "en") & set(lexical_query("Iteratoren", ["de", "en"]).indices)
    assert _terms("installing", "en") <= set(lexical_query("installieren", ["de", "en"], strict=True).indices)


def test_a_language_without_a_stemmer_is_neutral() -> None:
    # `xx` has neither an Edge language nor a Snowball stemmer: words pass as they are.
    assert set(lexical_query("Kot", ["xx"], strict=True).indices) == _terms("kot", "xx")


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_one_language_query_is_the_engines_query(text: str) -> None:
    """With one language there is nothing to cross: the words the query splits are the engine's."""
    for lang in ("de", "en"):
        engine = set(qe.Bm25(qe.Bm25Config(language=lang)).embed_query(text).indices)
        assert set(lexical_query(text, [lang]).indices) == engine
        assert set(lexical_query(text, [lang], strict=True).indices) == engine


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_query_terms_do_not_depend_on_the_language_order(text: str) -> None:
    for strict in (False, True):
        both = lexical_query(text, ["de", "en"], strict=strict)
        assert both == lexical_query(text, ["en", "de"], strict=strict)
        assert all(v == 1.0 for v in both.values)
        assert list(both.indices) == sorted(set(both.indices))


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_strict_query_drops_only_stopwords_and_adds_only_stems(text: str) -> None:
    """Strict leaves out only words that some language stops; every other word keeps its plain terms."""
    strict = set(lexical_query(text, ["de", "en"], strict=True).indices)
    for word in re.findall(r"[^\W_]+", text):
        if all(lexical_query(word, [lang]).indices for lang in ("de", "en")):
            assert set(lexical_query(word, ["de", "en"]).indices) <= strict, word
        else:
            assert not set(lexical_query(word, ["de", "en"], strict=True).indices)


def test_measured_shape_lets_a_repeated_term_count() -> None:
    """In a ~60-token chunk, naming a term three times weighs clearly more than naming it once:
    with the engine's 256-token average the term saturated at its first occurrence."""
    filler = " ".join(f"wort{i}" for i in range(56))

    def ratio(shape: Bm25Shape) -> float:
        [term] = _terms("zebra", "en")
        once = lexical_document(f"zebra {filler}", "en", shape)
        thrice = lexical_document(f"zebra zebra zebra {filler[:-14]}", "en", shape)
        weight = {d: dict(zip(v.indices, v.values, strict=True))[term] for d, v in (("1", once), ("3", thrice))}
        return weight["3"] / weight["1"]

    assert ratio(MEASURED_BM25) > 1.5 > 1.3 > ratio(PLAIN_BM25)
    assert lexical_document("zebra", "en").values == lexical_document("zebra", "en", CHUNK_BM25).values


def test_the_chunk_shape_is_in_the_chunking_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lexical_shape` rebuilds a store (its hash moves); the query-side `lexical_strict` does not;
    the engine's shape leaves the hash as it was before the setting existed."""
    base = load_settings(overrides={"quality_tier": False, "lexical_shape": "engine"})
    before = sync.chunking_hash(base)
    measured = sync.chunking_hash(dataclasses.replace(base, lexical_shape="measured"))
    assert sync.chunking_hash(dataclasses.replace(base, lexical_strict=not base.lexical_strict)) == before
    monkeypatch.setitem(BM25_SHAPES, "measured", dataclasses.replace(MEASURED_BM25, b=0.9))
    other = sync.chunking_hash(dataclasses.replace(base, lexical_shape="measured"))
    assert len({before, measured, other}) == 3
    assert shape_fingerprint(bm25_shape("engine")) == []


def test_every_shape_name_config_accepts_has_constants() -> None:
    """config cannot import the store (stage order), so it keeps its own list of names."""
    assert set(LEXICAL_SHAPES) == set(BM25_SHAPES)
    assert bm25_shape("engine") == PLAIN_BM25 and bm25_shape("measured") == MEASURED_BM25


def test_an_import_with_the_measured_shape_indexes_chunks_with_it(tmp_path: Path) -> None:
    """The setting reaches the import's encoding: the stored BM25 weights are the measured shape's."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "note.md").write_text("# Zebra\n\nThe zebra eats grass; a zebra runs fast.\n", encoding="utf-8")
    stored: dict[str, dict[int, float]] = {}
    for shape in ("engine", "measured"):
        with Index(vault, Settings(lexical_shape=shape), embedder=FakeEmbedder()) as index:
            index.import_vault()
            [point] = list(index.store().scroll("chunks", with_vectors=True))
            sparse = point.sparse["bm25"]
            stored[shape] = dict(zip(sparse.indices, sparse.values, strict=True))
            pl = point.payload
            text = "\n".join([pl["note_title"], pl["section_path"].replace("/", " "), pl["text"]])
    expected = lexical_document(text, "en", MEASURED_BM25)
    assert stored["measured"] == pytest.approx(dict(zip(expected.indices, expected.values, strict=True)))
    assert stored["measured"] != pytest.approx(stored["engine"])
