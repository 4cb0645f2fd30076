"""Lexical (BM25) vectors (R22), made locally by Qdrant Edge's built-in BM25.

Lexical vectors (R22) come from Edge's built-in BM25 (`qdrant_edge.Bm25`): it tokenises, drops the
language's stopwords, applies its Snowball stemmer and hashes every term to a sparse index, all
locally (no download, no server). Documents get BM25 term-frequency weights; the collection's
sparse config carries the IDF modifier, so the engine applies IDF at query time over the live
corpus. `lexical_document` / `lexical_query` expose it without leaking Qdrant types.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING

import qdrant_edge as qe

from .records import SparseVec

if TYPE_CHECKING:
    import Stemmer

SPARSE_VECTOR = "bm25"
"""Name of the lexical sparse vector. Every collection has it, because Edge needs at least one
vector per shard and notes/edges carry no dense vector."""
NOTE_SPARSE = "bm25_note"
"""Name of the note-level lexical vector: a whole note's fielded BM25 document, held by the note's lead
chunk only (`points.note_lexical`), so the engine's IDF counts notes, not chunks."""
SPARSE_VECTORS: dict[str, tuple[str, ...]] = {"chunks": (SPARSE_VECTOR, NOTE_SPARSE), "notes": (SPARSE_VECTOR,),
                                              "edges": (SPARSE_VECTOR,)}
"""The sparse vectors of each collection (all with the IDF modifier)."""


@dataclass(frozen=True, slots=True)
class Bm25Shape:
    """BM25's document-side constants: term-frequency saturation `k`, length normalisation `b`
    and the document length (in tokens left after stopwords) that counts as average."""

    k: float = 1.2
    b: float = 0.75
    avg_len: float = 256.0


PLAIN_BM25 = Bm25Shape()
"""The engine's defaults, for documents of ~256 tokens."""
MEASURED_BM25 = Bm25Shape(k=1.2, b=0.3, avg_len=64.0)
"""The shape `bench/bm25_shape.py` picks for mindnet's chunks in all 12 leave-one-cell-out folds
(issue 15): chunks hold ~90 BM25 tokens (foam-docs 89, XQuAD 80), far below the engine's assumed
256, so with its defaults every document counts as short and a term's weight saturates at its
first occurrence (an effective k of ~0.6); `b` is low because a section's first chunk indexes the
whole section (`points.contextual_lexical`). Figures: docs/benchmarks.md, "The 12 dev cells, out of
sample"."""
NOTE_BM25 = Bm25Shape(k=1.2, b=0.5, avg_len=40.0)
"""The shape of a note's fielded document (`points.note_lexical`: title, aliases, headings, path): a few dozen
words, and a note with many headings should not lose much for having them, so length counts half."""
CHUNK_BM25 = PLAIN_BM25
"""The shape chunks are encoded with when no other is named (feedback terms, `lexical_document`'s default)."""
BM25_SHAPES: dict[str, Bm25Shape] = {"engine": PLAIN_BM25, "measured": MEASURED_BM25}
"""`Settings.lexical_shape` -> the constants the import indexes chunks with (in `sync.chunking_hash`
when they are not the engine's, so a store built with the others is rebuilt)."""


def bm25_shape(name: str) -> Bm25Shape:
    """The shape `Settings.lexical_shape` names (validated by config; an unknown name is a bug here)."""
    return BM25_SHAPES[name]


def shape_fingerprint(shape: Bm25Shape) -> list[float]:
    """`shape`'s constants for a store's content hash; empty at the engine's defaults, so stores and
    baselines built before the shape existed stay current (`sync.chunking_hash`, the eval's windows)."""
    return [] if shape == PLAIN_BM25 else list(astuple(shape))


_WORD = re.compile(r"[^\W_]+")
"""A word as Edge's word tokenizer cuts them (letters and digits; `_`, `::` and `-` split)."""


@functools.cache
def _bm25(lang: str | None, shape: Bm25Shape = CHUNK_BM25) -> qe.Bm25:
    """Edge's BM25 encoder for a language (ISO 639-1 such as `de`, or a name such as `german`).

    An unknown or missing language gets a neutral encoder (no stemmer, no stopwords) instead of
    English rules that would mangle its words.
    """
    params = {"k": shape.k, "b": shape.b, "avg_len": shape.avg_len}
    if lang:
        with contextlib.suppress(ValueError):
            return qe.Bm25(qe.Bm25Config(language=lang, **params))
    return qe.Bm25(qe.Bm25Config(stemmer=qe.DisabledStemmer(), stopwords=qe.StopwordsSet(), **params))


@functools.cache
def _stemmer(lang: str | None) -> Stemmer.Stemmer | None:
    """PyStemmer's Snowball stemmer for a language (it takes ISO 639-1 codes), None when it has none.

    Imported here: only `lexical_query(strict=True)` (opt-in) stems, so a store open does not load it.
    """
    if not lang:
        return None
    import Stemmer
    try:
        return Stemmer.Stemmer(lang)
    except KeyError:
        return None


def lexical_document(text: str, lang: str | None, shape: Bm25Shape = CHUNK_BM25) -> SparseVec:
    """BM25 document vector of `text` stemmed by the rules of `lang` (R22).

    Weights are BM25 term-frequency parts (`shape`); IDF is applied by the engine at query time
    because the sparse vector is configured with the IDF modifier.
    """
    vec = _bm25(lang, shape).embed_document(text)
    return SparseVec(tuple(vec.indices), tuple(vec.values))


def lexical_query(text: str, langs: Iterable[str | None] = ("de", "en"), *, strict: bool = False) -> SparseVec:
    """BM25 query vector: the query under each language's rules, every term weighing 1.0.

    A vault mixes German and English chunks, each stemmed by its own language, and a query's
    language is a guess, so the query is encoded under every language and the union matches
    either form. With `strict` (measured in issue 15, not the default: it lifts the BM25 list but
    not the fusion tuned on the plain union), two rules keep the guess from adding noise:

    * a word that is a stopword in any of the languages is left out under all of them: under
      English rules a German `die`, `als` or `eine` is a rare word, and `als`, stemmed to `al`,
      ranked a chunk citing "Smith et al." first for "Eine Notiz als PDF exportieren";
    * a word is also stemmed by each language's Snowball rules and that stem put through the
      other languages' rules, so a loanword inflected in one language finds the other's notes:
      German `Iteratoren` -> `iterator` -> English `iter` (the stem of "iterators").
    """
    langs = tuple(dict.fromkeys(langs))
    indices: set[int] = set()
    if strict:
        for word in dict.fromkeys(_WORD.findall(text)):
            indices.update(_word_terms(word, langs))
    else:
        for lang in langs:
            indices.update(_bm25(lang).embed_query(text).indices)
    ordered = tuple(sorted(indices))
    return SparseVec(ordered, (1.0,) * len(ordered))


def content_words(text: str, langs: Iterable[str | None] = ("de", "en")) -> list[str]:
    """The words of `text` that `lexical_query(strict=True)` searches: none that is a stopword in any of
    `langs`, each once, in order."""
    langs = tuple(dict.fromkeys(langs))
    return [w for w in dict.fromkeys(_WORD.findall(text)) if _word_terms(w, langs)]


@functools.lru_cache(maxsize=8192)
def _word_terms(word: str, langs: tuple[str | None, ...]) -> frozenset[int]:
    """One query word's terms (`lexical_query`), cached: a typed query repeats its words on every key."""
    forms = [_bm25(lang).embed_query(word).indices for lang in langs]
    if not all(forms):
        return frozenset()
    out = {i for form in forms for i in form}
    for lang in langs:
        stemmer = _stemmer(lang)
        stem = stemmer.stemWord(word.lower()) if stemmer is not None else ""
        for other in langs:
            if other != lang and stem:
                out.update(_bm25(other).embed_query(stem).indices)
    return frozenset(out)
