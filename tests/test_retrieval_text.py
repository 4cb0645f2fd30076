"""What the retrieval models read of a chunk (`mindnet.retrieval_text`): prose kept, markup without words gone."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import make_chunk, make_note
from mindnet.chunking.base import Chunk
from mindnet.config import Settings, load_settings
from mindnet.points import embedding_input, lexical_input
from mindnet.retrieval_text import MEMO_CHARS, _reduced, forget_retrieval_texts, retrieval_text


@pytest.mark.parametrize(("text", "expected"), [
    ("[wikilinks]: features/wikilinks.md 'Wikilinks'\n[tags]: tags.md \"Tags\"", ""),
    ("Text.\n\n[a]: <b c> (title)", "Text."),
    ("[^1]: a footnote is prose", "[^1]: a footnote is prose"),
    ("<!-- omit in toc -->\n# Recipes", "# Recipes"),
    ("Intro <!-- a\nmultiline comment --> outro", "Intro   outro"),
    ("one<!-- x -->two", "one two"),
    ("![](assets/graph.png)", ""),
    ("![screenshot](shot.png) ![Graph of linked notes](g.png)", "Graph of linked notes"),
    ('<img src="a.png" alt="The tag explorer">', "The tag explorer"),
    ("- ![[diagram.png|300]]", ""),
    ("[![Badge](https://img.shields.io/x.svg)](https://ci.example/x)", "Badge"),
    ("- https://example.org/one\n- <https://example.org/two>", ""),
    ("Read https://example.org/a first.", "Read https://example.org/a first."),
    ("See [the docs](https://example.org/a) and ![a chart](c.png) inline.",
     "See [the docs](https://example.org/a) and ![a chart](c.png) inline."),
    ("![[other-note]] and [[target|alias]]", "![[other-note]] and [[target|alias]]"),
])
def test_lines_without_prose_go_and_prose_stays_whole(text: str, expected: str) -> None:
    assert retrieval_text(text) == expected


def test_code_is_kept_byte_for_byte() -> None:
    fence = "```md\n[x]: y 'z'\nhttps://keep.example\n<!-- kept -->\n```"
    span = "`<!-- in code -->`"
    text = f"Intro {span} <!-- gone -->\n\n{fence}\n\n[d]: e.md"
    out = retrieval_text(text)
    assert fence in out and span in out
    assert "gone" not in out and "[d]: e.md" not in out


def test_an_unclosed_fence_runs_to_the_end_and_is_kept() -> None:
    text = "Before <!-- c -->\n~~~\n[a]: b\nhttp://z"
    assert retrieval_text(text) == "Before  \n~~~\n[a]: b\nhttp://z"


_WORDS = re.compile(r"\w+")
_MARKDOWNISH = st.lists(st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.sampled_from(["[", "]", "(", ")", "!", "<", ">", "`", "```", "~~~", "\n", "<!--", "-->", "http://", "|", "-",
                     ":", "'", '"', "[[", "]]", "#", " ", "![", "](", "]:", "<img alt='x'>", "<br>", ".png"]),
), max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(_MARKDOWNISH)
def test_never_adds_words(text: str) -> None:
    """Every word of the retrieval text is a word of the chunk: markup is only taken away."""
    source = set(_WORDS.findall(text))
    assert set(_WORDS.findall(retrieval_text(text))) <= source


@settings(max_examples=400, deadline=None)
@given(_MARKDOWNISH)
def test_fenced_code_survives_whole(text: str) -> None:
    """A closed fence in the input appears unchanged in the output (code is what people search for)."""
    for m in re.finditer(r"(?m)^(```|~~~)[^\n]*\n(?:.*\n)*?\1[ \t]*$", text):
        if m.group(0).count(m.group(1)) == 2:  # a simple block, no other fence inside
            assert m.group(0) in retrieval_text(text)


@settings(max_examples=200, deadline=None)
@given(_MARKDOWNISH)
def test_empty_means_no_word(text: str) -> None:
    out = retrieval_text(text)
    assert (out == "") == (not re.search(r"\w", out)) and out == out.strip()


def test_a_chunk_without_prose_has_no_model_input_and_no_bm25_document() -> None:
    chunk = _chunk("[a]: a.md 'A'\n[b]: b.md 'B'")
    assert embedding_input(chunk, settings_with_prefix()) == ""
    assert lexical_input(chunk) == ""
    prose = _chunk("Publish with [GitHub Pages](https://pages.github.com).\n\n[gh]: https://github.com 'GitHub'")
    assert "Publish with [GitHub Pages](https://pages.github.com)." in embedding_input(prose, settings_with_prefix())
    assert "'GitHub'" not in lexical_input(prose)


def _chunk(body: str) -> Chunk:
    note = make_note("publishing.md", body, note_id="n", title="Publishing")
    return make_chunk(note, 0, 0, len(note.fulltext))


def settings_with_prefix() -> Settings:
    return load_settings(overrides={"embed_title_prefix": True})


@settings(max_examples=200, deadline=None)
@given(_MARKDOWNISH, st.integers(0, 2))
def test_a_remembered_text_reads_as_a_fresh_one(text: str, repeat: int) -> None:
    """The memo changes no answer: short texts (remembered), texts past `MEMO_CHARS` (not), asked again."""
    long = text * (MEMO_CHARS // max(1, len(text)) + 1) if repeat == 2 else text
    for _ in range(2):
        assert retrieval_text(long) == _reduced(long)
    forget_retrieval_texts()
    assert retrieval_text(long) == _reduced(long)
