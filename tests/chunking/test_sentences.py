"""Sentence spans (R8: a chunk never ends inside a sentence; R10 overlap; R13 fallback) and R13 words."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus
from mindnet.chunking.sentences import WORD, _trimmed, sentence_spans, word_spans

GOLD: list[tuple[str, str, list[str]]] = [
    # German ordinals
    ("de", "Am 3. September 2020 kam er an. Danach ging er.", ["Am 3. September 2020 kam er an.", "Danach ging er."]),
    (
        "de",
        "Im 19. Jh. gab es viele Fabriken. Heute nicht mehr.",
        ["Im 19. Jh. gab es viele Fabriken.", "Heute nicht mehr."],
    ),
    (
        "de",
        "Die Sitzung ist am 1. Januar. Der 2. Platz geht an Anna. Im 3. Quartal wächst es.",
        ["Die Sitzung ist am 1. Januar.", "Der 2. Platz geht an Anna.", "Im 3. Quartal wächst es."],
    ),
    # German abbreviations
    ("de", "Es gibt z. B. Äpfel. Auch z.B. Birnen gibt es.", ["Es gibt z. B. Äpfel.", "Auch z.B. Birnen gibt es."]),
    ("de", "Es bleibt, d. h. alles bleibt. Gut.", ["Es bleibt, d. h. alles bleibt.", "Gut."]),
    ("de", "Er sagt u. a. das. Sie nicht.", ["Er sagt u. a. das.", "Sie nicht."]),
    ("de", "Zwei bzw. drei Stück. Mehr nicht.", ["Zwei bzw. drei Stück.", "Mehr nicht."]),
    ("de", "Es kostet ca. 5 Euro. Das ist billig.", ["Es kostet ca. 5 Euro.", "Das ist billig."]),
    (
        "de",
        "Der Umsatz betrug 3 Mio. Euro im Jahr. Danach stieg er.",
        ["Der Umsatz betrug 3 Mio. Euro im Jahr.", "Danach stieg er."],
    ),
    ("de", "Siehe Nr. 5 im Katalog. Danke.", ["Siehe Nr. 5 im Katalog.", "Danke."]),
    ("de", "Dr. Müller kommt morgen. Prof. Schmidt nicht.", ["Dr. Müller kommt morgen.", "Prof. Schmidt nicht."]),
    ("de", "Vgl. Abschnitt 2. Weiter geht es.", ["Vgl. Abschnitt 2.", "Weiter geht es."]),
    ("de", "Äpfel, Birnen usw. sind Obst. Gemüse nicht.", ["Äpfel, Birnen usw. sind Obst.", "Gemüse nicht."]),
    (
        "de",
        "Sprachen wie Python, Rust etc. sind beliebt. Gut.",
        ["Sprachen wie Python, Rust etc. sind beliebt.", "Gut."],
    ),
    # English abbreviations
    ("en", "Use a tool, e.g. Ruff, for linting. It is fast.", ["Use a tool, e.g. Ruff, for linting.", "It is fast."]),
    ("en", "Pick one, i.e. the first. Then stop.", ["Pick one, i.e. the first.", "Then stop."]),
    ("en", "Dr. Smith met Mr. Jones. They talked.", ["Dr. Smith met Mr. Jones.", "They talked."]),
    ("en", "See e.g. Dr. Who vs. Batman. Fine.", ["See e.g. Dr. Who vs. Batman.", "Fine."]),
    ("en", "It was Python vs. Rust again. Rust won.", ["It was Python vs. Rust again.", "Rust won."]),
    # protected regions: wikilinks, URLs, inline code, Markdown links
    (
        "de",
        "Siehe [[Notiz 3. Mai. Teil 2]] für mehr. Danke.",
        ["Siehe [[Notiz 3. Mai. Teil 2]] für mehr.", "Danke."],
    ),
    (
        "de",
        "Siehe ![[Bild.v2.png]]. Dann [[a.b|Alias. Mit Punkt]]. Ende.",
        ["Siehe ![[Bild.v2.png]].", "Dann [[a.b|Alias. Mit Punkt]].", "Ende."],
    ),
    (
        "de",
        "Öffne https://example.com/docs/v1.2/index.html. Dann klicke.",
        ["Öffne https://example.com/docs/v1.2/index.html.", "Dann klicke."],
    ),
    ("de", "Rufe `obj.method(). Next()` auf. Fertig.", ["Rufe `obj.method(). Next()` auf.", "Fertig."]),
    (
        "de",
        "Siehe [Doku. Teil](https://x.de/a.b) hier. Ende.",
        ["Siehe [Doku. Teil](https://x.de/a.b) hier.", "Ende."],
    ),
    # line breaks, paragraphs, CRLF, emoji, quotes, numbers
    (
        "de",
        "Erster Satz.\r\nZweiter Satz ohne Punkt\r\nweiter hier.\r\n\r\nNeuer Absatz",
        ["Erster Satz.", "Zweiter Satz ohne Punkt\r\nweiter hier.", "Neuer Absatz"],
    ),
    (
        "de",
        "Eine Zeile ohne Punkt\nund die Fortsetzung. Zweiter Satz.\n\nAbsatz zwei",
        ["Eine Zeile ohne Punkt\nund die Fortsetzung.", "Zweiter Satz.", "Absatz zwei"],
    ),
    ("de", "Liste:\n- eins\n- zwei\n\nDanach.", ["Liste:\n- eins\n- zwei", "Danach."]),
    ("de", "Kein Punkt\n\nAuch keiner\r\n \r\nDritter", ["Kein Punkt", "Auch keiner", "Dritter"]),
    ("de", "Das ist toll 🎉. Wirklich 😀! Ja.", ["Das ist toll 🎉.", "Wirklich 😀!", "Ja."]),
    ("de", "Er sagte: „Ja.“\nDann ging er.", ["Er sagte: „Ja.“", "Dann ging er."]),
    (
        "de",
        "Die Größe ist 1.000,5 m². Übermorgen. Öl ist teuer.",
        ["Die Größe ist 1.000,5 m².", "Übermorgen.", "Öl ist teuer."],
    ),
    ("de", "  \n\n  Text. Mehr.  \n", ["Text.", "Mehr."]),
    ("de", "", []),
    ("de", " \r\n\t ", []),
]


def _spans_of(text: str, sentences: list[str]) -> list[tuple[int, int]]:
    """Exact offsets of the expected sentences, found in order."""
    spans, cursor = [], 0
    for sentence in sentences:
        start = text.index(sentence, cursor)
        spans.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    return spans


@pytest.mark.parametrize(("lang", "text", "sentences"), GOLD, ids=[g[1][:40] for g in GOLD])
def test_gold_sentences(lang: str, text: str, sentences: list[str]) -> None:
    assert sentence_spans(text, lang=lang) == _spans_of(text, sentences)


def _check_invariants(text: str, spans: list[tuple[int, int]]) -> None:
    """Ordered, disjoint, non-empty, stripped, covering every non-whitespace character."""
    for start, end in spans:
        assert 0 <= start < end <= len(text)
        assert not text[start].isspace()
        assert not text[end - 1].isspace()
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start
        assert text[end:start].strip() == "", "a non-whitespace character fell between two sentences"
    if spans:
        assert text[: spans[0][0]].strip() == ""
        assert text[spans[-1][1] :].strip() == ""
    else:
        assert text.strip() == ""


_WORDS = st.sampled_from(
    ["Haus", "größer", "Öl", "über", "Straße", "the", "Test", "x", "A", "3", "19", "2020", "1.000,5", "😀", "🎉"]
)
_GLUE_WORDS = st.sampled_from(
    [
        "am 3.",
        "im 19. Jh.",
        "z. B.",
        "d. h.",
        "u. a.",
        "bzw.",
        "ca.",
        "Mio.",
        "Nr.",
        "Dr.",
        "vgl.",
        "usw.",
        "etc.",
        "e.g.",
        "i.e.",
        "vs.",
    ]
)
_PUNCT = st.sampled_from([". ", "! ", "? ", ", ", " ", " ", " ", ".\n", "\n", "\r\n", "\n\n", "\r\n\r\n", ": "])
_LINK_TEXT = st.text(st.sampled_from(list("ab. Ü?!|#^-")), min_size=1, max_size=12)
_CODE_TEXT = st.text(st.sampled_from(list("ab. X?!()=")), min_size=1, max_size=12)
_URL_PATH = st.text(st.sampled_from(list("ab.1/-?=")), max_size=12)


@st.composite
def _notes(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """Markdown-ish prose with wikilinks, inline code and URLs; returns the text and those regions."""
    parts: list[str] = []
    protected: list[tuple[int, int]] = []
    length = 0
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["word", "word", "glue", "link", "code", "url"]))
        if kind == "word":
            piece = draw(_WORDS)
        elif kind == "glue":
            piece = draw(_GLUE_WORDS)
        elif kind == "link":
            piece = "[[" + draw(_LINK_TEXT) + "]]"
        elif kind == "code":
            piece = "`" + draw(_CODE_TEXT) + "`"
        else:
            piece = "https://example.org/" + draw(_URL_PATH) + "x"
        if kind in ("link", "code", "url"):
            protected.append((length, length + len(piece)))
        parts.append(piece)
        length += len(piece)
        separator = draw(_PUNCT)
        parts.append(separator)
        length += len(separator)
    return "".join(parts), protected


@settings(max_examples=400, deadline=None)
@given(note=_notes(), lang=st.sampled_from(["de", "en"]))
def test_spans_ordered_disjoint_covering_and_never_inside_protected(
    note: tuple[str, list[tuple[int, int]]], lang: str
) -> None:
    text, protected = note
    spans = sentence_spans(text, lang=lang)
    _check_invariants(text, spans)
    for start, end in protected:
        # Each protected region lies inside exactly one sentence.
        assert any(a <= start and end <= b for a, b in spans), (text[start:end], spans)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200), lang=st.sampled_from(["de", "en"]))
def test_spans_invariants_on_arbitrary_text(text: str, lang: str) -> None:
    _check_invariants(text, sentence_spans(text, lang=lang))


@pytest.mark.slow
def test_spans_invariants_on_corpus_files() -> None:
    paths = sorted(corpus("msdocs-skype-teams-de/docs").rglob("*.md"))[::10]
    paths += sorted(corpus("foam-docs/vault").rglob("*.md"))
    assert len(paths) > 300
    wikilink = re.compile(r"\[\[[^\r\n]*?\]\]")
    for path in paths:
        text = path.read_text(encoding="utf-8")
        spans = sentence_spans(text, lang="en" if "foam" in str(path) else "de")
        _check_invariants(text, spans)
        for m in wikilink.finditer(text):
            assert any(a <= m.start() and m.end() <= b for a, b in spans), (path, m[0])


def test_word_spans_follow_r13() -> None:
    text = "Größe's 1.000,5 don’t x_y 3.5. Ende"
    assert [text[a:b] for a, b in word_spans(text)] == ["Größe's", "1.000,5", "don’t", "x_y", "3.5", "Ende"]
    assert WORD.pattern == r"\w+(?:['’]\w+|(?<=\d)[.,]\d+)*"


def test_segments_are_found_when_sentencex_offsets_do_not_slice_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from mindnet.chunking import sentences

    real = sentences.get_sentence_boundaries

    def byte_offsets(lang: str, text: str) -> list[dict]:
        out = []
        for b in real(lang, text):
            start = len(text[: b["start_index"]].encode("utf-8"))
            out.append({**b, "start_index": start, "end_index": start + len(b["text"].encode("utf-8"))})
        return out

    monkeypatch.setattr(sentences, "get_sentence_boundaries", byte_offsets)
    text = "Größe 😀 ist gut. Öl ist teuer! Ende."
    assert [text[a:b] for a, b in sentence_spans(text)] == ["Größe 😀 ist gut.", "Öl ist teuer!", "Ende."]


def _walked(text: str, cuts: list[int]) -> list[tuple[int, int]]:
    """The slow path `_trimmed` replaces for uncut text: walk in from both ends of every piece."""
    spans = []
    for start, end in itertools.pairwise([0, *cuts, len(text)]):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            spans.append((start, end))
    return spans


_SPACEY = st.text(
    alphabet=st.sampled_from([*"ab.Ä😀 \t\n\r\x0b\x0c\x1c\x1d\x85", "\u00a0", "\u2028", "\u3000", "\u200b"]),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(text=_SPACEY, cuts=st.lists(st.integers(0, 40), max_size=4))
def test_trimmed_strips_exactly_what_the_walk_strips(text: str, cuts: list[int]) -> None:
    """`str.strip` and `str.isspace` agree on every character (NBSP, U+2028, U+001C, U+0085, CRLF, empty)."""
    points = sorted({c for c in cuts if 0 < c < len(text)})
    assert _trimmed(text, points) == _walked(text, points)
    assert _trimmed(text, []) == _walked(text, [])
