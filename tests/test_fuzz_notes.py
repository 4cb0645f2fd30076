"""Fuzzing note files (issue 13): random bytes, random YAML, random Markdown nesting, `mindnet-chunk` stdin.

Properties: nothing escapes but `NoteError` (the documented one-line problem); parsing finishes; what
is chunked satisfies the chunk invariants. Example counts stay modest so the suite stays fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet import launch
from mindnet.api import note_from_text
from mindnet.chunking.invariants import check_chunks
from mindnet.chunking.pipeline import chunk_note
from mindnet.chunking.tokens import default_tokenizer
from mindnet.config import Settings
from mindnet.errors import NoteError
from mindnet.points import jsonable as _jsonable
from mindnet.vault import Note

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SETTINGS = Settings(languages=("en",))  # one language: no language model in the loop
TOK = default_tokenizer()


def _note_or_problem(data: bytes | str) -> Note | None:
    """The note, or None for a one-line `NoteError`; any other exception fails the property."""
    try:
        return note_from_text(data, SETTINGS, "fuzz.md")
    except NoteError as exc:
        assert "\n" not in exc.one_line() and exc.path == "fuzz.md"
        assert exc.line is None or exc.line >= 1
        return None


def _chunks_hold_invariants(note: Note) -> None:
    chunks = chunk_note(note, SETTINGS, None, TOK)
    assert check_chunks(note.fulltext, chunks, TOK, SETTINGS.profile_for(note.type), lang=note.lang) == []


# --- random bytes -------------------------------------------------------------------------------

_MARKUP = st.sampled_from([b"---\n", b"\n", b"# ", b"> ", b"- ", b"```\n", b"[[", b"]]", b"\xff", b"\x00", b"\r"])
_BYTES = st.lists(st.binary(max_size=40) | _MARKUP, max_size=30).map(b"".join)


@FUZZ
@given(_BYTES)
def test_random_bytes_become_a_note_or_one_line(data: bytes) -> None:
    note = _note_or_problem(data)
    if note is not None:
        json.dumps(_jsonable(note.frontmatter))
        _chunks_hold_invariants(note)


# --- random YAML --------------------------------------------------------------------------------

_SCALARS = st.sampled_from(
    ["x", "12:30", "no", "0012", "2024-01-05", "'q'", '"d"', "[[Note]]", "~", "!!int 5", "!!int abc", "!!float x",
     "!!binary aGk=", "!!str 3", "!!timestamp 2020-01-01", "!!set {a, b}", "!python/object x", "&a x", "*a", "*b",
     "a: b", "#c", "|\n  block", ">-\n  folded", "{", "]", "? k"]
)


@st.composite
def _yaml_value(draw: st.DrawFn, depth: int = 0) -> str:
    """A YAML value: scalars, aliases, anchors, tags, flow and block collections, nested up to 6 deep."""
    if depth >= 6 or draw(st.integers(0, 2)) == 0:
        return draw(_SCALARS)
    anchor = draw(st.sampled_from(["", "", "&a ", "&b "]))
    items = draw(st.lists(_yaml_value(depth + 1), min_size=0, max_size=4))
    if draw(st.booleans()):
        return anchor + "[" + ", ".join(items) + "]"
    keys = draw(st.lists(st.sampled_from(["k", "tags", "id", "<<", "title", "a"]), min_size=len(items),
                         max_size=len(items)))
    return anchor + "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, items, strict=True)) + "}"


@st.composite
def _frontmatter(draw: st.DrawFn) -> str:
    fields = draw(st.lists(st.tuples(st.sampled_from(["title", "id", "tags", "related", "x", "y"]), _yaml_value()),
                           max_size=6))
    lines = [f"{k}: {v}" for k, v in fields]
    if draw(st.booleans()):  # the bomb pattern, at a random size
        width, levels = draw(st.integers(2, 12)), draw(st.integers(1, 9))
        lines += [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "---\n" + "\n".join(lines) + "\n---\n# Title\n\nBody text. Second sentence.\n"


@FUZZ
@given(_frontmatter())
def test_random_yaml_parses_or_is_one_line_within_the_limits(text: str) -> None:
    note = _note_or_problem(text)
    if note is not None:
        payload = json.dumps(_jsonable(note.frontmatter))
        assert len(payload) < 40 * SETTINGS.frontmatter_max_nodes  # expanded size stays bounded
        _chunks_hold_invariants(note)


# --- random Markdown nesting --------------------------------------------------------------------

_PREFIXES = st.sampled_from(["> ", "- ", "1. ", "  ", "    ", "> [!note] ", "* ", ">"])
_LINES = st.sampled_from(
    ["text here.", "```", "~~~", "# H", "## Section", "### Sub", "| a | b |", "|---|---|", "<div>", "</div>",
     "[[link]]", "![[embed]]", "[x](y)", "`code`", "$$", "---", "", "***", "- [ ] task", "<!-- c", "-->"]
)


@st.composite
def _nested_markdown(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 25))):
        prefix = "".join(draw(st.lists(_PREFIXES, max_size=draw(st.sampled_from([3, 8, 40])))))
        lines.append(prefix + draw(_LINES))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@FUZZ
@given(_nested_markdown())
def test_random_markdown_nesting_chunks_with_invariants(body: str) -> None:
    note = _note_or_problem(body)
    if note is not None:
        _chunks_hold_invariants(note)


# --- mindnet-chunk stdin -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_BYTES | _nested_markdown().map(str.encode))
def test_chunk_stdin_prints_chunks_or_one_error_line(data: bytes) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with mock.patch.object(sys, "argv", ["mindnet-chunk", "-"]), mock.patch.object(sys, "stdin", stdin), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            launch.chunk_main()
        except SystemExit as exc:
            code = int(exc.code or 0)
    if code == 0:
        assert err.getvalue() == ""
        for line in out.getvalue().splitlines():
            assert json.loads(line)["path"] == "<stdin>"
    else:
        assert code == 1 and out.getvalue() == ""
        (line,) = err.getvalue().splitlines()
        assert line.startswith("<stdin>") and ": error: " in line


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_bomb_levels_below_the_limit_still_import(depth: int) -> None:
    """The limit refuses bombs, not ordinary anchors: a few aliases of a short list parse as before."""
    text = "---\nbase: &b [x, y]\n" + "".join(f"k{i}: *b\n" for i in range(depth)) + "---\nbody\n"
    note = _note_or_problem(text)
    assert note is not None and note.frontmatter["k0"] == ["x", "y"]
