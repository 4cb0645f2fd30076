"""Strategy `structure` (R7-R10) on hand-written notes, and the invariant checker on broken spans."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from mindnet.chunking.base import ChunkSpan
from mindnet.chunking.invariants import check_chunks
from mindnet.chunking.structure import chunk_structure, list_groups, table_summary
from mindnet.chunking.tokens import Tokenizer, default_tokenizer
from mindnet.config import DEFAULT_PROFILES, DEFAULT_STOP_SECTIONS, Profile
from mindnet.text import normalise

SMALL = Profile(target_min=40, target_max=60, max=80, overlap_min=10, overlap_max=20)
"""Small enough that a few sentences fill a chunk; one test sentence is about 16 tokens."""
SENTENCE = "Satz Nummer {i} erklärt z. B. am 3. September etwas Wichtiges."


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return default_tokenizer()


def run(body: str, tok: Tokenizer, profile: Profile = SMALL, **kwargs: object) -> list[ChunkSpan]:
    """Chunk `body` and assert that every invariant holds, so each test also checks R8/R10/R11."""
    kwargs.setdefault("stop_sections", DEFAULT_STOP_SECTIONS)
    spans = chunk_structure(body, profile, tokenizer=tok, **kwargs)  # type: ignore[arg-type]
    assert check_chunks(body, spans, tok, profile) == []
    return spans


def text(body: str, span: ChunkSpan) -> str:
    return normalise(body[span.char_start : span.char_end])


def new(body: str, span: ChunkSpan) -> str:
    return normalise(body[span.content_start : span.char_end])


def sentences(n: int, start: int = 0) -> str:
    return " ".join(SENTENCE.format(i=i) for i in range(start, start + n))


# --- R7 sections -------------------------------------------------------------------------------


def test_r7_sections_paths_and_titles(tok: Tokenizer) -> None:
    body = (
        "# Titel\n\nEinleitung.\n\n## Teil A\n\nA-Text.\n\n### Unter A\n\nU-Text.\n\n#### Tief\n\nTiefer Text.\n\n"
        "## Teil B\n\nB-Text.\n\n# Anhang\n\nEnde.\n"
    )
    spans = run(body, tok)
    assert [(s.section_path, s.section_title) for s in spans] == [
        ("/", "Titel"),
        ("/Teil A", "Teil A"),
        ("/Teil A/Unter A", "Unter A"),
        ("/Teil B", "Teil B"),
        ("/", "Anhang"),
    ]
    # H1 stays in the preamble's text; H4 stays inside its H3 section.
    assert text(body, spans[0]) == "# Titel\n\nEinleitung."
    assert text(body, spans[2]) == "### Unter A\n\nU-Text.\n\n#### Tief\n\nTiefer Text."


def test_r7_preamble_without_h1_and_h3_before_h2(tok: Tokenizer) -> None:
    body = "Nur Text vorweg.\n\n### Früh\n\nText.\n\n## Spät\n\n### Innen\n\nMehr.\n"
    spans = run(body, tok)
    assert [(s.section_path, s.section_title) for s in spans] == [
        ("/", ""),
        ("/Früh", "Früh"),
        ("/Spät/Innen", "Innen"),
    ]
    # `## Spät` has no text of its own: it opens the `### Innen` chunk instead of standing alone.
    assert body[spans[2].char_start : spans[2].char_end] == "## Spät\n\n### Innen\n\nMehr."


def test_heading_only_title_joins_the_first_section(tok: Tokenizer) -> None:
    body = "# Titel\n\n## Erster Abschnitt\n\nEin Satz.\n\n## Zweiter\n\nNoch einer.\n"
    spans = run(body, tok)
    assert [body[s.char_start : s.char_end] for s in spans] == [
        "# Titel\n\n## Erster Abschnitt\n\nEin Satz.",
        "## Zweiter\n\nNoch einer.",
    ]
    assert [s.section_path for s in spans] == ["/Erster Abschnitt", "/Zweiter"]


def test_heading_run_never_joins_a_stop_section(tok: Tokenizer) -> None:
    body = "## Leer\n\n## Mögliche Verbindungen\n\n- [[A]]\n"
    spans = run(body, tok)
    assert [s.section_path for s in spans] == ["/Leer", "/Mögliche Verbindungen"]


def test_r7_every_h2_h3_starts_a_clean_chunk(tok: Tokenizer) -> None:
    body = "\n\n".join(f"## H{i}\n\n{sentences(5, i * 10)}" for i in range(4))
    spans = run(body, tok)
    heading_starts = [body.index(f"## H{i}") for i in range(4)]
    for start in heading_starts:
        assert any(s.char_start == s.content_start == start for s in spans)
    for span in spans:
        assert body[span.char_start : span.char_end].count("## ") <= 1


# --- R8 packing --------------------------------------------------------------------------------


def test_r8_small_section_is_one_chunk(tok: Tokenizer) -> None:
    body = "## Kurz\n\nErster Absatz.\n\nZweiter Absatz.\n\n- eins\n- zwei\n"
    spans = run(body, tok)
    assert len(spans) == 1
    assert text(body, spans[0]) == normalise(body)


def test_r8_prefers_paragraph_cuts_to_sentence_cuts(tok: Tokenizer) -> None:
    paragraphs = [sentences(2, 10 * i) for i in range(4)]
    body = "\n\n".join(paragraphs)
    spans = run(body, tok, dataclasses.replace(SMALL, overlap_max=0, overlap_min=0))
    for span in spans:
        assert body[span.content_start : span.char_end] in "\n\n".join(paragraphs)
        assert any(body[span.content_start :].startswith(p) for p in paragraphs)


def test_r8_long_paragraph_cut_at_sentence_ends_never_inside(tok: Tokenizer) -> None:
    body = sentences(20)
    spans = run(body, tok)
    assert len(spans) > 3
    for span in spans:
        assert body[span.content_start : span.char_end].endswith("Wichtiges.")
        assert tok.count(text(body, span)) <= SMALL.max
    # German abbreviations and ordinals are not sentence ends.
    assert all(not new(body, s).endswith(("z. B.", "3.")) for s in spans)


def test_r8_sentence_longer_than_max_is_oversize_not_cut(tok: Tokenizer) -> None:
    long_sentence = "Dieser Satz " + " ".join(f"wort{i}" for i in range(120)) + " endet hier."
    body = f"## Lang\n\nKurz davor.\n\n{long_sentence} Danach kurz."
    spans = run(body, tok)
    oversize = [s for s in spans if s.oversize]
    assert len(oversize) == 1
    assert new(body, oversize[0]) == long_sentence
    assert not any(s.oversize for s in spans if s is not oversize[0])


def test_r8_code_is_atomic_and_oversize_when_long(tok: Tokenizer) -> None:
    code = "```python\n" + "\n".join(f"value_{i} = compute({i}, 'x')" for i in range(60)) + "\n```"
    body = f"## Code\n\nVorher.\n\n{code}\n\nNachher ein Satz."
    spans = run(body, tok)
    holding = [s for s in spans if code in body[s.char_start : s.char_end]]
    assert len(holding) == 1 and holding[0].oversize and holding[0].has_code
    assert not any(s.has_code for s in spans if s is not holding[0])


def test_r8_small_code_packs_with_text_and_sets_has_code(tok: Tokenizer) -> None:
    body = "## Code\n\nSo geht es:\n\n```\nx = 1\n```\n\nFertig.\n"
    spans = run(body, tok)
    assert len(spans) == 1 and spans[0].has_code and not spans[0].oversize


# --- R9 elements -------------------------------------------------------------------------------


def test_r9_list_intro_stays_with_first_items_and_groups_of_5_to_8(tok: Tokenizer) -> None:
    items = "\n".join(f"- Punkt {i} mit etwas Text dazu." for i in range(24))
    body = f"## Liste\n\nVorab ein Absatz. Die folgende Liste zeigt alles:\n{items}\n"
    spans = run(body, tok, dataclasses.replace(SMALL, overlap_min=0, overlap_max=0))
    assert len(spans) > 1
    assert "Die folgende Liste zeigt alles:\n- Punkt 0" in text(body, spans[0])
    # 24 items form groups of 8; cuts fall on group boundaries when groups fit the target.
    for span in spans[1:]:
        first_item = int(new(body, span).split("Punkt ", 1)[1].split(" ", 1)[0])
        assert first_item % 8 == 0


def test_r9_list_groups_sizes() -> None:
    assert list_groups(3) == [3]
    assert list_groups(8) == [8]
    assert list_groups(10) == [5, 5]
    assert list_groups(17) == [6, 6, 5]
    assert list_groups(40) == [8] * 5
    assert all(5 <= g <= 8 for n in range(10, 200) for g in list_groups(n))


def test_r9_checklist_is_its_own_chunk_with_intro(tok: Tokenizer) -> None:
    body = "## Aufgaben\n\nErst etwas Prosa hier. Zu tun:\n- [ ] Milch\n- [x] Brot\n\nDanach weiterer Text.\n"
    spans = run(body, tok, DEFAULT_PROFILES["task"])
    assert [new(body, s) for s in spans] == [
        "## Aufgaben\n\nErst etwas Prosa hier.",
        "Zu tun:\n- [ ] Milch\n- [x] Brot",
        "Danach weiterer Text.",
    ]
    assert all(s.char_start == s.content_start for s in spans)


def test_r9_table_own_chunk_with_summary(tok: Tokenizer) -> None:
    table = "| Name | Alter |\n|---|---|\n| Anna | 31 |\n| Ben | 42 |\n| Cem | 27 |"
    body = f"## Daten\n\nText davor.\n\n{table}\n\nText danach.\n"
    spans = run(body, tok, DEFAULT_PROFILES["default"])
    assert [new(body, s) for s in spans] == ["## Daten\n\nText davor.", table, "Text danach."]
    assert spans[1].summary == "Name: Anna; Alter: 31\nName: Ben; Alter: 42"
    assert spans[0].summary is None


def test_r9_table_right_after_heading_keeps_heading() -> None:
    assert table_summary("| a | b |\n| - | - |") == "a; b"
    assert table_summary("a | b\n--|--\n1 | x \\| y") == "a: 1; b: x | y"


def test_r9_quotes_over_two_lines_alone_short_ones_packed(tok: Tokenizer) -> None:
    long_quote = "> Zeile eins\n> Zeile zwei\n> Zeile drei"
    short_quote = "> Kurz zitiert."
    body = f"## Zitate\n\nText eins.\n\n{short_quote}\n\nText zwei.\n\n{long_quote}\n\nText drei.\n"
    spans = run(body, tok, DEFAULT_PROFILES["source"])
    assert [new(body, s) for s in spans] == [
        f"## Zitate\n\nText eins.\n\n{short_quote}\n\nText zwei.",
        long_quote,
        "Text drei.",
    ]


def test_r9_callout_kept_whole(tok: Tokenizer) -> None:
    callout = "> [!note] Hinweis\n> " + "\n> ".join(sentences(8).split(". "))
    body = f"## C\n\n{callout}\n"
    spans = run(body, tok)
    assert len(spans) == 1 and spans[0].oversize


@pytest.mark.parametrize("title", ["Mögliche Verbindungen", "Possible connections", "mögliche verbindungen:"])
def test_r9_stop_section_alone_without_overlap(tok: Tokenizer, title: str) -> None:
    links = "\n".join(f"- [[ziel-{i}]] passt gut zu diesem Gedanken, weil es verwandt ist." for i in range(12))
    body = f"## Inhalt\n\n{sentences(3)}\n\n## {title}\n\n{links}\n"
    spans = run(body, tok)
    stop = [s for s in spans if s.section_title == title]
    assert len(stop) >= 2  # long enough to split, still no overlap
    assert all(s.char_start == s.content_start for s in stop)


def test_r9_stop_sections_configurable_and_deeper_stop_heading(tok: Tokenizer) -> None:
    body = f"## Inhalt\n\n{sentences(2)}\n\n#### Siehe auch\n\n{sentences(6, 10)}\n"
    spans = run(body, tok, stop_sections=("Siehe auch",))
    stop_start = body.index("#### Siehe auch")
    assert any(s.content_start == s.char_start == stop_start for s in spans)
    assert all(s.char_start == s.content_start for s in spans if s.content_start >= stop_start)


# --- R10 overlap -------------------------------------------------------------------------------


def test_r10_overlap_is_whole_sentences_within_cap(tok: Tokenizer) -> None:
    body = sentences(12)
    spans = run(body, tok)
    for prev, span in itertools.pairwise(spans):
        assert span.char_start < span.content_start
        prefix = body[span.char_start : span.content_start].strip()
        assert prefix.startswith("Satz Nummer") and prefix.endswith("Wichtiges.")
        assert body[prev.char_start : prev.char_end].endswith(prefix)
        assert tok.count(normalise(prefix)) <= SMALL.overlap_max


def test_r10_list_overlap_is_previous_item(tok: Tokenizer) -> None:
    items = "\n".join(f"- Punkt {i} mit etwas Text dazu." for i in range(30))
    body = f"## Liste\n\n{items}\n"
    spans = run(body, tok)
    for span in spans[1:]:
        prefix = body[span.char_start : span.content_start].strip()
        assert prefix.startswith("- Punkt") and prefix.count("\n") == 0


def test_r10_no_overlap_from_code_or_into_headings(tok: Tokenizer) -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(30)) + "\n```"
    body = f"## A\n\n{sentences(3)}\n\n{code}\n\n{sentences(3, 10)}\n\n#### Tief\n\n{sentences(3, 20)}\n"
    spans = run(body, tok)
    for span in spans:
        prefix = body[span.char_start : span.content_start]
        assert "```" not in prefix and "#" not in prefix
    after_code = next(s for s in spans if s.content_start > body.index(code))
    assert after_code.char_start == after_code.content_start


# --- R11 offsets and line endings --------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_r11_offsets_exact_with_any_line_ending(tok: Tokenizer, newline: str) -> None:
    lf = f"# T\n\nVorweg 🚀 [[link|Alias]].\n\n## A\n\n{sentences(6)}\n\n- a\n- b\n\n```\ncode  \n```\n"
    body = lf.replace("\n", newline)
    spans = run(body, tok)
    lf_spans = run(lf, tok)
    assert [text(body, s) for s in spans] == [text(lf, s) for s in lf_spans]


def test_r11_obsidian_comment_between_blocks_is_covered(tok: Tokenizer) -> None:
    body = f"## A\n\n{sentences(4)}\n\n%% geheim %%\n\n{sentences(4, 10)}\n"
    spans = run(body, tok)
    assert any("%% geheim %%" in body[s.content_start : s.char_end] for s in spans)


def test_r11_empty_and_blank_bodies(tok: Tokenizer) -> None:
    assert run("", tok) == []
    assert run(" \n\n\t\n", tok) == []


# --- R12 stability -----------------------------------------------------------------------------


def test_r12_deterministic_and_local_to_the_edited_section(tok: Tokenizer) -> None:
    body = "\n\n".join(f"## H{i}\n\n{sentences(6, 10 * i)}" for i in range(4))
    edited = body.replace("Satz Nummer 21 erklärt", "Satz Nummer 21 erklärt heute ganz neu")
    first, again = run(body, tok), run(body, tok)
    assert first == again
    after = run(edited, tok)

    def by_section(spans: list[ChunkSpan], source: str) -> dict[str | None, list[str]]:
        out: dict[str | None, list[str]] = {}
        for s in spans:
            out.setdefault(s.section_path, []).append(text(source, s))
        return out

    old, changed = by_section(first, body), by_section(after, edited)
    assert old["/H2"] != changed["/H2"]
    for path in ("/H0", "/H1", "/H3"):
        assert old[path] == changed[path]


# --- the checker itself ------------------------------------------------------------------------


def test_checker_reports_each_kind_of_violation(tok: Tokenizer) -> None:
    body = "## A\n\nErster Satz hier. Zweiter Satz hier.\n\n```\ncode\nmehr\n```\n\n## B\n\nLetzter Satz."
    good = run(body, tok)
    assert check_chunks(body, good, tok, SMALL) == []
    mid_sentence = body.index("Satz hier. Zweiter")
    code_mid = body.index("mehr")
    b = body.index("## B")

    def span(s: int, e: int, c: int | None = None, **kw: object) -> ChunkSpan:
        return ChunkSpan(char_start=s, char_end=e, content_start=s if c is None else c, **kw)  # type: ignore[arg-type]

    cases = {
        "inside a sentence": [span(0, mid_sentence), span(mid_sentence, b - 2), span(b, len(body))],
        "inside a code": [span(0, code_mid), span(code_mid, b - 2), span(b, len(body))],
        "in no chunk": [span(0, b - 2), span(b + 5, len(body))],
        "does not start a chunk": [span(0, len(body))],
        "across a heading": [span(0, b - 2), span(body.index("```"), len(body), b)],
        "without oversize": [span(0, b - 2), span(b, len(body))],
        "before the previous": [span(0, b - 2), span(b - 5, len(body))],
    }
    for expected, spans in cases.items():
        profile = Profile(1, 2, 3, 0, 1) if expected == "without oversize" else SMALL
        found = check_chunks(body, spans, tok, profile)
        assert any(expected in v for v in found), (expected, found)


def test_r8_long_item_with_code_is_cut_between_its_parts_not_inside_the_fence(tok: Tokenizer) -> None:
    code = "   ```powershell\n" + "\n".join(f"   Set-Thing -Id {i} -Value 'x'" for i in range(12)) + "\n\n   ```"
    item = f"1. {sentences(3)}\n\n{code}\n\n   {sentences(3, 10)}"
    body = f"## Schritte\n\n{item}\n2. Fertig.\n"
    spans = run(body, tok)
    assert len(spans) >= 3
    holding = [s for s in spans if "```powershell" in body[s.content_start : s.char_end]]
    assert len(holding) == 1 and holding[0].has_code
    assert body[holding[0].content_start : holding[0].char_end].count("```") == 2


def test_checker_finds_a_cut_inside_a_fence_nested_in_a_list(tok: Tokenizer) -> None:
    body = "- Schritt:\n\n  ```\n  eins\n\n  zwei\n  ```\n- Ende."
    cut = body.index("zwei")
    spans = [
        ChunkSpan(char_start=0, char_end=body.index("eins") + 4, content_start=0),
        ChunkSpan(char_start=cut, char_end=len(body), content_start=cut),
    ]
    found = check_chunks(body, spans, tok, SMALL)
    assert any("inside a" in v for v in found), found


def test_a_paragraph_tail_before_a_heading_is_not_joined_to_an_oversize_block(tok: Tokenizer) -> None:
    """Found by hypothesis: the tail sentence of a split paragraph, then `# H1` and a comment, looked like
    a heading-only chunk (the paragraph's block starts earlier), so it was merged into the oversize code
    chunk after it, which then held two units besides headings (R8)."""
    body = (
        "Wir sprachen u. a. über [[Vektorsuche|Qdrant]] und [[Notiz#Abschnitt]]. Ist das wirklich so?\n\n"
        "# Ziel 0\n\n%% ein Kommentar %%\n\n"
        "```rust\n\nlet x1 = 1;  \nlet x2 = 2;  \n\nlet x4 = 4;  \nlet x5 = 5;  \n```\n\n"
    )
    profile = Profile(target_min=12, target_max=20, max=30, overlap_min=4, overlap_max=8)
    spans = run(body, tok, profile)
    code = next(s for s in spans if "```rust" in text(body, s))
    assert "Ist das wirklich so?" not in text(body, code)
