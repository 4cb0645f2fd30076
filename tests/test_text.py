"""Pure text helpers: line starts (never str.splitlines), R5 normalisation, slugs."""

from __future__ import annotations

import re
import unicodedata
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindnet.text import (
    FenceSpan,
    closes_fence,
    fence_opener,
    fence_spans,
    line_of,
    line_starts,
    normalise,
    slugify,
    uuid5_string,
)


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


def fence_spans_of_every_line(text: str, start: int = 0, end: int | None = None) -> list[FenceSpan]:
    """The reference: `fence_spans` as it read every line before it read only the marked ones."""
    end = len(text) if end is None else end
    spans: list[FenceSpan] = []
    fence: str | None = None
    open_at = inner = 0
    for m in re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)").finditer(text, start, end):
        line = m.group().rstrip("\r\n")
        if fence is None:
            fence = fence_opener(line)
            if fence is not None:
                open_at, inner = m.start(), m.end()
        elif closes_fence(line, fence):
            spans.append(FenceSpan(open_at, inner, m.start(), m.start() + len(line)))
            fence = None
        if m.end() >= end:
            break
    if fence is not None:
        spans.append(FenceSpan(open_at, min(inner, end), end, end))
    return spans


_FENCY = st.lists(st.sampled_from(["```", "````", "~~~", "```py", "> ```", "- ~~~~", "  ``` `x`", "code", " ", "`",
                                   "~", "\n", "\r\n", "\r", "> ", "1. ", "text ``` mid"]), max_size=40).map("".join)


@given(_FENCY, st.data())
def test_fence_spans_reads_only_marked_lines_and_finds_what_reading_every_line_finds(text: str,
                                                                                      data: st.DataObject) -> None:
    assert fence_spans(text) == fence_spans_of_every_line(text)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    assert fence_spans(text, start, end) == fence_spans_of_every_line(text, start, end)


def test_fence_spans_of_a_note_with_crlf_quotes_and_an_unclosed_fence() -> None:
    text = "a\r\n> ```py\r\n> x\r\n> ```\r\nb ``` not a fence\n~~~~\ny\n~~~\nz"
    quoted, unclosed = fence_spans(text)
    assert text[quoted.start:quoted.inner_start] == "> ```py\r\n"
    assert text[quoted.inner_start:quoted.inner_end] == "> x\r\n"
    assert text[quoted.inner_end:quoted.end] == "> ```"
    assert text[unclosed.start:unclosed.inner_start] == "~~~~\n"  # "~~~" is too short to close it
    assert (unclosed.inner_end, unclosed.end) == (len(text), len(text))


@given(st.text(), st.sampled_from([uuid.NAMESPACE_URL, uuid.UUID("8c4ce21a-fb58-5114-8dc6-9ba5bbbcd937")]))
def test_uuid5_string_is_the_standard_librarys_uuid5(name: str, namespace: uuid.UUID) -> None:
    """Every stored point is named by it: a different id for the same name would orphan every stored point."""
    assert uuid5_string(namespace, name) == str(uuid.uuid5(namespace, name))


def test_uuid5_string_refuses_what_uuid5_refuses() -> None:
    """A lone surrogate (which `st.text()` never draws) cannot be named by either."""
    for name_a_file_cannot_hold in ("a\ud800", "\udfff"):
        with pytest.raises(UnicodeEncodeError):
            uuid.uuid5(uuid.NAMESPACE_URL, name_a_file_cannot_hold)
        with pytest.raises(UnicodeEncodeError):
            uuid5_string(uuid.NAMESPACE_URL, name_a_file_cannot_hold)
