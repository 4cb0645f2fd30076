"""How a chunk becomes retrievable (issue 15): the model's input and the stored vectors, pure.

`points.with_heading` decides what the dense model reads, `contextual_vectors` what dense search
compares against, `contextual_lexical` what BM25 scores. These tests pin the properties the
retrieval figures depend on: nothing said twice, a chunk's own meaning first, its H2 section as
context and never another section's or another note's; opt-in, the note by the chunk's length.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import make_chunk, make_note
from mindnet.chunking.base import Chunk
from mindnet.config import load_settings
from mindnet.links import LinkRef
from mindnet.points import chunk_payload, contextual_lexical, contextual_vectors, section_key, with_heading
from mindnet.store import lexical_document

SETTINGS = load_settings(env={}, overrides={})


def test_the_prefix_names_title_and_section_once() -> None:
    assert with_heading("text", "Note", "Part", SETTINGS) == "Note — Part\n\ntext"
    assert with_heading("text", "Note", "Note", SETTINGS) == "Note\n\ntext"


def test_a_chunk_that_opens_with_its_heading_does_not_get_it_again() -> None:
    assert with_heading("# Amazon\n\nrain", "Amazon", "Amazon", SETTINGS) == "# Amazon\n\nrain"
    assert with_heading("## Setup\n\nrun it", "Guide", "Setup", SETTINGS) == "Guide\n\n## Setup\n\nrun it"
    # a heading that is not the title or section, or a '#' that is not a heading, changes nothing
    assert with_heading("## Other\n\nx", "Guide", "Setup", SETTINGS) == "Guide — Setup\n\n## Other\n\nx"
    assert with_heading("#hashtag text", "Guide", "Guide", SETTINGS) == "Guide\n\n#hashtag text"


def test_the_prefix_can_be_turned_off() -> None:
    off = load_settings(env={}, overrides={"embed_title_prefix": False})
    assert with_heading("text", "Note", "Part", off) == "text"


def _chunks(sections: list[str]) -> list[Chunk]:
    body = "".join(f"chunk {i} of {s}\n" for i, s in enumerate(sections))
    note = make_note("n1.md", body)
    out, start = [], 0
    for i, s in enumerate(sections):
        end = start + len(f"chunk {i} of {s}\n")
        out.append(make_chunk(note, i + 1, start, end, section_path=s))
        start = end
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["/A", "/A/x", "/B", "/"]), min_size=1, max_size=8),
       st.floats(min_value=0.01, max_value=4.0), st.integers(0, 2**31 - 1))
def test_context_vectors_are_unit_and_mix_only_the_chunks_h2_section(sections: list[str], weight: float,
                                                                      seed: int) -> None:
    chunks = _chunks(sections)
    raw = np.random.default_rng(seed).normal(size=(len(chunks), 8)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    mixed = np.asarray(contextual_vectors(chunks, raw.tolist(), weight))
    assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)
    for i, chunk in enumerate(chunks):
        members = [j for j, c in enumerate(chunks) if section_key(c) == section_key(chunk)]
        mean = raw[members].mean(axis=0)
        expected = raw[i] + weight * mean / max(float(np.linalg.norm(mean)), 1e-12)
        assert np.allclose(mixed[i], expected / np.linalg.norm(expected), atol=1e-5)
        if weight < 1:  # below 1 the context can never turn the vector away from the chunk's own
            assert float(mixed[i] @ raw[i]) >= 0


def test_a_section_of_one_chunk_keeps_its_own_vector_and_weight_zero_changes_nothing() -> None:
    chunks = _chunks(["/A", "/B"])
    raw = [[1.0, 0.0], [0.0, 1.0]]
    assert np.allclose(contextual_vectors(chunks, raw, 0.25), raw)
    assert contextual_vectors(chunks, raw, 0.0) == raw


def _notes_chunks(notes: list[list[int]]) -> list[Chunk]:
    """Chunks of several notes, `notes[j][i]` the token count of note j's chunk i."""
    out = []
    for j, counts in enumerate(notes):
        note = make_note(f"n{j}.md", "".join(f"chunk {i}\n" for i in range(len(counts))))
        start = 0
        for i, count in enumerate(counts):
            end = start + len(f"chunk {i}\n")
            out.append(dataclasses.replace(make_chunk(note, i + 1, start, end), token_count=count))
            start = end
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 600), min_size=1, max_size=5), min_size=1, max_size=3),
       st.floats(min_value=0.5, max_value=300.0), st.integers(0, 2**31 - 1))
def test_context_vectors_are_unit_and_mix_only_the_chunks_note_by_its_length(notes: list[list[int]], k: float,
                                                                              seed: int) -> None:
    chunks = _notes_chunks(notes)
    raw = np.random.default_rng(seed).normal(size=(len(chunks), 8)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    mixed = np.asarray(contextual_vectors(chunks, raw.tolist(), 0.0, k))
    assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)
    for i, chunk in enumerate(chunks):
        members = [j for j, c in enumerate(chunks) if c.note_id == chunk.note_id]
        mean = raw[members].mean(axis=0)
        weight = k / max(1, chunk.token_count)
        expected = raw[i] + weight * mean / max(float(np.linalg.norm(mean)), 1e-12)
        assert np.allclose(mixed[i], expected / np.linalg.norm(expected), atol=1e-4)


def test_a_shorter_chunk_leans_further_towards_its_note() -> None:
    chunks = _notes_chunks([[20, 300], [50]])
    raw = np.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    mixed = np.asarray(contextual_vectors(chunks, raw.tolist(), 0.0, 60.0))
    mean = (raw[0] + raw[1]) / np.linalg.norm(raw[0] + raw[1])
    short, long = float(mixed[0] @ mean), float(mixed[1] @ mean)
    assert short > long > float(raw[1] @ mean)  # both lean: weight 60/20 = 3 against 60/300 = 0.2
    assert float(mixed[1] @ raw[1]) > 0.95  # a 300-token chunk stays nearly itself
    assert np.allclose(mixed[2], raw[2])  # a note of one chunk: its mean is itself


def test_a_note_of_one_chunk_keeps_its_own_vector_under_note_context() -> None:
    chunks = _notes_chunks([[10], [10]])
    raw = [[1.0, 0.0], [0.0, 1.0]]
    assert np.allclose(contextual_vectors(chunks, raw, 0.0, 60.0), raw)
    two = _notes_chunks([[10, 10]])
    assert contextual_vectors(two, raw, 0.0, 0.0) == raw


def test_section_and_note_context_add_up() -> None:
    chunks = dataclasses.replace(_chunks(["/A", "/A", "/B"])[0], token_count=30), *_chunks(["/A", "/A", "/B"])[1:]
    raw = np.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    mixed = np.asarray(contextual_vectors(list(chunks), raw.tolist(), 0.25, 60.0))
    section = (raw[0] + raw[1]) / np.linalg.norm(raw[0] + raw[1])
    note = raw.sum(axis=0) / np.linalg.norm(raw.sum(axis=0))
    expected = raw[0] + 0.25 * section + 2.0 * note  # 60 / 30 tokens
    assert np.allclose(mixed[0], expected / np.linalg.norm(expected), atol=1e-5)


def test_h3_chunks_share_their_h2_section() -> None:
    a, b, c = _chunks(["/A", "/A/x", "/B"])
    assert section_key(a) == section_key(b) != section_key(c)


def test_bm25_indexes_the_section_once_in_its_first_chunk() -> None:
    chunks = _chunks(["/Setup", "/Setup/x", "/Other"])
    chunks[0] = _with_text(chunks[0], "install the compiler")
    chunks[1] = _with_text(chunks[1], "configure the linker")
    chunks[2] = _with_text(chunks[2], "unrelated words")
    vecs = contextual_lexical(chunks, {}, True)
    linker = set(lexical_document("linker", "en").indices)
    compiler = set(lexical_document("compiler", "en").indices)
    assert linker <= set(vecs[0].indices) and compiler <= set(vecs[0].indices)  # the head holds the section
    assert linker <= set(vecs[1].indices) and not compiler & set(vecs[1].indices)  # the rest their own words
    assert not linker & set(vecs[2].indices)  # never another section's
    assert vecs[2] == contextual_lexical(chunks, {}, False)[2]  # a one-chunk section is indexed as before


def test_bm25_without_sections_is_each_chunk_alone() -> None:
    chunks = _chunks(["/A", "/A"])
    own = contextual_lexical(chunks, {}, False)
    assert own[0] != own[1]
    assert set(own[0].indices) == set(lexical_document(
        "\n".join([chunks[0].note_title, "A", chunks[0].text]), "en").indices)


def _with_text(chunk: Chunk, text: str) -> Chunk:
    return dataclasses.replace(chunk, text=text)


# --- chunk_payload: the fast copy is asdict's value, type for type ------------------------------------


def _asdict_payload(chunk: Chunk) -> dict:
    """The payload as `chunk_payload` built it with `dataclasses.asdict` (the reference)."""
    payload = dataclasses.asdict(chunk)
    payload["transcluded_from"] = []
    payload["id"] = chunk.chunk_id
    payload["tags"] = list(chunk.tags)
    payload["wikilinks"] = list(chunk.wikilinks)
    payload["external_links"] = list(chunk.external_links)
    return payload


def _typed(value: object) -> object:
    """A value with the type of every container and scalar spelled out, so `==` compares types too."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_typed(v) for v in value])
    return (type(value).__name__, value)


_TEXT = st.text(max_size=12)
_REF = st.builds(LinkRef, _TEXT, st.sampled_from(["wikilink", "markdown", "embed"]),
                 st.sampled_from(["resolved", "unresolved", "attachment"]))


@settings(max_examples=200, deadline=None)
@given(tags=st.lists(_TEXT, max_size=3), links=st.lists(_TEXT, max_size=3), urls=st.lists(_TEXT, max_size=2),
       refs=st.lists(_REF, max_size=4), prev=st.none() | _TEXT, summary=st.none() | _TEXT,
       area=st.none() | _TEXT)
def test_chunk_payload_equals_the_asdict_payload(
    tags: list[str], links: list[str], urls: list[str], refs: list[LinkRef], prev: str | None,
    summary: str | None, area: str | None,
) -> None:
    chunk = dataclasses.replace(
        make_chunk(make_note("n", "# N\n\ntext\n"), 1, 0, 4), tags=tuple(tags), wikilinks=tuple(links),
        external_links=tuple(urls), references=tuple(refs), neighbors={"prev": prev, "next": "n#c02"},
        summary=summary, area=area,
    )
    payload = chunk_payload(chunk)
    assert _typed(payload) == _typed(_asdict_payload(chunk))
    assert list(payload) == list(_asdict_payload(chunk))  # key order: the NDJSON bytes follow it
    payload["neighbors"]["prev"] = "changed"
    assert chunk.neighbors["prev"] == prev  # a copy, as asdict's: the chunk is not shared with the payload


def test_chunk_payload_equals_the_asdict_payload_on_the_sample_vault() -> None:
    from mindnet import Vault, chunk_note

    vault = Vault(Path(__file__).resolve().parents[1] / "examples" / "vault")
    chunks = [c for note in vault.notes for c in chunk_note(note, vault.settings, vault.resolver)]
    assert any(c.references for c in chunks) and any(c.wikilinks for c in chunks)
    assert [_typed(chunk_payload(c)) for c in chunks] == [_typed(_asdict_payload(c)) for c in chunks]


@settings(max_examples=25, deadline=None)
@given(words=st.integers(min_value=1, max_value=4000), most=st.integers(min_value=1, max_value=64))
def test_note_windows_are_the_first_windows_of_the_note_up_to_the_setting(words: int, most: int) -> None:
    """`note_windows` caps what the import embeds per note; the windows kept are the note's first ones, the same
    whatever the cap, so a lower cap drops windows from the end and changes no other (the embedding cache
    still holds them)."""
    from mindnet.chunking.tokens import default_tokenizer
    from mindnet.points import note_inputs, note_windows

    note = make_note("long.md", " ".join(f"wort{i % 97}" for i in range(words)) + "\n", title="Lang")
    everything = note_windows(note, default_tokenizer())
    capped = note_inputs(note, dataclasses.replace(SETTINGS, note_windows=most), default_tokenizer())
    assert 1 <= len(everything) <= 64
    assert capped == everything[:most]
    assert note_inputs(note, SETTINGS, default_tokenizer()) == everything[:SETTINGS.note_windows]
    assert "\n".join(everything).startswith("Lang")
