"""Pure text helpers: line starts (never str.splitlines), R5 normalisation, slugs."""

from __future__ import annotations

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


def test_slugify_keeps_umlauts() -> None:
    assert slugify("Über Rückverweise: Größe & Maß!") == "über-rückverweise-größe-maß"
    assert slugify("  A_b--c  ") == "a-b-c"
