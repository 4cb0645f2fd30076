"""Tests for `mindnet.markdown`: block kinds, exact spans (R11), comments, line endings, engines."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus
from mindnet.markdown import Block, mask_comments, parse_blocks
from mindnet.text import line_of, line_starts

# (id, body, expected top-level blocks as (kind, body[char_start:char_end]))
CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "atx-headings",
        "# One\n\n## Two ##\n###### Six",
        [("heading", "# One"), ("heading", "## Two ##"), ("heading", "###### Six")],
    ),
    (
        "setext-headings",
        "Title\n=====\n\nSub\nline\n---\n",
        [("heading", "Title\n====="), ("heading", "Sub\nline\n---")],
    ),
    (
        "paragraphs",
        "First line\nsecond line\n\n\n  Second para  \n\n",
        [("paragraph", "First line\nsecond line"), ("paragraph", "Second para")],
    ),
    ("nested-list", "- a\n  - b\n    - c\n- d\n\ntext", [("list", "- a\n  - b\n    - c\n- d"), ("paragraph", "text")]),
    ("ordered-list", "1. one\n2. two\n10) other list", [("list", "1. one\n2. two"), ("list", "10) other list")]),
    ("checklist", "- [ ] open\n- [x] done\n", [("list", "- [ ] open\n- [x] done")]),
    (
        "fence-backtick",
        "```python\nx = 1\n\n\ny = 2\n```\nafter",
        [("code", "```python\nx = 1\n\n\ny = 2\n```"), ("paragraph", "after")],
    ),
    ("fence-tilde", "~~~\n# not a heading\n~~~", [("code", "~~~\n# not a heading\n~~~")]),
    (
        "fence-unclosed",
        "text\n\n```\ncode\n\n# still code\n\n",
        [("paragraph", "text"), ("code", "```\ncode\n\n# still code")],
    ),
    (
        "indented-code",
        "para\n\n    code line\n\n    more\n\nafter",
        [("paragraph", "para"), ("code", "code line\n\n    more"), ("paragraph", "after")],
    ),
    (
        "table",
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n\nafter",
        [("table", "| a | b |\n|---|:-:|\n| 1 | 2 |"), ("paragraph", "after")],
    ),
    (
        "blockquote",
        "> quoted\ncontinued\n> more\n\n> second",
        [("blockquote", "> quoted\ncontinued\n> more"), ("blockquote", "> second")],
    ),
    (
        "callouts",
        "> [!note] Title\n> body\n\n> [!warning]- folded\n> x\n\n> [!TIP]+\n> y",
        [
            ("blockquote", "> [!note] Title\n> body"),
            ("blockquote", "> [!warning]- folded\n> x"),
            ("blockquote", "> [!TIP]+\n> y"),
        ],
    ),
    ("html-block", "<div>\n<b>x</b>\n</div>\n\ntext", [("html", "<div>\n<b>x</b>\n</div>"), ("paragraph", "text")]),
    ("thematic-breaks", "a\n\n---\n\n* * *\n___", [("paragraph", "a"), ("hr", "---"), ("hr", "* * *"), ("hr", "___")]),
    (
        "footnotes",
        "Text[^1].\n\n[^1]: The note\n    continues.\n\n[^long]: Other",
        [("paragraph", "Text[^1]."), ("footnote", "[^1]: The note\n    continues."), ("footnote", "[^long]: Other")],
    ),
    (
        "math",
        "Before\n\n$$\na\n=\nb\n$$\n\nafter",
        [("paragraph", "Before"), ("math", "$$\na\n=\nb\n$$"), ("paragraph", "after")],
    ),
    ("footnote-after-quote", "> quote\n[^1]: lazy line?", [("blockquote", "> quote\n[^1]: lazy line?")]),
    ("reference-then-indented", "[ref]: /url\n    indented", [("paragraph", "[ref]: /url"), ("code", "indented")]),
    (
        "link-reference-definitions",
        "- item\n\n[a]: /x\n[b]: /y 'B'\n\ntext",
        [("list", "- item"), ("paragraph", "[a]: /x\n[b]: /y 'B'"), ("paragraph", "text")],
    ),
    (
        "comment-multiline",
        "intro\n\n%%\n# Hidden heading\n- hidden\n%%\n\n## Shown",
        [("paragraph", "intro"), ("heading", "## Shown")],
    ),
    (
        "comment-inline",
        "Visible %%secret%% text\n%%only comment%%\n# Head %%x%%",
        [("paragraph", "Visible %%secret%% text"), ("heading", "# Head")],
    ),
    (
        "comment-in-code-kept",
        "```\n%%\n# code\n%%\n```\n`%%` and `%%`",
        [("code", "```\n%%\n# code\n%%\n```"), ("paragraph", "`%%` and `%%`")],
    ),
    ("comment-unclosed-is-text", "50%% off\n\n# Heading", [("paragraph", "50%% off"), ("heading", "# Heading")]),
    (
        "crlf",
        "# Title\r\n\r\nPara one\r\nline two\r\n\r\n- a\r\n- b\r\n",
        [("heading", "# Title"), ("paragraph", "Para one\r\nline two"), ("list", "- a\r\n- b")],
    ),
    (
        "lone-cr",
        "# Title\r\rPara\rmore\r\r```\rcode\r```",
        [("heading", "# Title"), ("paragraph", "Para\rmore"), ("code", "```\rcode\r```")],
    ),
    (
        "u2028-and-form-feed",
        "A\u2028B\x0cC\x1cD\n\n# Next",
        [("paragraph", "A\u2028B\x0cC\x1cD"), ("heading", "# Next")],
    ),
    (
        "emoji-umlauts",
        "# Größe 😀\n\nÄpfel 🍎 und Bären\n\n- 🎉 ü",
        [("heading", "# Größe 😀"), ("paragraph", "Äpfel 🍎 und Bären"), ("list", "- 🎉 ü")],
    ),
]

ENGINES = ["markdown-it", "pyromark"]

# NOTE: real differences between pulldown-cmark and the reference engine, kept visible on purpose:
# pyromark may only become the default when this set is empty and the corpus bench shows parity.
PYROMARK_DIFFERS: dict[str, str] = {}
"""Was: `$$` math with a `=` line (setext heading), a footnote definition after a quote (no lazy
continuation), an indented line after a link reference definition (paragraph, not code). The
pyromark adapter now follows markdown-it in all three (`markdown._as_reference`)."""


def _case_params() -> list[object]:
    params = []
    for case_id, body, expected in CASES:
        for engine in ENGINES:
            marks = []
            if engine == "pyromark" and case_id in PYROMARK_DIFFERS:
                marks.append(pytest.mark.xfail(reason=PYROMARK_DIFFERS[case_id]))
            params.append(pytest.param(body, expected, engine, id=f"{case_id}-{engine}", marks=marks))
    return params


@pytest.mark.parametrize(("body", "expected", "engine"), _case_params())
def test_blocks_match_fixture(body: str, expected: list[tuple[str, str]], engine: str) -> None:
    blocks = parse_blocks(body, engine)  # type: ignore[arg-type]
    assert [(b.kind, body[b.char_start : b.char_end]) for b in blocks] == expected
    _assert_invariants(body, blocks)


def test_heading_levels_and_titles() -> None:
    body = "# One #\n\n## Two ## \n\n### C# is #1\n\nSet ext\ntitle\n===\n\nLow\n---\n\n#\n\n# %%c%% Real"
    got = [(b.level, b.title) for b in parse_blocks(body)]
    assert got == [(1, "One"), (2, "Two"), (3, "C# is #1"), (1, "Set ext title"), (2, "Low"), (1, ""), (1, "Real")]


def test_callout_types_and_titles() -> None:
    body = "> [!note] Title\n> x\n\n> [!warning]- folded\n\n> [!TIP]+\n\n> plain\n\n> > [!note] nested"
    got = [(b.callout, b.title) for b in parse_blocks(body)]
    assert got == [("note", "Title"), ("warning", "folded"), ("tip", ""), (None, ""), (None, "")]


def test_list_items_and_checklists() -> None:
    body = "- [ ] a\n  - nested\n- [x] b\n\n1. [ ] task\n2. plain\n\n- [[wikilink]]"
    lists = parse_blocks(body)
    assert [b.kind for b in lists] == ["list", "list", "list"]
    first, mixed, links = lists
    assert [body[i.char_start : i.char_end] for i in first.children] == ["- [ ] a\n  - nested", "- [x] b"]
    assert all(i.kind == "item" for i in first.children)
    assert (first.checklist, mixed.checklist, links.checklist) == (True, False, False)
    assert [i.checklist for i in mixed.children] == [True, False]
    assert [(i.line_start, i.line_end) for i in first.children] == [(1, 2), (3, 3)]


def test_code_fields() -> None:
    body = "```python title=x\nx\n```\n\n~~~\ny\n~~~\n\n    z"
    got = [(b.kind, b.fenced, b.info) for b in parse_blocks(body)]
    assert got == [("code", True, "python title=x"), ("code", True, ""), ("code", False, "")]


@pytest.mark.parametrize("engine", ENGINES)
def test_line_numbers_survive_cr_u2028_and_form_feed(engine: str) -> None:
    body = "a\u2028b\x0cc\r\rsecond\r\n\r\n# third\n"
    blocks = parse_blocks(body, engine)  # type: ignore[arg-type]
    assert [(b.line_start, b.line_end) for b in blocks] == [(1, 1), (3, 3), (5, 5)]


def test_mask_comments_keeps_length_and_breaks() -> None:
    body = "a %%x\r\ny%% b\n`%%`\n"
    masked = mask_comments(body)
    assert masked == "a    \r\n    b\n`%%`\n"
    assert len(masked) == len(body)


def test_unknown_engine_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown Markdown engine"):
        parse_blocks("x", "commonmark")  # type: ignore[arg-type]


def test_empty_and_blank_bodies() -> None:
    assert parse_blocks("") == []
    assert parse_blocks(" \n\t\r\n%%gone%%\n") == []


# --- properties over generated Markdown (R11) ---------------------------------------------------

_SNIPPETS = [
    "# Heading",
    "## Größe 😀 ##",
    "Setext",
    "===",
    "---",
    "plain text line",
    "Zweite Zeile mit ü",
    "- item",
    "  - nested item",
    "- [ ] task",
    "- [x] done",
    "1. first",
    "2) second",
    "> quote",
    "> [!note] Callout",
    "> [!TIP]-",
    "```py",
    "~~~",
    "```",
    "    indented code",
    "| a | b |",
    "|---|---|",
    "| 1 | 2 |",
    "<div>",
    "</div>",
    "***",
    "[^1]: footnote",
    "[ref]: /url",
    "$$",
    "x = 1",
    "%%",
    "text %%inline%% more",
    "%% comment %%",
    "`%%` code",
    "a\u2028b",
    "f\x0cg",
    "",
    "",
    "",
    "   ",
    "\t",
]
_BREAKS = ["\n", "\r\n", "\r"]

markdown_bodies = st.lists(st.tuples(st.sampled_from(_SNIPPETS), st.sampled_from(_BREAKS)), max_size=30).map(
    lambda parts: "".join(line + brk for line, brk in parts)
)


def _assert_invariants(body: str, blocks: list[Block]) -> None:
    """R11: ordered, disjoint, in bounds, trimmed, covering, with lines that agree with `line_of`."""
    starts = line_starts(body)
    masked = mask_comments(body)
    covered = [False] * len(body)
    prev_end = 0
    for block in blocks:
        spans = [block, *block.children]
        for b in spans:
            assert 0 <= b.char_start < b.char_end <= len(body)
            assert not body[b.char_start].isspace() and not body[b.char_end - 1].isspace()
            assert b.line_start == line_of(starts, b.char_start)
            assert b.line_end == line_of(starts, b.char_end - 1)
        assert block.char_start >= prev_end
        prev_end = block.char_end
        for child in block.children:
            assert block.char_start <= child.char_start and child.char_end <= block.char_end
        for i in range(block.char_start, block.char_end):
            covered[i] = True
    missing = [i for i, ch in enumerate(masked) if not ch.isspace() and not covered[i]]
    assert not missing, f"uncovered: {[body[i] for i in missing]}"


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None)
@given(body=markdown_bodies)
def test_r11_blocks_are_exact_disjoint_and_cover_the_body(engine: str, body: str) -> None:
    _assert_invariants(body, parse_blocks(body, engine))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(body=markdown_bodies)
def test_line_endings_do_not_change_blocks(body: str) -> None:
    """The same note saved with LF, CRLF or CR gives the same blocks, only offsets shift."""
    lf = re.sub(r"\r\n|\r", "\n", body)
    crlf = lf.replace("\n", "\r\n")

    def shape(text: str) -> list[tuple[str, str, int, int]]:
        return [
            (b.kind, re.sub(r"\r\n|\r", "\n", text[b.char_start : b.char_end]), b.line_start, b.line_end)
            for b in parse_blocks(text)
        ]

    assert shape(lf) == shape(crlf) == shape(lf.replace("\n", "\r"))


_NON_SPACE = re.compile(r"\S")


@pytest.mark.slow
def test_r11_spans_on_shared_corpora() -> None:
    """Every corpus note: spans in bounds, ordered, trimmed, and no non-whitespace left between blocks."""
    checked = 0
    for path in sorted(corpus().rglob("*.md")):
        body = path.read_bytes().decode("utf-8", errors="replace").removeprefix("\ufeff")
        masked = mask_comments(body)
        starts = line_starts(body)
        prev_end = 0
        for block in parse_blocks(body):
            assert prev_end <= block.char_start < block.char_end <= len(body), path
            assert _NON_SPACE.search(masked, prev_end, block.char_start) is None, path
            assert block.line_start == line_of(starts, block.char_start), path
            prev_end = block.char_end
        assert _NON_SPACE.search(masked, prev_end) is None, path
        checked += 1
    assert checked > 3000
