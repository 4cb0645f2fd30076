"""The naive lexical baseline of issue 25: plain BM25 over fixed windows, no stemming.

Issue 25 measured mindnet against two naive lists over fixed 300-token windows of each note: USE
dense, and "plain BM25 over the same windows (no stemming)". `bench/search.py`'s "bm25 (fixed)"
column is stricter than the second: it indexes the same windows with mindnet's own BM25 (each
window stemmed by its note's language, the query under both languages' rules), so the windows
differ from mindnet's chunks only in their cut. This module is the naive list itself, so that both
can be reported: every word lower-cased, no stemmer, no stop words, Okapi BM25 (k1 1.2, b 0.75, the
Lucene IDF), each note ranked by its best window. Pure Python over the texts the fixed-window store
holds; nothing here reads a model or a knob of mindnet's.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WORD = re.compile(r"\w+")
"""A word: a run of Unicode letters, digits and underscores."""
K1 = 1.2
B = 0.75


def words(text: str) -> list[str]:
    """`text`'s words, lower-cased, in order: the whole of the baseline's analysis."""
    return WORD.findall(text.lower())


@dataclass(frozen=True)
class Window:
    """One fixed window: the note it belongs to (a judgement key) and its text."""

    note: str
    text: str


class PlainBm25:
    """An inverted index over windows, queried by plain BM25; notes ranked by their best window."""

    def __init__(self, windows: Iterable[Window]) -> None:
        self._notes: list[str] = []
        self._lengths: list[int] = []
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for doc, window in enumerate(windows):
            counts = Counter(words(window.text))
            self._notes.append(window.note)
            self._lengths.append(sum(counts.values()))
            for word, tf in counts.items():
                self._postings.setdefault(word, []).append((doc, tf))
        self._avg = sum(self._lengths) / len(self._lengths) if self._lengths else 0.0

    def idf(self, word: str) -> float:
        """Lucene's BM25 IDF, never negative: ln(1 + (N - df + 0.5) / (df + 0.5)); 0 for an unseen word."""
        df = len(self._postings.get(word, ()))
        return math.log(1 + (len(self._lengths) - df + 0.5) / (df + 0.5)) if df else 0.0

    def window_scores(self, query: str) -> dict[int, float]:
        """BM25 of every window holding at least one of the query's words (each distinct word once)."""
        scores: dict[int, float] = {}
        for word in dict.fromkeys(words(query)):
            idf = self.idf(word)
            for doc, tf in self._postings.get(word, ()):
                norm = K1 * (1 - B + B * self._lengths[doc] / self._avg)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return scores

    def notes(self, query: str, limit: int = 10) -> list[str]:
        """The notes of the best windows, best first, each once, at most `limit`; ties by first window."""
        best: dict[str, float] = {}
        for doc, score in sorted(self.window_scores(query).items(), key=lambda ds: (-ds[1], ds[0])):
            if self._notes[doc] not in best:
                best[self._notes[doc]] = score
                if len(best) == limit:
                    break
        return list(best)


def rankings(windows: Iterable[Window], queries: Sequence[str], limit: int = 10) -> list[list[str]]:
    """Each query's notes (`PlainBm25.notes`) over one index of `windows`."""
    index = PlainBm25(windows)
    return [index.notes(q, limit) for q in queries]
