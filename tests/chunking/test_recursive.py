"""Strategy `recursive` (R13): Elasticsearch's documented behaviour, its validation, and R11 tiling."""

from __future__ import annotations

import itertools
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet.chunking.base import ChunkSpan
from mindnet.chunking.recursive import (
    SEPARATOR_GROUPS,
    WORD,
    chunk_recursive,
    count_words,
    separators_of,
    validate,
)
from mindnet.chunking.sentences import sentence_spans
from mindnet.config import RecursiveSettings
from mindnet.errors import ChunkingError, ConfigError

TEN = "This {} test sentence has ten total words in it."
"""Elasticsearch's test sentence (RecursiveChunkerTests): exactly ten words."""


def texts(body: str, spans: list[ChunkSpan]) -> list[str]:
    return [body[s.char_start : s.char_end] for s in spans]


def custom(max_chunk_size: int, *separators: str, overlap: int = 0) -> RecursiveSettings:
    return RecursiveSettings(
        max_chunk_size=max_chunk_size, separator_group=None, separators=separators, sentence_overlap=overlap
    )


def assert_tiles(body: str, spans: list[ChunkSpan]) -> None:
    """R11 with overlap 0: contiguous, no gaps, first at 0, last at the body's end."""
    assert spans, "a body with words gives at least one chunk"
    assert spans[0].char_start == 0
    assert spans[-1].char_end == len(body)
    for prev, cur in itertools.pairwise(spans):
        assert prev.char_end == cur.char_start
    for s in spans:
        assert s.char_start == s.content_start < s.char_end
        assert s.section_title is None and s.section_path is None


# --- words ------------------------------------------------------------------------------------


def test_word_regex_keeps_contractions_and_decimal_numbers_whole() -> None:
    assert [m.group() for m in WORD.finditer("Don't pay 3,50 € or 1.000.000 — it’s 12.5%.")] == [
        "Don't",
        "pay",
        "3,50",
        "or",
        "1.000.000",
        "it’s",
        "12.5",
    ]
    assert count_words("Straße, Ärger und Öl: drei Wörter?") == 6


# --- Elasticsearch's documented behaviour -----------------------------------------------------


def test_blog_example_splits_a_markdown_document_at_its_two_top_heading_levels() -> None:
    """The example of Elastic's blog post (seed 004): `\\n# ` then `\\n## `, max 25 words.

    The seed lost the post's code blocks, so the document is rebuilt from its description and
    Elasticsearch's ten-word test sentence: each section is a 2-word heading plus 10 words.
    As the post notes, the newline ending each section (except the last) lies inside the chunk.
    """
    names = ["First", "Second", "Third", "Fourth", "Fifth"]
    marks = ["#", "##", "#", "##", "##"]
    body = "\n\n".join(f"{m} {n} Header\n{TEN.format(n.lower())}" for m, n in zip(marks, names, strict=True))
    spans = chunk_recursive(body, custom(25, r"\n# ", r"\n## "))
    assert texts(body, spans) == [
        f"# First Header\n{TEN.format('first')}\n\n## Second Header\n{TEN.format('second')}\n",
        f"\n# Third Header\n{TEN.format('third')}\n\n## Fourth Header\n{TEN.format('fourth')}\n",
        f"\n## Fifth Header\n{TEN.format('fifth')}",
    ]
    assert_tiles(body, spans)


def test_input_within_max_is_one_chunk_even_with_separators() -> None:
    body = "one two\n\nthree four\n\nfive"
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    assert [(s.char_start, s.char_end) for s in spans] == [(0, len(body))]


def test_separator_text_begins_the_next_piece() -> None:
    part = " ".join(["word"] * 8)
    body = f"{part}<sep>{part}<sep>{part}"
    spans = chunk_recursive(body, custom(10, "<sep>"))
    assert texts(body, spans) == [part, f"<sep>{part}", f"<sep>{part}"]


def test_separator_is_a_regex_and_patterns_use_multiline_anchors() -> None:
    body = "\n".join(f"{i}. " + " ".join(["wort"] * 6) for i in range(1, 4))
    spans = chunk_recursive(body, custom(10, r"^\d+\. "))
    assert [t.lstrip("\n")[:3] for t in texts(body, spans)] == ["1. ", "2. ", "3. "]
    # The cut is at the match start: the newline before "2." still ends chunk one.
    assert texts(body, spans)[0].endswith("\n")


def test_adjacent_pieces_merge_greedily_while_within_max() -> None:
    """Greedy from the left, not balanced: 4+4 fits 10, +4 does not, so 8 | 8 | 4 words."""
    quad = "a b c d"
    body = "|".join([quad] * 5)
    spans = chunk_recursive(body, custom(10, r"\|"))
    assert texts(body, spans) == [f"{quad}|{quad}", f"|{quad}|{quad}", f"|{quad}"]
    assert [count_words(t) for t in texts(body, spans)] == [8, 8, 4]


def test_recursion_uses_the_next_separator_only_inside_the_oversized_piece() -> None:
    """Order of the output is document order; pieces from a deeper level are never merged with
    neighbours from the level above (Elasticsearch merges within one split only)."""
    small = "kurz und klar"
    lines = [" ".join([f"w{i}"] * 6) for i in range(3)]
    body = f"{small}\n\n" + "\n".join(lines) + f"\n\n{small}"
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=10, separator_group="plaintext"))
    assert texts(body, spans) == [
        small,
        f"\n\n{lines[0]}",
        f"\n{lines[1]}",
        f"\n{lines[2]}",
        f"\n\n{small}",
    ]


def test_plaintext_paragraph_separator_needs_exactly_one_blank_line() -> None:
    """`(?<!\\n)\\n\\n(?!\\n)`: two blank lines are not a paragraph break for the first pattern."""
    para = " ".join(["eins"] * 8)
    body = f"{para}\n\n\n{para}"
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    # Neither plaintext pattern matches "\n\n\n", so the sentence fallback cuts, after whitespace.
    assert len(spans) == 2
    assert not texts(body, spans)[1].startswith("\n")


def test_markdown_group_splits_at_setext_headings() -> None:
    para = " ".join(["Inhalt"] * 9) + "."
    body = f"Erster Titel\n============\n{para}\n\nZweiter Titel\n-------------\n{para}"
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=12, separator_group="markdown"))
    assert texts(body, spans) == [f"Erster Titel\n============\n{para}\n", f"\nZweiter Titel\n-------------\n{para}"]


def test_markdown_group_lists_the_patterns_of_r13_in_order() -> None:
    assert SEPARATOR_GROUPS["markdown"] == (
        r"\n# ",
        r"\n## ",
        r"\n### ",
        r"\n#### ",
        r"\n##### ",
        r"\n###### ",
        r"\n^(?!\s*$).*\n-{1,}\n",
        r"\n^(?!\s*$).*\n={1,}\n",
    )
    assert SEPARATOR_GROUPS["plaintext"] == (r"(?<!\n)\n\n(?!\n)", r"(?<!\n)\n(?!\n)")
    assert separators_of(RecursiveSettings()) == SEPARATOR_GROUPS["plaintext"]


def test_sentence_fallback_packs_whole_sentences_greedily() -> None:
    sentences = ["Eins zwei drei vier.", "Fünf sechs sieben acht.", "Neun zehn elf zwölf.", "Ende hier."]
    body = " ".join(sentences)
    spans = chunk_recursive(body, custom(10, "<none>"))
    # 4+4 fits, +4 does not; 4+2 fits. Whitespace after a sentence ends its chunk.
    assert texts(body, spans) == [f"{sentences[0]} {sentences[1]} ", f"{sentences[2]} {sentences[3]}"]


def test_a_sentence_over_max_is_cut_at_word_starts() -> None:
    words = [f"wort{i}" for i in range(25)]
    body = "Start: " + ", ".join(words) + "."
    spans = chunk_recursive(body, custom(10, "<none>"))
    parts = texts(body, spans)
    assert [count_words(p) for p in parts] == [10, 10, 6]
    assert parts[0].startswith("Start: ") and parts[0].endswith("wort8, ")
    assert parts[1].startswith("wort9,") and parts[2].startswith("wort19,")
    assert "".join(parts) == body


def test_the_rest_of_a_giant_sentence_shares_a_chunk_with_the_next_sentence() -> None:
    body = " ".join(["lang"] * 13) + ". Kurz danach."
    parts = texts(body, chunk_recursive(body, custom(10, "<none>")))
    assert [count_words(p) for p in parts] == [10, 5]


def test_wordless_pieces_are_folded_into_a_neighbour() -> None:
    """A leading `---` piece would be its own word-less chunk in Elasticsearch."""
    big = " ".join(["text"] * 12)
    body = f"---\n# {big}"
    spans = chunk_recursive(body, custom(10, r"\n# "))
    assert all(count_words(t) > 0 for t in texts(body, spans))
    assert_tiles(body, spans)
    assert texts(body, spans)[0].startswith("---\n# text")


def test_empty_and_whitespace_bodies_give_no_chunk() -> None:
    assert chunk_recursive("", RecursiveSettings()) == []
    assert chunk_recursive(" \n\n\t", RecursiveSettings()) == []


def test_offsets_index_the_raw_body_nothing_normalised() -> None:
    body = "Café  \r\n" * 3 + "\n\n" + " ".join(["ﬁx"] * 12) + "  \n"
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    assert_tiles(body, spans)
    assert "".join(texts(body, spans)) == body


def test_has_code_marks_chunks_inside_fenced_code() -> None:
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(12)) + "\n```"
    body = " ".join(["Prosa"] * 9) + f"\n\n{code}\n\n" + " ".join(["Schluss"] * 9)
    spans = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    flags = [(body[s.char_start : s.char_end].strip()[:5], s.has_code) for s in spans]
    assert flags[0] == ("Prosa", False)
    assert flags[-1] == ("Schlu", False)
    assert all(has for text, has in flags[1:-1])


# --- overlap ----------------------------------------------------------------------------------


def test_sentence_overlap_repeats_the_last_whole_sentences_of_the_previous_chunk() -> None:
    sentences = [f"Satz {i} ist kurz." for i in range(6)]
    body = " ".join(sentences)
    plain = chunk_recursive(body, custom(10, "<none>"))
    spans = chunk_recursive(body, custom(10, "<none>", overlap=1))
    assert [(s.content_start, s.char_end) for s in spans] == [(s.char_start, s.char_end) for s in plain]
    assert spans[0].char_start == 0
    for prev, cur in itertools.pairwise(spans):
        carried = body[cur.char_start : cur.content_start]
        assert carried.strip() == body[prev.content_start : prev.char_end].strip().split(". ")[-1]
    two = chunk_recursive(body, custom(10, "<none>", overlap=2))
    assert body[two[1].char_start : two[1].content_start].strip() == f"{sentences[0]} {sentences[1]}"


# --- validation (Elasticsearch's messages) ----------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_chunk_size": 5},
            "Validation Failed: 1: [chunking_settings] Invalid value [5.0]. [max_chunk_size] must be greater "
            "than or equal to [10.0];",
        ),
        (
            {"max_chunk_size": 301},
            "Validation Failed: 1: [chunking_settings] Invalid value [301.0]. [max_chunk_size] must be less "
            "than or equal to [300.0];",
        ),
        (
            {"max_chunk_size": 0},
            "Validation Failed: 1: [chunking_settings] Invalid value [0]. [max_chunk_size] must be a positive integer;",
        ),
        (
            {"separator_group": "markdown", "separators": ("\n",)},
            "Validation Failed: 1: Recursive chunking settings can not have both separators and separator_group;",
        ),
        (
            {"separator_group": None, "separators": None},
            "Validation Failed: 1: Recursive chunking settings must have either separators or separator_group;",
        ),
        (
            {"separator_group": None, "separators": ()},
            "Validation Failed: 1: Recursive chunking settings can not have an empty list of separators;",
        ),
        (
            {"separator_group": "html"},
            "Validation Failed: 1: [chunking_settings] Invalid value [html] received. [separator_group] must be "
            "one of [markdown, plaintext];",
        ),
        (
            {"separator_group": None, "separators": ("\n\n", "(abc")},
            "Validation Failed: 1: [chunking_settings] Invalid value [(abc] received. [separators][1] must be a "
            "valid regular expression: missing ), unterminated subpattern at position 0;",
        ),
        (
            {"sentence_overlap": -1},
            "Validation Failed: 1: sentence_overlap[-1] must be a non-negative integer;",
        ),
    ],
)
def test_validation_messages(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(RecursiveSettings(**kwargs))  # type: ignore[arg-type]
    assert str(info.value) == message


def test_validation_collects_every_error() -> None:
    with pytest.raises(ConfigError, match=r"1: .*max_chunk_size.*;2: .*separators\]\[0\].*position 1;$"):
        validate(RecursiveSettings(max_chunk_size=400, separator_group=None, separators=("a[b",)))


def test_validation_accepts_the_limits_and_returns_tuples() -> None:
    assert validate(RecursiveSettings(max_chunk_size=10)).max_chunk_size == 10
    checked = validate(RecursiveSettings(300, None, ["\n\n"], 0))  # type: ignore[arg-type]
    assert checked.separators == ("\n\n",)


def test_chunking_validates_its_settings() -> None:
    with pytest.raises(ConfigError, match="max_chunk_size"):
        chunk_recursive("text", RecursiveSettings(max_chunk_size=3))


# --- catastrophic patterns --------------------------------------------------------------------


def test_catastrophic_user_pattern_is_stopped_and_reported() -> None:
    body = " ".join(["wort"] * 20) + "\n" + "a" * 1000 + "b"
    started = time.monotonic()
    with pytest.raises(ChunkingError) as info:
        chunk_recursive(body, custom(10, r"\n\n", r"(a+)+$"), note_path="notes/evil.md", time_limit=0.5)
    assert time.monotonic() - started < 5
    assert str(info.value).startswith("notes/evil.md: separator [(a+)+$] took longer than 0.5s")


def test_guarded_path_gives_the_same_chunks_as_in_process() -> None:
    body = "\n\n".join(" ".join([f"p{i}"] * 7) for i in range(6))
    guarded = chunk_recursive(body, custom(10, r"(?<!\n)\n\n(?!\n)", r"(?<!\n)\n(?!\n)"))
    trusted = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    assert guarded == trusted


# --- properties (R11, R13) --------------------------------------------------------------------

_TOKENS = st.sampled_from(
    [
        *("Wort", "word", "don't", "3,50", "Straße", "x", "Ende.", ".", ",", "!", "?", " ", " ", " "),
        *("\n", "\n\n", "\n\n\n", "# ", "## ", "### ", "\n# ", "\n## ", "---", "\n===\n", "- ", "```"),
        *("„", "“", "\t", "  ", "[[Link. Ziel]]", "`a. b`"),
    ]
)
_BODIES = st.one_of(
    st.lists(_TOKENS, max_size=40).map("".join),
    st.lists(_TOKENS, min_size=60, max_size=400).map("".join),  # over max: every level gets used
)


def _allowed_cuts(body: str, patterns: tuple[str, ...], cuts: list[int]) -> set[int]:
    """Positions where a cut may lie: a separator match start, or a sentence or word start."""
    allowed: set[int] = set()
    ends = [*cuts, len(body)]
    for source in patterns:
        pattern = re.compile(source, re.M)
        for c in cuts:
            if any(pattern.match(body, c, e) for e in ends if e > c) or pattern.match(body, c):
                allowed.add(c)
    allowed.update(m.start() for m in WORD.finditer(body))
    allowed.update(i for i in range(1, len(body)) if body[i - 1].isspace() and not body[i].isspace())
    allowed.update(s for s, _ in sentence_spans(body))
    # The fallback splits a piece, not the body, so a sentence may also start right after end
    # punctuation (and closing quotes or brackets) without any space, e.g. "Ende.[[Link]]".
    allowed.update(m.end() for m in re.finditer(r"[.!?…][)\]}\"'”’»«›‹*_~]*", body))
    # Sentence starts as `sentence_spans` sees the pieces around each cut (it may cut without a
    # space, e.g. after "`panic!`" in "`panic!`-Aufruf").
    bounds = [0, *cuts, len(body)]
    for i in range(1, len(cuts) + 1):
        start = bounds[i - 1]
        for end in bounds[i + 1 : i + 3]:
            allowed.update(start + s for s, _ in sentence_spans(body[start:end]))
    return allowed


def _check_properties(body: str, config: RecursiveSettings) -> None:
    spans = chunk_recursive(body, config)
    if not body.strip():
        assert spans == []
        return
    assert_tiles(body, spans)
    for text in texts(body, spans):
        assert count_words(text) <= config.max_chunk_size, text
        assert count_words(text) > 0 or len(spans) == 1
    cuts = [s.char_start for s in spans[1:]]
    allowed = _allowed_cuts(body, separators_of(config), cuts)
    assert set(cuts) <= allowed, [c for c in cuts if c not in allowed]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_BODIES, size=st.integers(10, 30), group=st.sampled_from(["plaintext", "markdown"]))
def test_r11_r13_groups_tile_bound_and_cut_at_boundaries(body: str, size: int, group: str) -> None:
    _check_properties(body, RecursiveSettings(max_chunk_size=size, separator_group=group))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=_BODIES,
    size=st.integers(10, 20),
    separators=st.lists(st.sampled_from([r"\n\n", r"\n", r"#+ ", r"[.!?] ", r"^- ", r"(?=W)", ""]), min_size=1),
)
def test_r11_r13_custom_separators_tile_bound_and_cut_at_boundaries(
    body: str, size: int, separators: list[str]
) -> None:
    _check_properties(body, custom(size, *separators))


@settings(max_examples=100, deadline=None)
@given(body=_BODIES, overlap=st.integers(1, 3))
def test_r11_overlap_new_content_tiles_and_overlap_is_whole_trailing_sentences(body: str, overlap: int) -> None:
    config = RecursiveSettings(max_chunk_size=10, sentence_overlap=overlap)
    spans = chunk_recursive(body, config)
    plain = chunk_recursive(body, RecursiveSettings(max_chunk_size=10))
    assert [(s.content_start, s.char_end) for s in spans] == [(s.char_start, s.char_end) for s in plain]
    for prev, cur in itertools.pairwise(spans):
        assert prev.content_start <= cur.char_start <= cur.content_start
        starts = [prev.content_start + s for s, _ in sentence_spans(body[prev.content_start : prev.char_end])]
        assert cur.char_start in starts
        assert len([s for s in starts if s >= cur.char_start]) <= overlap
