"""Pure text helpers: line starts (never str.splitlines), R5 normalisation, slugs."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from mindnet.text import line_of, line_starts, normalise, slugify


def test_line_starts_split_only_on_cr_lf() -> None:
    text = "a\r\nb\rc\nd\u2028e\x0cf\x1cg"
    assert line_starts(text) == [0, 3, 5, 7]
    assert [line_of(line_starts(text), i) for i in (0, 3, 5, 7, len(text))] == [1, 2, 3, 4, 4]


def test_normalise_r5() -> None:
    text = "Ｔｅｘｔ  \r\n\r\n\r\n\r\nnext\rline\t \n"
    assert normalise(text) == "Text\n\nnext\nline"


def test_normalise_keeps_fenced_code_verbatim_apart_from_line_endings() -> None:
    text = "intro  \r\n```py\r\nx = 'Ｔ'   \r\n\r\n\r\n\r\ny\r\n```\r\nafter"
    assert normalise(text) == "intro\n```py\nx = 'Ｔ'   \n\n\n\ny\n```\nafter"


@given(st.text())
def test_normalise_is_idempotent(text: str) -> None:
    assert normalise(normalise(text)) == normalise(text)


_LINE_END_SPACE = re.compile(r"[ \t\f\v]+$", re.M)
"""R5's trailing-space rule written as the regex it reads as: a run of spaces at a line's end."""


@given(st.text(alphabet=st.sampled_from([*" \t\f\v\n\rab\u00a0\u3000"])))
def test_normalise_drops_trailing_spaces_exactly_as_the_line_end_regex(text: str) -> None:
    prose = unicodedata.normalize("NFKC", re.sub(r"\r\n|\r", "\n", text))
    assert normalise(text) == re.sub(r"\n{3,}", "\n\n", _LINE_END_SPACE.sub("", prose)).strip("\n")


def test_slugify_keeps_umlauts() -> None:
    assert slugify("Über Rückverweise: Größe & Maß!") == "über-rückverweise-größe-maß"
    assert slugify("  A_b--c  ") == "a-b-c"
