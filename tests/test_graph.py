"""Edges (R16), neighbours (R18) and the incremental edge delta (R15, R21) on hand-made vaults."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import make_chunk, make_note
from mindnet import store
from mindnet.chunking.base import Chunk
from mindnet.config import Settings
from mindnet.graph import (
    EDGE_NAMESPACE,
    Edge,
    diff_edges,
    edge_from_payload,
    incremental_edges,
    make_edge,
    note_edges,
    note_neighbors,
    notes_to_relink,
)
from mindnet.links import Resolver, link_key
from mindnet.vault import Note

DEFAULT = Settings()


def chunks_of(note: Note) -> list[Chunk]:
    """One chunk per paragraph (deterministic, like the real chunkers); section from the last `## `."""
    chunks: list[Chunk] = []
    pos = 0
    section = "/"
    body = note.fulltext
    while pos < len(body):
        end = body.find("\n\n", pos)
        end = len(body) if end < 0 else end
        if body[pos:end].strip():
            if body[pos:end].startswith("## "):
                section = "/" + body[pos + 3 : end].split("\n", 1)[0]
            chunks.append(make_chunk(note, len(chunks) + 1, pos, end, section_path=section))
        pos = end + 2
    return chunks


def edges_of(notes: Sequence[Note], cfg: Settings = DEFAULT) -> list[Edge]:
    resolver = Resolver(notes, ["img/pic.png"])
    return [e for n in notes for e in note_edges(n, chunks_of(n), resolver, cfg)]


def keys(edges: Sequence[Edge]) -> dict[str, str]:
    return {e.edge_key: e.status for e in edges}


# -- edges --------------------------------------------------------------------------------------

A = make_note(
    "a.md",
    "Intro [[B]] and [[b|again]] and [[Missing Note]] and `[[InCode]]`.\n\n"
    "![[C#Part]] and [[#self]] and [x](https://u.org) ![[pic.png]] [y](c.md)",
    frontmatter={"related": "[[C]]", "depends_on": ["B", "Nobody"], "title": "A"},
)
B = make_note("b.md", "Links back to [[A]].")
C = make_note("sub/c.md", "## Part\nText.")


def test_edges_of_a_small_vault() -> None:
    edges = [e for e in edges_of([A, B, C]) if e.note_id == "a"]
    assert keys(edges) == {
        "belongs_to:a#c01->a": "resolved",
        "belongs_to:a#c02->a": "resolved",
        "next:a#c01->a#c02": "resolved",
        "prev:a#c02->a#c01": "resolved",
        "references:a#c01->b": "resolved",
        "references:a#c01->missing-note": "unresolved",
        "embeds:a#c02->c": "resolved",
        "references:a#c02->c": "resolved",  # [y](c.md): relative fails, name lookup finds sub/c.md
        "related:a->c": "resolved",
        "depends_on:a->b": "resolved",
        "depends_on:a->nobody": "unresolved",
        "backlink:b->a": "resolved",
        "backlink:c->a": "resolved",
    }
    by_key = {e.edge_key: e for e in edges}
    ref = by_key["references:a#c01->b"]
    assert ref.raw_links == ("[[B]]", "[[b|again]]")
    assert (ref.scope, ref.source_id, ref.target_id, ref.note_id) == ("chunk", "a#c01", "b", "a")
    assert by_key["embeds:a#c02->c"].anchor == "Part"
    assert by_key["depends_on:a->nobody"].raw_links == ("[[Nobody]]",)
    assert by_key["backlink:b->a"].scope == "note"


def test_optional_note_references_and_sections() -> None:
    cfg = Settings(note_references=True, has_section_edges=True)
    edges = {e.edge_key: e for e in edges_of([A, B, C], cfg)}
    assert {k for k in edges if k.startswith(("references:a->", "has_section:"))} == {
        "references:a->b",
        "references:a->missing-note",
        "references:a->c",
        "has_section:a->a#/",
        "has_section:b->b#/",
        "has_section:c->c#/Part",
    }
    assert edges["references:a->b"].raw_links == ("[[B]]", "[[b|again]]")
    assert edges["references:a->missing-note"].status == "unresolved"


def test_backlinks_are_deduplicated_per_pair() -> None:
    a = make_note("a.md", "[[B]]\n\n[[B]] ![[B]]\n\n[text](b.md)", frontmatter={"related": ["[[B]]"]})
    b = make_note("b.md")
    edges = edges_of([a, b])
    assert [e.edge_key for e in edges if e.kind == "backlink"] == ["backlink:b->a"]


def test_edge_ids_are_stable_uuid5() -> None:
    e = make_edge("references", "chunk", "a#c01", "b", "a")
    assert e.edge_key == "references:a#c01->b"
    assert e.edge_id == str(uuid.uuid5(EDGE_NAMESPACE, "references:a#c01->b"))
    # The store names points by UUIDv5 of their string id in the same namespace (R16).
    assert EDGE_NAMESPACE == store.ID_NAMESPACE
    assert e.edge_id == store.point_id(e.edge_key)
    assert edge_from_payload(e.edge_key, e.payload()) == edge_from_payload(e.edge_id, e.payload()) == e
    assert edges_of([A, B, C]) == edges_of([A, B, C])
    assert all(edge_from_payload(x.edge_id, x.payload()) == x for x in edges_of([A, B, C]))
    assert len({x.edge_id for x in edges_of([A, B, C])}) == len(edges_of([A, B, C]))


def test_an_edge_payload_holds_only_what_is_set_and_reads_back_as_the_edge() -> None:
    """Structural edges carry no anchor and no links: their payload leaves those fields out (Edge's binding
    converts an empty list slowly), and the key its fields make; reading it back still gives the same edge,
    and a payload that is not the id's edge is refused."""
    edges = edges_of([A, B, C])
    required = {"kind", "scope", "source_id", "target_id", "note_id", "status"}  # the key is the point's id
    structural = [e for e in edges if not e.raw_links and not e.link_keys and e.anchor is None]
    linked = [e for e in edges if e.raw_links]
    assert structural and linked
    assert all(set(e.payload()) == required for e in structural)
    assert all(e.payload()["raw_links"] == list(e.raw_links) and e.payload()["link_keys"] == list(e.link_keys)
               for e in linked)
    assert all(edge_from_payload(e.edge_id, e.payload()) == e for e in edges)
    anchored = make_edge("references", "chunk", "a#c01", "b", "a", anchor="Intro")
    assert anchored.payload()["anchor"] == "Intro"
    assert edge_from_payload(anchored.edge_id, anchored.payload()) == anchored
    older = anchored.payload() | {"edge_key": anchored.edge_key, "raw_links": [], "link_keys": []}  # before 12-05
    assert edge_from_payload(anchored.edge_key, older) == anchored
    with pytest.raises(ValueError):
        edge_from_payload(anchored.edge_id, anchored.payload() | {"target_id": "c"})
    with pytest.raises(ValueError):
        edge_from_payload(anchored.edge_key, older | {"edge_key": "references:a#c01->c"})


def test_neighbors() -> None:
    nb = note_neighbors(edges_of([A, B, C]), ["lonely"])
    assert nb["a"] == {"references": ["b", "c"], "backlinks": ["b"]}
    assert nb["b"] == {"references": ["a"], "backlinks": ["a"]}
    assert nb["c"] == {"references": [], "backlinks": ["a"]}
    assert nb["lonely"] == {"references": [], "backlinks": []}


def test_diff_edges() -> None:
    old = edges_of([A, B, C])
    assert diff_edges(old, old) == ([], [])
    b2 = make_note("b.md", "No links any more.")
    new = edges_of([A, b2, C])
    to_add, to_delete = diff_edges(old, new)
    assert [e.edge_key for e in to_delete] == ["references:b#c01->a", "backlink:a->b"]
    assert to_add == []
    changed = make_edge("references", "chunk", "a#c01", "b", "a", "resolved", "New anchor")
    to_add, to_delete = diff_edges([make_edge("references", "chunk", "a#c01", "b", "a")], [changed])
    assert (to_add, to_delete) == ([changed], [])


# -- incremental --------------------------------------------------------------------------------


class FilteringSource:
    """An `EdgeSource` that returns exactly what the store's filters match (`sync.StoredEdges`)."""

    def __init__(self, edges: Sequence[Edge]) -> None:
        self.edges = edges

    def suspects(self, target_ids: set[str], keys: set[str]) -> list[Edge]:
        return [e for e in self.edges if e.target_id in target_ids or not keys.isdisjoint(e.link_keys)]

    def of_notes(self, note_ids: set[str]) -> list[Edge]:
        return [e for e in self.edges if e.note_id in note_ids]


def incremental(before: Sequence[Note], after: Sequence[Note]) -> tuple[set[str], set[str]]:
    """Run `incremental_edges` and check it against the full rebuild: the delta must be exact."""
    old = edges_of(before)
    by_path_before = {n.note_id: n for n in before}
    after_by_id = {n.note_id: n for n in after}
    changed = [n for n in after if by_path_before.get(n.note_id) != n]
    deleted = [nid for nid in by_path_before if nid not in after_by_id]
    resolver = Resolver(after, ["img/pic.png"])
    delta = incremental_edges(old, after_by_id, changed, deleted, resolver, chunks_of, DEFAULT)
    # What the importer does: ask only for the edges the store's filters return. Same delta.
    filtered = incremental_edges(FilteringSource(old), after_by_id, changed, deleted, resolver, chunks_of, DEFAULT)
    assert filtered == delta
    want_add, want_delete = diff_edges(old, edges_of(after))
    assert sorted(delta.to_add, key=lambda e: e.edge_id) == sorted(want_add, key=lambda e: e.edge_id)
    assert {e.edge_id for e in delta.to_delete} == {e.edge_id for e in want_delete}
    full_before = note_neighbors(old, by_path_before)
    full_after = note_neighbors(edges_of(after), after_by_id)
    assert {nid for nid in after_by_id if full_before.get(nid) != full_after[nid]} <= delta.neighbors_changed
    return delta.relinked, {e.edge_key for e in delta.to_add}


def test_forward_reference_resolves_when_the_note_arrives_and_unresolves_when_it_goes() -> None:
    a = make_note("a.md", "See [[Later Note]].")
    x = make_note("x.md", "Unrelated.")
    later = make_note("notes/Later Note.md", "Now here.")
    assert keys(edges_of([a, x]))["references:a#c01->later-note"] == "unresolved"

    relinked, added = incremental([a, x], [a, x, later])
    assert relinked == {"a"}
    assert "references:a#c01->later-note" in added  # same key, status now resolved
    assert keys(edges_of([a, x, later]))["references:a#c01->later-note"] == "resolved"
    assert "backlink:later-note->a" in added

    relinked, _ = incremental([a, x, later], [a, x])
    assert relinked == {"a"}


def test_forward_reference_by_title_alias_and_path() -> None:
    a = make_note("a.md", "[[The Title]] [[Nick]] [[deep/Thing]]")
    for arrival in [
        make_note("z/whatever.md", title="The Title"),
        make_note("z/other.md", aliases=("nick",)),
        make_note("x/deep/Thing.md"),
    ]:
        relinked, _ = incremental([a], [a, arrival])
        assert relinked == {"a"}


def test_rename_turns_links_unresolved_and_aliases_keep_them() -> None:
    a = make_note("a.md", "[[Old Name]]")
    old = make_note("Old Name.md", note_id="n1")
    renamed = make_note("New Name.md", note_id="n1")
    relinked, added = incremental([a, old], [a, renamed])
    assert relinked == {"a"}
    assert "references:a#c01->old-name" in added
    with_alias = make_note("New Name.md", note_id="n1", aliases=("Old Name",))
    relinked, _ = incremental([a, old], [a, with_alias])
    assert relinked == set()  # still resolves to n1: nothing to rewrite


def test_rename_with_default_id() -> None:
    a = make_note("a.md", "[[b]]")
    b = make_note("b.md")
    relinked, added = incremental([a, b], [a, make_note("b2.md")])
    assert relinked == {"a"}
    assert "references:a#c01->b" in added


def test_a_new_shorter_path_takes_over_an_ambiguous_name() -> None:
    a = make_note("a.md", "[[todo]]")
    deep = make_note("x/y/todo.md", note_id="todo-deep")
    root = make_note("todo.md", note_id="todo-root")
    relinked, added = incremental([a, deep], [a, deep, root])
    assert relinked == {"a"}
    assert "references:a#c01->todo-root" in added


def test_case_and_unicode_variants_resolve_to_a_new_note() -> None:
    a = make_note("a.md", "[[GRÖSSE]] " + unicodedata.normalize("NFD", "[[größe]]"))
    relinked, added = incremental([a], [a, make_note(unicodedata.normalize("NFD", "Größe.md"), note_id="g")])
    assert relinked == {"a"}
    assert "references:a#c01->g" in added


def test_editing_a_linked_note_does_not_relink_its_linkers() -> None:
    a = make_note("a.md", "[[Hub]]")
    hub = make_note("hub.md", "Version 1")
    relinked, added = incremental([a, hub], [a, make_note("hub.md", "Version 2 [[a]]")])
    assert relinked == set()
    assert added == {"references:hub#c01->a", "backlink:a->hub"}


def test_embedding_notes_are_relinked_when_the_embedded_note_changes() -> None:
    a = make_note("a.md", "![[Hub#Part]]")
    hub = make_note("hub.md", "## Part\nVersion 1")
    relinked, _ = incremental([a, hub], [a, make_note("hub.md", "## Part\nVersion 2")])
    assert relinked == {"a"}  # the transcluded text changed


def test_notes_to_relink_ignores_unrelated_changes() -> None:
    a = make_note("a.md", "[[Missing]] [[b]]")
    b = make_note("b.md")
    stored = edges_of([a, b])
    unrelated = make_note("c.md", "text")
    assert notes_to_relink(stored, Resolver([a, b, unrelated]), [unrelated]) == set()


NAMES = ["Alpha", "beta", "Gamma Ray", "delta", "Epsilon"]


@st.composite
def vault_change(draw: st.DrawFn) -> tuple[list[Note], list[Note]]:
    """A small vault and a changed version: notes added, deleted, renamed, re-aliased, edited."""

    used: set[str] = set()

    def note(i: int) -> Note:
        folder = draw(st.sampled_from(["", "x/", "x/y/"]))
        name = draw(st.sampled_from(NAMES))
        if f"{folder}{name}.md".lower() in used:
            folder = f"u{i}/"  # paths are unique in a vault
        used.add(f"{folder}{name}.md".lower())
        targets = [*NAMES, "alpha#Part", "x/beta", "Nobody", "../Alpha.md", "y/delta.md", "#Part"]
        links = draw(st.lists(st.sampled_from(targets), max_size=3))
        forms = ["[[{}]]", "![[{}]]", "[t]({})"]
        body = "\n\n".join(forms[j % 3].format(t.replace(" ", "%20") if j % 3 == 2 else t) for j, t in enumerate(links))
        aliases = tuple(draw(st.lists(st.sampled_from(NAMES), max_size=1)))
        related = draw(st.lists(st.sampled_from(NAMES), max_size=1))
        fm = {"related": [f"[[{t}]]" for t in related]} if related else None
        return make_note(f"{folder}{name}.md", body, note_id=f"n{i}", aliases=aliases, frontmatter=fm)

    before = [note(i) for i in range(draw(st.integers(1, 5)))]
    after = [n for n in before if draw(st.booleans()) or len(before) == 1]
    for i, n in enumerate(after):
        if draw(st.integers(0, 3)) == 0:
            after[i] = note(int(n.note_id[1:]))
    after += [note(10 + i) for i in range(draw(st.integers(0, 2)))]
    return before, after


@settings(max_examples=200, deadline=None)
@given(vault_change())
def test_incremental_delta_equals_full_rebuild(change: tuple[list[Note], list[Note]]) -> None:
    before, after = change
    incremental(before, after)


def test_three_thousand_notes_give_distinct_edges_with_link_keys() -> None:
    names = [f"Note {i}" for i in range(3000)]
    notes = [
        make_note(
            f"f{i % 30}/{name}.md",
            "\n\n".join(f"Para {j} about [[{names[(i * 7 + j * 13) % 3000]}]] and [[Missing {j}]]." for j in range(4)),
            note_id=f"n{i}",
            frontmatter={"related": [f"[[{names[(i + 1) % 3000]}]]"]},
        )
        for i, name in enumerate(names)
    ]
    chunks = {n.note_id: chunks_of(n) for n in notes}
    resolver = Resolver(notes)
    edges = [e for n in notes for e in note_edges(n, chunks[n.note_id], resolver, DEFAULT)]
    assert len(edges) > 3000 * 15
    assert len({e.edge_id for e in edges}) == len(edges)
    # Every link edge carries the keys the store filters on; "Missing 0" is asked for by 3,000 notes.
    assert all(e.link_keys for e in edges if e.raw_links)
    missing = [e for e in edges if link_key("Missing 0") in e.link_keys and e.kind == "references"]
    assert {e.note_id for e in missing} == {n.note_id for n in notes}
