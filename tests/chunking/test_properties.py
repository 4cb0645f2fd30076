"""Hypothesis properties of strategy `structure` over generated Markdown (SPEC §8: R8, R10, R11, R12).

Documents are assembled from pieces a real vault has: H1-H4 headings, paragraphs with German
abbreviations and ordinals, emoji, wikilinks, URLs and inline code, nested lists, checklists,
fences (also with blank lines and trailing spaces inside), tables, quotes, callouts, Obsidian
comments, and every line-ending convention. Small profiles make even short documents split.
"""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mindnet.chunking.base import Chunk, ChunkSpan, finalize
from mindnet.chunking.invariants import check_chunks
from mindnet.chunking.structure import chunk_structure
from mindnet.chunking.tokens import default_tokenizer
from mindnet.config import DEFAULT_PROFILES, DEFAULT_STOP_SECTIONS, Profile
from mindnet.markdown import parse_blocks
from mindnet.text import normalise
from mindnet.vault import Note

TOK = default_tokenizer()
PROFILES = [
    Profile(12, 20, 30, 4, 8),
    Profile(40, 60, 80, 10, 20),
    Profile(60, 90, 120, 15, 25),
    DEFAULT_PROFILES["task"],
    DEFAULT_PROFILES["default"],
]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SENTENCES = [
    "Das ist z. B. ein Satz über Chunking.",
    "Am 3. September trafen wir Dr. Müller im 2. Stock.",
    "Wir sprachen u. a. über [[Vektorsuche|Qdrant]] und [[Notiz#Abschnitt]].",
    "Siehe https://example.org/pfad.html für mehr.",
    "Der Befehl `mindnet import vault/.` liest alles ein.",
    "Emoji 🚀 und 👩‍💻 gehören dazu!",
    "Ist das wirklich so?",
    "This sentence is English, e.g. for mixed notes.",
    "Ganz kurz.",
    "Die Größe beträgt ca. 300 Tokens bzw. etwa 1200 Zeichen, d. h. genug für einen Absatz mit Kontext.",
    "Im 19. Jh. gab es noch keine Vektoren usw. Dann kam die Statistik.",
    "Ein sehr langer Satz " + " ".join(f"mit vielen Wörtern Nummer {i}" for i in range(12)) + " endet erst hier.",
]
WORDS = ["Ziel", "Kontext", "Größe", "Überblick", "Mögliche Verbindungen", "Possible connections", "Daten 📊"]

sentence = st.sampled_from(SENTENCES)
title = st.one_of(
    st.builds(lambda w, n: f"{w} {n}", st.sampled_from(WORDS), st.integers(0, 99)),
    st.sampled_from(DEFAULT_STOP_SECTIONS),
)


@st.composite
def paragraph(draw: st.DrawFn) -> str:
    parts = draw(st.lists(sentence, min_size=1, max_size=6))
    joiner = draw(st.sampled_from([" ", " ", "\n"]))
    return joiner.join(parts)


@st.composite
def heading(draw: st.DrawFn) -> str:
    level = draw(st.sampled_from([1, 2, 2, 3, 3, 4]))
    return "#" * level + " " + draw(title)


@st.composite
def item_list(draw: st.DrawFn) -> str:
    check = draw(st.booleans())
    ordered = draw(st.booleans()) and not check
    n = draw(st.integers(1, 20))
    lines = []
    for i in range(n):
        marker = f"{i + 1}." if ordered else "-"
        box = draw(st.sampled_from(["[ ] ", "[x] "])) if check else ""
        lines.append(f"{marker} {box}{draw(st.lists(sentence, min_size=1, max_size=3).map(' '.join))}")
        if draw(st.integers(0, 5)) == 0:
            lines.append(f"   - verschachtelt: {draw(sentence)}")
            lines.append(f"   - noch einer: {draw(sentence)}")
        if draw(st.integers(0, 12)) == 0:
            lines.append("   ```\n   code in item\n   ```")
    intro = draw(st.sampled_from(["", "Die Liste lautet:\n", "Hier folgen die Punkte:\n\n"]))
    return intro + "\n".join(lines)


@st.composite
def fence(draw: st.DrawFn) -> str:
    mark = draw(st.sampled_from(["```", "~~~", "````"]))
    n = draw(st.integers(1, 40))
    lines = [f"let x{i} = {i};  " if i % 3 else "" for i in range(n)]
    return f"{mark}{draw(st.sampled_from(['', 'rust', 'python']))}\n" + "\n".join(lines) + f"\n{mark}"


@st.composite
def table(draw: st.DrawFn) -> str:
    rows = draw(st.integers(0, 12))
    lines = ["| Name | Wert | Notiz |", "|---|:-:|---|"]
    lines += [f"| Zeile {i} | {i * 7} | {draw(sentence)} |" for i in range(rows)]
    return "\n".join(lines)


@st.composite
def quote(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 5))
    head = draw(st.sampled_from(["", "> [!note] Hinweis\n", "> [!warning]- Achtung\n"]))
    return head + "\n".join(f"> {draw(sentence)}" for _ in range(n))


block = st.one_of(
    paragraph(),
    paragraph(),
    paragraph(),
    heading(),
    item_list(),
    fence(),
    table(),
    quote(),
    st.just("---"),
    st.just("%% ein Kommentar %%"),
    st.just("<div>html block</div>"),
    st.just("[ref]: https://example.org"),
)


@st.composite
def document(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(block, min_size=0, max_size=14))
    body = ""
    for b in blocks:
        body += b + draw(st.sampled_from(["\n\n", "\n\n", "\n\n\n", "\n"]))
    if draw(st.booleans()):
        body = body.rstrip("\n")
    newline = draw(st.sampled_from(["\n", "\r\n", "\r", "mixed"]))
    if newline == "mixed":
        body = "".join(ch if ch != "\n" else draw(st.sampled_from(["\n", "\r\n"]), label="eol") for ch in body)
    else:
        body = body.replace("\n", newline)
    return body


def _chunk(body: str, profile: Profile) -> list[ChunkSpan]:
    return chunk_structure(body, profile, stop_sections=DEFAULT_STOP_SECTIONS, tokenizer=TOK)


def _note(body: str) -> Note:
    return Note(
        note_id="n",
        title="N",
        type="note",
        status=None,
        tags=(),
        aliases=(),
        area=None,
        project=None,
        priority=None,
        people=(),
        created="2025-01-01",
        updated=None,
        path="n.md",
        lang="de",
        fulltext=body,
        frontmatter={},
        references=(),
        content_hash="x",
    )


@SETTINGS
@given(document(), st.sampled_from(PROFILES))
def test_r8_r10_r11_invariants_hold_for_every_chunk(body: str, profile: Profile) -> None:
    """Offsets, coverage, boundaries, sizes, overlap and headings: `check_chunks` finds nothing."""
    spans = _chunk(body, profile)
    assert check_chunks(body, spans, TOK, profile) == []


@SETTINGS
@given(document(), st.sampled_from(PROFILES))
def test_r11_records_text_and_token_count(body: str, profile: Profile) -> None:
    """Finalized records: text is normalise(fulltext slice), token_count its count, sizes within max."""
    chunks: list[Chunk] = finalize(_note(body), _chunk(body, profile), TOK)
    assert check_chunks(body, chunks, TOK, profile) == []
    for chunk in chunks:
        assert chunk.text == normalise(body[chunk.char_start : chunk.char_end])
        assert chunk.token_count == TOK.count(chunk.text)
        assert chunk.token_count <= profile.max or chunk.oversize


@SETTINGS
@given(document(), st.sampled_from(PROFILES))
@example(body="Das ist z. B. ein Satz über Chunking.\n\n## Ziel 1\n\n### Ziel 0\n\n", profile=PROFILES[0])
def test_r7_every_h2_h3_starts_a_chunk_with_its_section(body: str, profile: Profile) -> None:
    spans = _chunk(body, profile)
    blocks = parse_blocks(body)
    for b in blocks:
        if b.kind == "heading" and b.level in (2, 3):
            span = next(s for s in spans if s.char_start <= b.char_start < s.char_end)
            assert span.content_start == span.char_start
            leads_run = any(x.kind == "heading" and x.level in (2, 3) and b.char_start < x.char_start < span.char_end
                            and all(y.kind == "heading" for y in blocks if b.char_start < y.char_start < x.char_start)
                            for x in blocks)
            if span.char_start == b.char_start and not leads_run:
                assert span.section_title == b.title
                assert span.section_path is not None and span.section_path.endswith("/" + b.title)
            elif span.char_start == b.char_start:
                # R7: `## A` directly followed by `### B` opens B's chunk, whose section is the deeper one (/A/B).
                assert span.section_path is not None and f"/{b.title}/" in f"{span.section_path}/"
                assert span.section_title != b.title or span.section_path.endswith("/" + b.title)
            else:
                # A heading with no text of its own opens its subsection's chunk: only headings before it.
                before = [x for x in blocks if span.char_start <= x.char_start < b.char_start]
                assert all(x.kind == "heading" for x in before)
                assert span.section_path is not None and f"/{b.title}/" in f"{span.section_path}/"


@SETTINGS
@given(document(), st.sampled_from(PROFILES))
def test_r10_overlap_is_whole_sentences_within_cap(body: str, profile: Profile) -> None:
    spans = _chunk(body, profile)
    for prev, span in itertools.pairwise(spans):
        if span.char_start == span.content_start:
            continue
        assert prev.section_path == span.section_path
        assert prev.content_start <= span.char_start < prev.char_end <= span.content_start
        prefix = normalise(body[span.char_start : span.content_start])
        assert not prefix.lstrip().startswith(("#", "```", "~~~", "|", ">"))


def _sections(body: str, n: int) -> list[str]:
    return [f"## Abschnitt {i}\n\n{body}" for i in range(n)]


@SETTINGS
@given(
    st.lists(st.lists(st.one_of(paragraph(), item_list(), fence(), table(), quote()), min_size=1, max_size=4),
             min_size=2, max_size=5),
    st.data(),
    st.sampled_from(PROFILES),
)  # fmt: skip
def test_r12_ids_stable_across_runs_and_edits_elsewhere(
    sections: list[list[str]], data: st.DataObject, profile: Profile
) -> None:
    """Two runs agree; appending to one section leaves every other section's chunks unchanged."""
    texts = [f"## Abschnitt {i}\n\n" + "\n\n".join(blocks) for i, blocks in enumerate(sections)]
    body = "\n\n".join(texts) + "\n"
    edited_index = data.draw(st.integers(0, len(texts) - 1), label="edited section")
    edited_texts = list(texts)
    edited_texts[edited_index] += "\n\n" + data.draw(paragraph(), label="added")
    edited = "\n\n".join(edited_texts) + "\n"

    first = finalize(_note(body), _chunk(body, profile), TOK)
    again = finalize(_note(body), _chunk(body, profile), TOK)
    assert first == again
    after = finalize(_note(edited), _chunk(edited, profile), TOK)
    edited_path = f"/Abschnitt {edited_index}"

    def keys(chunks: list[Chunk]) -> list[tuple[str, str, str]]:
        return [(c.section_path, c.stable_key, c.text_hash) for c in chunks if c.section_path != edited_path]

    assert keys(first) == keys(after)


@settings(max_examples=60, deadline=None)
@given(document())
def test_r11_line_endings_do_not_change_chunk_texts(body: str) -> None:
    """The same note saved with LF or CRLF gives the same chunk texts (R5 normalises line endings)."""
    lf = body.replace("\r\n", "\n").replace("\r", "\n")
    crlf = lf.replace("\n", "\r\n")
    profile = dataclasses.replace(PROFILES[1])
    a = [normalise(lf[s.char_start : s.char_end]) for s in _chunk(lf, profile)]
    b = [normalise(crlf[s.char_start : s.char_end]) for s in _chunk(crlf, profile)]
    assert a == b
