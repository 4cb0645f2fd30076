"""The title/alias index: exact note names found in a query as whole words."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mindnet.titles import MAX_NAME_WORDS, NamedNote, TitleIndex, normalise

_words = st.text(alphabet="abcdefgäöüß", min_size=1, max_size=8)


def test_the_readme_question_names_the_chunking_note() -> None:
    index = TitleIndex([("chunking", "Chunking"), ("chunking", "Chunking-Strategie"), ("mindnet", "mindnet"),
                        ("notes", "Notes")])
    assert index.matches("Wie funktioniert das Chunking von Notizen?") == ["chunking"]


def test_longer_names_rank_first_and_a_note_counts_once() -> None:
    index = TitleIndex([("rrf", "Reciprocal Rank Fusion"), ("rrf", "RRF"), ("fusion", "Fusion")])
    assert index.matches("how does reciprocal rank fusion (RRF) work") == ["rrf"]
    assert index.matches("Fusion vs. RRF") == ["fusion", "rrf"]


def test_a_name_shared_by_many_notes_gives_each_a_share() -> None:
    """Every paragraph of an article under its title: the name singles out none of them."""
    index = TitleIndex([*((f"p{i}", "Super Bowl 50") for i in range(4)), ("sb", "Super Bowl"), ("p0", "Halftime")])
    named = index.named("Who sang at the Super Bowl 50 halftime show?")
    assert named[:4] == [NamedNote(f"p{i}", 3, 0.25) for i in range(4)]  # "super bowl" inside is covered
    assert index.named("super bowl halftime") == [NamedNote("sb", 2, 1.0), NamedNote("p0", 1, 1.0)]


@given(ids=st.lists(st.sampled_from("abcdef"), min_size=1, max_size=12), name=st.lists(_words, min_size=1, max_size=3))
def test_the_share_is_one_over_the_notes_carrying_the_name(ids: list[str], name: list[str]) -> None:
    index = TitleIndex((note_id, " ".join(name)) for note_id in ids)
    named = index.named(" ".join(name))
    assert sorted(m.note_id for m in named) == sorted(set(ids))
    assert all(m.share == pytest.approx(1 / len(set(ids))) and m.words == len(name) for m in named)


def test_a_note_named_like_a_project_shares_the_name_with_the_project_notes() -> None:
    """A hub note titled like the project twelve notes belong to: the name stands for the project."""
    names = [("hub", "mindnet"), ("hub", "Projekt mindnet"), ("chunking", "Chunking")]
    groups = [*((f"n{i}", "mindnet") for i in range(11)), ("hub", "mindnet"), ("x", "Gartenbau")]
    index = TitleIndex(names, groups)
    assert index.named("Who reviews mindnet?") == [NamedNote("hub", 1, 1 / 12)]
    assert index.named("Projekt mindnet") == [NamedNote("hub", 2, 1.0)]  # the alias is the hub's alone
    assert index.named("Chunking") == [NamedNote("chunking", 1, 1.0)]  # a group name no note has: no effect
    assert index.named("Gartenbau") == []  # groups never name a note


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
@example("ᾶ")  # case folding decomposed it into a letter and a combining accent, which split on a second pass
def test_normalise_is_idempotent(text: str) -> None:
    words = normalise(text)
    assert normalise(" ".join(words)) == words
