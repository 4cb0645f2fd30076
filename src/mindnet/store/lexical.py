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
from collections.abc import Iterable

import qdrant_edge as qe

from .records import SparseVec

SPARSE_VECTOR = "bm25"
"""Name of the lexical sparse vector. Every collection has it, because Edge needs at least one
vector per shard and notes/edges carry no dense vector."""


@functools.cache
def _bm25(lang: str | None) -> qe.Bm25:
    """Edge's BM25 encoder for a language (ISO 639-1 such as `de`, or a name such as `german`).

    An unknown or missing language gets a neutral encoder (no stemmer, no stopwords) instead of
    English rules that would mangle its words.
    """
    if lang:
        with contextlib.suppress(ValueError):
            return qe.Bm25(qe.Bm25Config(language=lang))
    return qe.Bm25(qe.Bm25Config(stemmer=qe.DisabledStemmer(), stopwords=qe.StopwordsSet()))


def lexical_document(text: str, lang: str | None) -> SparseVec:
    """BM25 document vector of `text` stemmed by the rules of `lang` (R22).

    Weights are BM25 term-frequency parts (k=1.2, b=0.75); IDF is applied by the engine at query
    time because the sparse vector is configured with the IDF modifier.
    """
    vec = _bm25(lang).embed_document(text)
    return SparseVec(tuple(vec.indices), tuple(vec.values))


def lexical_query(text: str, langs: Iterable[str | None] = ("de", "en")) -> SparseVec:
    """BM25 query vector: the union of the query's terms under each language's rules.

    A vault mixes German and English chunks, each stemmed by its own language, and a query's
    language is a guess; the union matches either form. Every term weighs 1.0 as in BM25.
    """
    indices: set[int] = set()
    for lang in dict.fromkeys(langs):
        indices.update(_bm25(lang).embed_query(text).indices)
    ordered = tuple(sorted(indices))
    return SparseVec(ordered, (1.0,) * len(ordered))
