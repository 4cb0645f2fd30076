"""Sentence and word spans for German and English text (R8 sentence cuts, R10 overlap, R13 fallback).

Sentence boundaries come from `sentencex` (rule-based, offline, ~300 languages), which reports
char offsets (`get_sentence_boundaries`). On top of it this module applies the rules a Markdown
note needs and sentencex does not know:

- A cut is vetoed inside a protected region: `[[wikilinks]]` (and `![[embeds]]`), inline code
  spans, URLs and Markdown links, whose dots are not sentence ends.
- German ordinals and abbreviations glue to the next word ("am 3. September", "im 19. Jh. gab",
  "z. B.", "Dr. Müller"), and so do the English "e.g.", "i.e.", "Dr.", "vs.". The lists are
  applied whatever `lang` says, because notes mix both languages.
- A line break inside a paragraph is not a boundary unless the line ends in sentence punctuation
  (a soft-wrapped paragraph, or a list whose items lack full stops, stays one unit), while a blank
  line always is one.

Only sentencex's cuts are ever removed and blank lines added: the rules never invent a cut of
their own inside a paragraph, so a misfiring rule can lengthen a sentence but never break a word.

Throughput (`python -m mindnet.chunking.sentences FOLDER` prints it): docs/benchmarks.md, "Chunking speed".
"""

from __future__ import annotations

import bisect
import re
import sys
import time
from itertools import accumulate, pairwise
from pathlib import Path
from typing import TypeAlias

from sentencex import get_sentence_boundaries

Span: TypeAlias = tuple[int, int]
"""Half-open char range `[start, end)` into the text given."""

WORD = re.compile(r"\w+(?:['’]\w+|(?<=\d)[.,]\d+)*")
"""A word as R13 counts it: letters/digits, with inner apostrophes and decimal separators."""

_BREAK = r"(?:\r\n|\r(?!\n)|\n)"
"""One line break; a CR directly before LF is part of CRLF, never a line of its own."""
_HSPACE = r"[^\S\r\n]"
_PARAGRAPH_BREAK = re.compile(rf"{_BREAK}(?:{_HSPACE}*{_BREAK})+")
"""A line break followed by at least one line of nothing but whitespace (CRLF and CR too)."""

_WIKILINK = re.compile(r"!?\[\[[^\r\n]*?\]\]")
"""Obsidian links and embeds; Obsidian does not let them span lines."""
_CODE_SPAN = re.compile(rf"(?<!`)(`+)(?!`)(?:(?!{_BREAK}{_HSPACE}*{_BREAK}).)+?(?<!`)\1(?!`)", re.S)
"""CommonMark inline code: a backtick run closed by a run of the same length, within a paragraph."""
_URL = re.compile(r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>()\[\]`]*[^\s<>()\[\]`.,;:!?'\"»”’]")
"""A bare URL; trailing punctuation is left outside so a sentence may end right after it."""
_MARKDOWN_LINK = re.compile(r"!?\[[^\]\r\n]*\]\([^)\r\n]*\)")

_STRONG_ABBREVIATIONS = (
    "z. B.", "d. h.", "u. a.", "u. U.", "o. Ä.", "s. o.", "s. u.", "v. a.", "z. T.", "i. d. R.",
    "u. v. m.", "bzw.", "ca.", "Mio.", "Mrd.", "Nr.", "Dr.", "Prof.", "vgl.", "bspw.", "ggf.",
    "evtl.", "inkl.", "zzgl.", "sog.", "Hrsg.", "e.g.", "i.e.", "vs.", "Mr.", "Mrs.", "Ms.", "cf.",
    "approx.",
)  # fmt: skip
"""Never end a sentence: always glued to the next word."""
_WEAK_ABBREVIATIONS = ("usw.", "etc.", "Jh.", "Fig.", "No.", "S.", "Art.", "Abs.")
"""Often end a sentence ("… Birnen usw. Dann"): glued only when a lower-case word or a digit follows."""

_MONTHS = frozenset({
    "Januar", "Jänner", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
    "Oktober", "November", "Dezember", "Jan", "Feb", "Mär", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept",
    "Okt", "Nov", "Dez",
})  # fmt: skip
_ORDINAL_NOUNS = frozenset({
    "Jh", "Jahrhundert", "Jahrhunderts", "Jahrtausend", "Jahrtausends", "Mal", "Platz", "Stock",
    "Stockwerk", "Klasse", "Auflage", "Kapitel", "Liga", "Runde", "Tag", "Tages", "Woche", "Monat",
    "Quartal", "Semester", "Ordnung", "Grad", "Grades", "Generation", "Geburtstag", "Jahrestag",
    "Weltkrieg", "Weltkriegs", "Advent", "Sonntag", "Spieltag", "Etage", "Ausgabe", "Band",
})  # fmt: skip
"""Capitalised nouns that typically follow a German ordinal ("im 3. Quartal")."""
_ORDINAL_LEADS = frozenset({
    "am", "im", "vom", "zum", "zur", "beim", "ab", "bis", "seit", "nach", "vor", "um", "ins", "ans",
    "der", "die", "das", "dem", "den", "des", "ein", "eine", "einem", "einen", "einer", "jeder", "jede",
    "jedem", "jeden", "jedes", "dieser", "diese", "diesem", "diesen", "dieses",
})  # fmt: skip
"""Words before a number that make "N." an ordinal ("seit dem 3. Tag", "am 3. …")."""
_SENTENCE_END = frozenset(".!?…‼⁇⁈⁉")
_CLOSERS = frozenset(")]}\"'“”‘’»«›‹*_~")
"""Closing quotes, brackets and emphasis that may follow the end punctuation of a line."""


def _abbreviation_pattern(abbreviations: tuple[str, ...]) -> str:
    """Alternation for abbreviations, inner spaces optional ("z.B." and "z. B."), capitalised too."""
    variants: set[str] = set()
    for abbreviation in abbreviations:
        parts = abbreviation.replace(" ", "").rstrip(".").split(".")
        variants.add(rf"\.{_HSPACE}?".join(map(re.escape, parts)) + r"\.")
        if parts[0][0].islower():
            parts[0] = parts[0][0].upper() + parts[0][1:]
            variants.add(rf"\.{_HSPACE}?".join(map(re.escape, parts)) + r"\.")
    # NOTE: longest first, so "u. v. m." wins over "u." prefixes of other entries.
    return "|".join(sorted(variants, key=len, reverse=True))


_GLUE = re.compile(
    rf"(?<![\w.])(?:(?P<strong>{_abbreviation_pattern(_STRONG_ABBREVIATIONS)})"
    rf"|(?P<weak>{_abbreviation_pattern(_WEAK_ABBREVIATIONS)})"
    rf"|(?<![,])(?P<ordinal>\d{{1,3}}\.))"
    rf"{_HSPACE}*(?:{_BREAK}{_HSPACE}*)?(?=(?P<next>[^\s]))"
)
"""An abbreviation or ordinal candidate, and (looked ahead, so "e.g. Dr. Who" finds both) the first
character of the word after it."""
_GLUE_REACH = 16
"""Window either side of a cut searched for `_GLUE`: longer than any abbreviation plus its space."""
_WORD_AT = re.compile(r"\w+")
_LAST_WORD = re.compile(r"(\w+)\W*$")
_LINE_PREFIX = re.compile(r"[ \t>*+#-]*")
"""Only indentation, quote and list markers or heading hashes: what may precede "1." on its line."""


def word_spans(text: str) -> list[Span]:
    """Spans of the words of `text` as R13 defines a word (`WORD`)."""
    return [m.span() for m in WORD.finditer(text)]


def sentence_spans(text: str, lang: str = "de") -> list[Span]:
    """Sentence spans of `text`, stripped of surrounding whitespace.

    Args:
        text: any text; Markdown syntax is kept as it is.
        lang: ISO 639-1 code passed to sentencex (German and English are what mindnet needs; the
            abbreviation and ordinal rules apply to every language).

    Returns:
        Half-open char spans in order, non-overlapping, none empty, each starting and ending on a
        non-whitespace character, together covering every non-whitespace character of `text`.
        Never cut inside `[[…]]`, inline code, a URL or a Markdown link.
    """
    # Most paragraphs are one line: a blank line needs a line break, so the scan runs only where one is.
    cuts = {m.end() for m in _PARAGRAPH_BREAK.finditer(text)} if "\n" in text or "\r" in text else set()
    found = _sentencex_cuts(text, lang)
    if found:
        cuts.update(_kept_cuts(text, found))
    return _trimmed(text, sorted(cuts))


def _kept_cuts(text: str, found: list[int]) -> list[int]:
    """The sentencex cuts no rule vetoes; the protected regions are found only for a text that has cuts
    to judge (half the paragraphs and list items are one sentence)."""
    protected = _protected_regions(text)
    starts = [s for s, _ in protected]
    reach = list(accumulate((e for _, e in protected), max))
    kept: list[int] = []
    gap = (-1, -1, True)  # the last whitespace gap judged: sentencex cuts inside one gap share a verdict
    for cut in found:
        if not gap[0] <= cut <= gap[1]:
            end, begin = _gap_around(text, cut)
            gap = (end, begin, _vetoed(text, end, begin, starts, reach))
        if not gap[2]:
            kept.append(cut)
    return kept


def _trimmed(text: str, cuts: list[int]) -> list[Span]:
    """The non-blank pieces between sorted cuts, stripped of whitespace (`str.strip` strips exactly what
    `str.isspace` calls whitespace, so an uncut text is one strip instead of a walk from each end)."""
    if not cuts:
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        return [(start, end)] if start < end else []
    spans: list[Span] = []
    for start, end in pairwise([0, *cuts, len(text)]):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            spans.append((start, end))
    return spans


SENTENCEX_WHOLE = 20_000
"""Texts up to this many chars go to sentencex whole; longer ones in overlapping windows.

sentencex is quadratic in runs of quote-like characters (200 KB of backticks: 13 s, 5 MB: hours).
Paragraphs and list items are split one by one, and none of the shared corpora's comes near this."""
_WINDOW = 4_000
"""Cuts kept from each window of a long text..."""
_MARGIN = 500
"""...which sentencex sees with this much context either side, so a cut near a window edge is judged
as it would be in the whole text (a sentence start needs only a few chars of context)."""


def _sentencex_cuts(text: str, lang: str) -> list[int]:
    """Offsets where sentencex starts a new sentence (after the previous one's trailing space)."""
    if len(text) <= SENTENCEX_WHOLE:
        return _sentencex_text_cuts(text, lang)
    cuts: list[int] = []
    for core in range(0, len(text), _WINDOW):
        begin, end = max(0, core - _MARGIN), min(len(text), core + _WINDOW + _MARGIN)
        found = (begin + c for c in _sentencex_text_cuts(text[begin:end], lang))
        cuts.extend(c for c in found if core <= c < core + _WINDOW)
    return cuts


def _sentencex_text_cuts(text: str, lang: str) -> list[int]:
    if not text:
        return []
    boundaries = get_sentence_boundaries(lang, text)
    if all(text[b["start_index"] : b["end_index"]] == b["text"] for b in boundaries):
        return [b["start_index"] for b in boundaries[1:]]
    # Trigger: offsets that do not slice back to the segment (a sentencex version counting bytes
    # or UTF-16 units). Why: spans must index `text`. Outcome: find each segment in order instead.
    cuts: list[int] = []
    cursor = 0
    for b in boundaries:
        core = b["text"].strip()
        found = text.find(core, cursor) if core else -1
        if found < 0:
            continue
        if cursor:
            cuts.append(found)
        cursor = found + len(core)
    return cuts


def _protected_regions(text: str) -> list[Span]:
    """Links, code and URLs, sorted by start; they may overlap."""
    # Each regex runs only on text holding its literal part: most sentences hold neither, and the
    # two scans cost more than sentencex itself.
    regions = [m.span() for m in _CODE_SPAN.finditer(text)] if "`" in text else []
    if "://" in text or "www." in text:
        regions.extend(m.span() for m in _URL.finditer(text))
    regions.extend(_wikilink_spans(text))
    regions.extend(_markdown_link_spans(text))
    regions.sort()
    return regions


_LINE_END = re.compile(r"[\r\n]|\Z")
_BRACKET_END = re.compile(r"[\]\r\n]|\Z")
_PAREN_END = re.compile(r"[)\r\n]|\Z")


def _wikilink_spans(text: str) -> list[Span]:
    """The matches of `_WIKILINK`, found in linear time.

    The regex retried every `[[` of a line and scanned each to the line's end: a line of 100k
    brackets took minutes. Every `[[` of a line shares the first `]]` after it, so a line without
    one is skipped whole. A line's end is found once, not once per link on it: a line of 100k
    `[[n]]` links rescanned its rest for each of them and took minutes too.
    """
    spans: list[Span] = []
    pos = 0
    line_end = -1
    while (i := text.find("[[", pos)) >= 0:
        if i > line_end:
            line_end = _LINE_END.search(text, i).start()
        close = text.find("]]", i + 2, line_end)
        if close < 0:
            pos = line_end
            continue
        start = i - 1 if i > pos and text[i - 1] == "!" else i
        spans.append((start, close + 2))
        pos = close + 2
    return spans


def _markdown_link_spans(text: str) -> list[Span]:
    """The matches of `_MARKDOWN_LINK`, found in linear time (see `_wikilink_spans`).

    Every `[` before the same `]` shares its fate, and every `](` before the same `)` shares its
    closing paren, so each stretch of text is scanned a bounded number of times.
    """
    spans: list[Span] = []
    pos = 0
    paren: tuple[int, int] = (-1, -1)  # last scan for a `)`: (from, to)
    while (i := text.find("[", pos)) >= 0:
        close = _BRACKET_END.search(text, i + 1).start()
        if close >= len(text) or text[close] != "]" or text[close + 1 : close + 2] != "(":
            pos = max(close, i + 1)
            continue
        begin = close + 2
        if not paren[0] <= begin <= paren[1]:
            paren = (begin, _PAREN_END.search(text, begin).start())
        end = paren[1]
        if end >= len(text) or text[end] != ")":
            pos = close
            continue
        start = i - 1 if i > pos and text[i - 1] == "!" else i
        spans.append((start, end + 1))
        pos = end + 1
    return spans


def _glued(text: str, end: int, begin: int) -> bool:
    """Whether an abbreviation or ordinal bound to its next word spans the gap `text[end:begin]`.

    Only a window around the cut is searched: scanning the whole text for the ~90 abbreviation
    variants took more time than sentencex itself. `finditer` with `pos` still sees the
    characters before the window in the pattern's look-behind, so no match starts mid-word.
    """
    for m in _GLUE.finditer(text, max(0, end - _GLUE_REACH), min(len(text), begin + _GLUE_REACH)):
        if m.start() < begin and m.end() + 1 > end and _glues(text, m):
            return True
    return False


def _glues(text: str, m: re.Match[str]) -> bool:
    """Whether an abbreviation or ordinal candidate binds to the word after it."""
    if m["strong"]:
        return True
    following = m["next"]
    if following.islower() or following.isdigit():
        return True
    if m["weak"]:
        return False
    # An ordinal: "am 3. September", "im 19. Jh.", "der 2. Platz", or "1." as a list marker.
    next_word = _WORD_AT.match(text, m.start("next"))
    if next_word and (next_word[0] in _MONTHS or next_word[0] in _ORDINAL_NOUNS):
        return True
    before = text[max(0, m.start() - 40) : m.start()]
    last_word = _LAST_WORD.search(before)
    if last_word and last_word[1].lower() in _ORDINAL_LEADS:
        return True
    line_start = max(text.rfind("\n", 0, m.start()), text.rfind("\r", 0, m.start())) + 1
    return _LINE_PREFIX.fullmatch(text, line_start, m.start()) is not None


def _gap_around(text: str, cut: int) -> tuple[int, int]:
    """The whitespace run around a cut: (end of the previous sentence, start of the next)."""
    end = cut
    while end > 0 and text[end - 1].isspace():
        end -= 1
    begin = cut
    while begin < len(text) and text[begin].isspace():
        begin += 1
    return end, begin


def _vetoed(text: str, end: int, begin: int, starts: list[int], reach: list[int]) -> bool:
    """Whether a sentencex cut in the gap `text[end:begin]` must go: inside a protected region, or a soft line break.

    Judged once per gap: sentencex cuts a run of blank lines many times, and walking the run for
    each cut was quadratic in its length.
    """
    if end == 0 or begin == len(text):
        return False
    # A region [s, e) is split when it starts before the next sentence and ends after the last one.
    k = bisect.bisect_left(starts, begin)
    if (k and reach[k - 1] > end) or _glued(text, end, begin):
        return True
    gap = text[end:begin]
    if "\n" in gap or "\r" in gap:
        last = end - 1
        while last > 0 and text[last] in _CLOSERS:
            last -= 1
        return text[last] not in _SENTENCE_END
    return False


def _benchmark(folder: str) -> None:
    """Print sentences/s and MB/s of `sentence_spans` over every `*.md` below `folder`."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(Path(folder).rglob("*.md"))]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    began = time.perf_counter()
    sentences = sum(len(sentence_spans(t)) for t in texts)
    seconds = time.perf_counter() - began
    print(
        f"{len(texts)} files, {megabytes:.1f} MB, {sentences} sentences in {seconds:.2f} s = "
        f"{sentences / seconds:,.0f} sentences/s, {megabytes / seconds:.2f} MB/s"
    )


if __name__ == "__main__":
    _benchmark(sys.argv[1])
