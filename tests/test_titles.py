"""The title/alias index: exact note names found in a query as whole words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mindnet.titles import MAX_NAME_WORDS, TitleIndex, normalise

_words = st.text(alphabet="abcdefgäöüß", min_size=1, max_size=8)


def test_the_readme_question_names_the_chunking_note() -> None:
    index = TitleIndex([("chunking", "Chunking"), ("chunking", "Chunking-Strategie"), ("mindnet", "mindnet"),
                        ("notes", "Notes")])
    assert index.matches("Wie funktioniert das Chunking von Notizen?") == ["chunking"]


def test_longer_names_rank_first_and_a_note_counts_once() -> None:
    index = TitleIndex([("rrf", "Reciprocal Rank Fusion"), ("rrf", "RRF"), ("fusion", "Fusion")])
    assert index.matches("how does reciprocal rank fusion (RRF) work") == ["rrf"]
    assert index.matches("Fusion vs. RRF") == ["fusion", "rrf"]


def test_only_whole_words_match() -> None:
    index = TitleIndex([("rust", "Rust"), ("ab", "a b")])
    assert index.matches("Rustacean trust") == []
    assert index.matches("a-b") == ["ab"]  # punctuation separates words, in names and queries alike


def test_empty_and_overlong_names_are_not_indexed() -> None:
    long = " ".join(["word"] * (MAX_NAME_WORDS + 1))
    index = TitleIndex([("x", ""), ("y", "!!"), ("z", long)])
    assert len(index) == 0
    assert index.matches(long) == []


@given(name=st.lists(_words, min_size=1, max_size=MAX_NAME_WORDS), before=st.lists(_words, max_size=4),
       after=st.lists(_words, max_size=4))
def test_a_name_inside_a_query_is_found_whatever_the_case(name: list[str], before: list[str],
                                                          after: list[str]) -> None:
    index = TitleIndex([("n", " ".join(name))])
    query = " ".join([*before, " ".join(name).upper(), *after])
    assert index.matches(query) == ["n"]


@given(st.text(max_size=60))
def test_normalise_is_idempotent(text: str) -> None:
    words = normalise(text)
    assert normalise(" ".join(words)) == words
