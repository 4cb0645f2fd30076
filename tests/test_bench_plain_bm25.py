"""Issue 25's naive lexical baseline (`bench/plain_bm25.py`): plain BM25 over windows, no stemming.

Its figure is only the issue's baseline if it is plain: Okapi BM25 with the Lucene IDF, words matched
as they are written (case aside), each note ranked by its best window.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import plain_bm25  # bench/plain_bm25.py: bench is a folder of scripts, not a package
from plain_bm25 import PlainBm25, Window


def test_a_score_is_okapi_bm25_with_the_lucene_idf() -> None:
    index = PlainBm25([Window("a", "Katze Katze Hund"), Window("b", "Hund Maus"), Window("c", "Vogel")])
    avg = (3 + 2 + 1) / 3
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    tf_part = 2 * (1.2 + 1) / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / avg))
    assert math.isclose(index.window_scores("katze")[0], idf * tf_part)
    assert index.window_scores("Elefant") == {}


def test_words_are_not_stemmed_and_case_does_not_count() -> None:
    index = PlainBm25([Window("plural", "Notizen verlinken"), Window("singular", "eine Notiz")])
    assert index.notes("NOTIZ") == ["singular"]
    assert index.notes("notizen") == ["plural"]


def test_a_note_ranks_by_its_best_window_and_appears_once() -> None:
    windows = [Window("long", "export pdf export"), Window("long", "pdf"), Window("short", "pdf word")]
    index = PlainBm25(windows)
    ranked = index.notes("export pdf")
    assert ranked == ["long", "short"]
    assert index.notes("export pdf", limit=1) == ["long"]


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.text(alphabet="xyz Q", max_size=20)), max_size=12),
       st.text(alphabet="xyzq ", max_size=10))
def test_rankings_are_distinct_notes_ordered_by_their_best_window(docs: list[tuple[str, str]], query: str) -> None:
    windows = [Window(note, text) for note, text in docs]
    index = PlainBm25(windows)
    scores = index.window_scores(query)
    ranked = plain_bm25.rankings(windows, [query])[0]
    assert len(ranked) == len(set(ranked)) <= 10
    best = {}
    for doc, score in scores.items():
        best[windows[doc].note] = max(best.get(windows[doc].note, 0.0), score)
    assert set(ranked) == set(best)
    assert [best[n] for n in ranked] == sorted((best[n] for n in ranked), reverse=True)
    assert all(s > 0 for s in scores.values())
