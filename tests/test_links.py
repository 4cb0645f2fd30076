"""Link extraction and resolution (R14, R15) on hand-made notes, the sample vault and foam-docs."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import corpus
from fakes import make_chunk, make_note
from mindnet.chunking.pipeline import attach_links
from mindnet.links import (
    KeptResolver,
    Link,
    LinkRef,
    Resolution,
    Resolver,
    embedded_span,
    extract_links,
    frontmatter_links,
    link_key,
    mask_code,
    transclusions,
)
from mindnet.vault import read_vault

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "vault"
GOLD = ROOT / "tests" / "gold" / "sample_vault_links.json"


def one(text: str) -> Link:
    links = extract_links(text)
    assert len(links) == 1, links
    return links[0]


# -- extraction ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "target", "anchor", "alias", "kind"),
    [
        ("[[Note]]", "Note", None, None, "wikilink"),
        ("[[Note|shown]]", "Note", None, "shown", "wikilink"),
        ("[[Note#Heading two]]", "Note", "Heading two", None, "wikilink"),
        ("[[Note#H2#H3|x]]", "Note", "H2#H3", "x", "wikilink"),
        ("[[Note#^block-1]]", "Note", "^block-1", None, "wikilink"),
        ("[[#Local heading]]", "", "Local heading", None, "wikilink"),
        ("[[folder/Note.md]]", "folder/Note.md", None, None, "wikilink"),
        ("![[Note]]", "Note", None, None, "embed"),
        ("![[Note#Section]]", "Note", "Section", None, "embed"),
        ("![[image.png|300]]", "image.png", None, "300", "embed"),
        ("[text](rel/path.md)", "rel/path.md", None, "text", "markdown"),
        ("[text](My%20Note.md#Part%20one)", "My%20Note.md", "Part one", "text", "markdown"),
        ("[text](<My Note.md>)", "My Note.md", None, "text", "markdown"),
        ('[text](a.md "title")', "a.md", None, "text", "markdown"),
        ("[top](#top)", "", "top", "top", "markdown"),
        ("![alt](pics/a.png)", "pics/a.png", None, "alt", "embed"),
        ("[site](https://example.org/a_(b))", "https://example.org/a_(b)", None, "site", "markdown"),
        ("<https://example.org/x?y=1>", "https://example.org/x?y=1", None, None, "markdown"),
        ("[mail](mailto:a@b.de)", "mailto:a@b.de", None, "mail", "markdown"),
        ("| a | [[Note\\|alias]] |", "Note", None, "alias", "wikilink"),
        ("[[ Spaced Note ]]", "Spaced Note", None, None, "wikilink"),
        ("[[Größe]]", "Größe", None, None, "wikilink"),
    ],
)
def test_extract_one_link(text: str, target: str, anchor: str | None, alias: str | None, kind: str) -> None:
    source = f"before {text} after"
    link = one(source)
    assert (link.target, link.anchor, link.alias, link.kind) == (target, anchor, alias, kind)
    assert link.is_url == (":" in target)
    assert source[link.char_start : link.char_end] == link.raw
    assert link.raw in text


def test_offsets_slice_the_raw_text() -> None:
    text = "Größe [[A]] und ![[B#x]]\r\n[c](d.md) <https://e.org> [[F|g]]"
    links = extract_links(text)
    assert [text[link.char_start : link.char_end] for link in links] == [link.raw for link in links]
    assert [link.kind for link in links] == ["wikilink", "embed", "markdown", "markdown", "wikilink"]
    assert [link.is_url for link in links] == [False, False, False, True, False]


def test_image_inside_link_text_is_its_own_link() -> None:
    links = extract_links("[![badge](b.png)](https://ci.example)")
    assert [(link.kind, link.target) for link in links] == [("markdown", "https://ci.example"), ("embed", "b.png")]


@pytest.mark.parametrize(
    "text",
    [
        "`[[inline]]`",
        "``a ` [[double]] ``",
        "```\n[[fenced]]\n```",
        "~~~md\n[[tilde]]\n~~~",
        "> ```\n> [[quoted fence]]\n> ```",
        "   ```\n[[indented fence]]\n   ```",
        "````\n```\n[[inner fence line]]\n````",
        "```\n[[unclosed fence]]",
        "%%[[comment]]%%",
        "%%\n[[block comment]]\n%%",
        "%% unclosed comment runs to the end [[x]]",
        "<!-- [[html comment]] -->",
        "`[x](y.md)` and `<https://z.org>`",
        "[[]]",
        "reference style [x]: note.md",
    ],
)
def test_links_in_code_and_comments_are_ignored(text: str) -> None:
    assert extract_links(text) == []


def test_unclosed_backticks_are_literal() -> None:
    assert [link.target for link in extract_links("a ` b [[Note]]")] == ["Note"]


def test_code_span_does_not_cross_a_blank_line() -> None:
    assert [link.target for link in extract_links("a `b\n\n[[Note]] c` d")] == ["Note"]


def test_link_after_code_is_found() -> None:
    text = "```\n[[no]]\n```\n`[[no]]` %%[[no]]%% [[yes]]"
    assert [link.target for link in extract_links(text)] == ["yes"]


@given(st.text(alphabet="ab`~%[]()!#|<>-\n\r ", max_size=80))
def test_mask_keeps_offsets_and_line_breaks(text: str) -> None:
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert [i for i, c in enumerate(masked) if c in "\r\n"] == [i for i, c in enumerate(text) if c in "\r\n"]
    for link in extract_links(text):
        assert text[link.char_start : link.char_end] == link.raw


def test_frontmatter_links() -> None:
    fm = {
        "title": "Not a link",
        "related": ["[[A]]", "[[B#Part|b]]", "C"],
        "depends_on": "[[D]]",
        "assigned_to": "Alice",
        "project": "[[Mindnet]]",
        "people": ["[[Bob]]", "Carol"],
        "created": "2024-01-01",
        "nested": {"deep": ["[[E]]"]},
        "count": 3,
    }
    assert frontmatter_links(fm) == {
        "related": ["A", "B", "C"],
        "depends_on": ["D"],
        "assigned_to": ["Alice"],
        "project": ["Mindnet"],
        "people": ["Bob"],
        "nested": ["E"],
    }


# -- resolution ---------------------------------------------------------------------------------


@pytest.fixture
def resolver() -> Resolver:
    notes = [
        make_note("index.md"),
        make_note("projects/Mindnet Plan.md", note_id="20240101-proj-mindnet", title="Mindnet", aliases=("MN",)),
        make_note("people/Alice Smith.md", aliases=("Alice",)),
        make_note("a/todo.md", note_id="todo-a"),
        make_note("b/c/todo.md", note_id="todo-bc"),
        make_note("b/todo.md", note_id="todo-b"),
        make_note("concepts/Größe.md", note_id="groesse"),
        make_note(unicodedata.normalize("NFD", "concepts/Übersicht.md"), note_id="uebersicht"),
        make_note("notes/v1.2 release.md", note_id="v12"),
        make_note("deep/x/y/readme.md", note_id="readme-deep"),
        make_note("readme.md", note_id="readme-root"),
        make_note("deep/x/sibling.md", note_id="sibling"),
    ]
    return Resolver(notes, ["attachments/diagram.png", "attachments/Paper.pdf", "other/diagram.png"])


@pytest.mark.parametrize(
    ("target", "source", "status", "target_id"),
    [
        ("index", "x.md", "resolved", "index"),
        ("Index", "x.md", "resolved", "index"),  # case-insensitive
        ("INDEX.MD", "x.md", "resolved", "index"),
        ("20240101-proj-mindnet", "x.md", "resolved", "20240101-proj-mindnet"),  # id
        ("Mindnet Plan", "x.md", "resolved", "20240101-proj-mindnet"),  # stem
        ("projects/Mindnet Plan", "x.md", "resolved", "20240101-proj-mindnet"),  # path without .md
        ("projects/mindnet plan.md", "x.md", "resolved", "20240101-proj-mindnet"),  # path with .md
        ("/projects/Mindnet Plan", "a/x.md", "resolved", "20240101-proj-mindnet"),  # vault-absolute
        ("mindnet", "x.md", "resolved", "20240101-proj-mindnet"),  # title
        ("mn", "x.md", "resolved", "20240101-proj-mindnet"),  # alias
        ("alice", "x.md", "resolved", "alice-smith"),  # alias
        ("Größe", "x.md", "resolved", "groesse"),
        (unicodedata.normalize("NFD", "größe"), "x.md", "resolved", "groesse"),  # NFD link, NFC file
        ("Übersicht", "x.md", "resolved", "uebersicht"),  # NFC link, NFD file
        ("v1.2 release", "x.md", "resolved", "v12"),  # a dot is not an extension
        ("c/todo", "x.md", "resolved", "todo-bc"),  # path suffix
        ("./sibling", "deep/x/other.md", "resolved", "sibling"),
        ("../sibling", "deep/x/y/other.md", "resolved", "sibling"),
        ("./readme", "deep/x/y/other.md", "resolved", "readme-deep"),  # explicit relative beats root
        ("diagram.png", "x.md", "attachment", "attachments/diagram.png"),  # shortest path, alphabetical
        ("other/diagram.png", "x.md", "attachment", "other/diagram.png"),
        ("paper.PDF", "x.md", "attachment", "attachments/Paper.pdf"),
        ("missing.png", "x.md", "attachment", "missing.png"),  # known extension, file absent
        ("Missing Note", "x.md", "unresolved", "missing-note"),
        ("folder/Missing Note.md", "x.md", "unresolved", "missing-note"),
        ("https://example.org", "x.md", "external", "https://example.org"),
        ("", "deep/x/sibling.md", "resolved", "sibling"),  # [[#heading]]: the note itself
        ("ALICE-SMITH", "x.md", "resolved", "alice-smith"),  # id, case-insensitive
        ("Alice  Smith!", "x.md", "resolved", "alice-smith"),  # slug of the text names an existing id
    ],
)
def test_resolve(resolver: Resolver, target: str, source: str, status: str, target_id: str) -> None:
    res = resolver.resolve(target, source)
    assert (res.status, res.target_id) == (status, target_id)


def test_the_resolvers_memory_is_bounded_and_its_answers_stay_the_same(
    resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole import resolves through one resolver: what it remembers must not grow with the vault (issue 27)."""
    asked = [(f"Missing Note {i}", f"folder{i % 7}/x.md") for i in range(50)] + [("todo", "b/c/source.md")] * 3
    first = [resolver.resolve(target, source) for target, source in asked]
    monkeypatch.setattr("mindnet.links.RESOLUTIONS_KEPT", 8)
    fresh = Resolver([], [])  # any resolver reads the bound when it remembers
    for i in range(100):
        fresh.resolve(f"[[n{i}]]")
        assert len(fresh._cache) <= 8
    assert resolver.resolve("Brand New Note", "x.md").status == "unresolved"  # a miss past the bound: starts over
    assert len(resolver._cache) == 1
    again = [resolver.resolve(target, source) for target, source in reversed(asked)]
    assert again == list(reversed(first))
    assert len(resolver._cache) <= 8


_NAMES = st.sampled_from(["a", "A", "b", "todo", "Größe", unicodedata.normalize("NFD", "größe"), "x y", "readme"])
_FOLDERS = st.sampled_from(["", "a/", "b/", "b/c/", "A/"])


@st.composite
def _vault_state(draw: st.DrawFn) -> tuple[list[Any], list[str]]:
    """A vault's notes (unique paths and ids, names that collide across notes on purpose) and attachments."""
    paths = draw(st.lists(st.tuples(_FOLDERS, _NAMES).map(lambda t: f"{t[0]}{t[1]}.md"), max_size=8, unique=True))
    notes = []
    for i, path in enumerate(paths):
        title = draw(st.one_of(st.none(), _NAMES))
        aliases = tuple(draw(st.lists(st.one_of(_NAMES, st.just(" ")), max_size=3)))
        notes.append(make_note(path, note_id=draw(st.sampled_from([f"n{i}", "todo", "A"])) if i else None,
                               title=title, aliases=aliases))
    notes = list({n.note_id: n for n in notes}.values())  # the reader keeps one note per id
    attachments = draw(st.lists(st.sampled_from(["a/x.png", "b/x.png", "x.png", "Todo.pdf"]), max_size=3, unique=True))
    return notes, attachments


def _answers(resolver: Resolver, notes: list[Any], ids: set[str] | None = None) -> list[Any]:
    asked = [f"{folder}{name}" for folder in ("", "b/", "/a/", "./", "../") for name in
             ("a", "A", "b", "todo", "todo.md", "Größe", "x y", "readme", "x.png", "todo.pdf", "n1", "missing", "")]
    out: list[Any] = [resolver.resolve(t, source) for t in asked for source in ("x.md", "b/c/y.md")]
    out += [resolver.resolve_link(one(f"[l]({folder}{name}.md)"), "b/z.md")
            for folder in ("", "../", "c/") for name in ("a", "todo", "readme", "x%20y")]
    out += [(resolver.path_of(n.note_id), resolver.note_id_at(n.path)) for n in notes]
    out += [resolver.path_of(note_id) for note_id in sorted(ids or ())]  # ids of notes gone since: None
    return out


@given(st.lists(_vault_state(), min_size=1, max_size=5))
def test_a_kept_resolver_answers_as_a_new_one_through_every_change(states: list[tuple[list[Any], list[str]]]) -> None:
    """A resident refreshes one resolver on each import (`KeptResolver`) instead of building it over the vault;
    after any sequence of renames, new titles and aliases, deletions and attachments it must answer every
    target exactly as a resolver built for that state does, including what it remembered before."""
    kept = KeptResolver()
    ids: set[str] = set()
    for notes, attachments in states:
        ids |= {n.note_id for n in notes}
        refreshed = kept.current(notes, attachments)
        assert _answers(refreshed, notes, ids) == _answers(Resolver(notes, attachments), notes, ids)
    assert kept.current(*states[-1]) is refreshed  # one resolver, kept


def test_a_refresh_that_renames_nothing_keeps_what_the_resolver_found() -> None:
    notes = [make_note("a.md"), make_note("b.md", title="Bee")]
    resolver = Resolver(notes)
    assert resolver.resolve("Bee").target_id == "b"
    body_edit = [notes[0], make_note("b.md", body="new text", title="Bee")]
    assert resolver.refresh(body_edit) == 0
    assert len(resolver._cache) == 1  # still remembered: no name changed
    assert resolver.refresh([notes[0], make_note("b.md", title="Wasp")]) == 2
    assert not resolver._cache
    assert resolver.resolve("Bee").status == "unresolved"
    assert resolver.resolve("Wasp").target_id == "b"


def test_ambiguous_name_takes_the_shortest_path_and_reports(resolver: Resolver) -> None:
    res = resolver.resolve("todo", "b/c/source.md")
    # Fewest segments first, then alphabetical; the linking note's own folder gets no preference.
    assert res == Resolution("resolved", "todo-a", "a/todo.md", ("a/todo.md", "b/todo.md", "b/c/todo.md"))
    assert resolver.resolve("readme", "deep/x/y/other.md").target_id == "readme-root"


def test_path_qualified_name_disambiguates(resolver: Resolver) -> None:
    assert resolver.resolve("b/todo", "x.md") == Resolution("resolved", "todo-b", "b/todo.md", ())


def test_markdown_links_are_relative_and_url_decoded(resolver: Resolver) -> None:
    def md(text: str, source: str) -> Resolution:
        return resolver.resolve_link(one(text), source)

    assert md("[p](../projects/Mindnet%20Plan.md)", "people/x.md").target_id == "20240101-proj-mindnet"
    assert md("[p](Mindnet%20Plan.md)", "projects/x.md").target_id == "20240101-proj-mindnet"
    assert md("[p](projects/Mindnet%20Plan.md)", "x.md").target_id == "20240101-proj-mindnet"
    # Relative first: deep/x/y/readme.md, not the root readme that a wikilink would pick.
    assert md("[r](readme.md)", "deep/x/y/a.md").target_id == "readme-deep"
    assert resolver.resolve_link(one("[[readme]]"), "deep/x/y/a.md").target_id == "readme-root"
    # Not relative to the source folder: falls back to the vault root, then to the name.
    assert md("[r](projects/Mindnet%20Plan.md)", "people/x.md").target_id == "20240101-proj-mindnet"
    assert md("![d](../attachments/diagram.png)", "people/x.md") == Resolution(
        "attachment", "attachments/diagram.png", "attachments/diagram.png"
    )
    assert md("![g](../../img/a.gif)", "user/features/x.md") == Resolution("attachment", "img/a.gif")
    assert md("[x](https://a.b)", "x.md").status == "external"


def test_tier_order_stem_beats_title_beats_alias() -> None:
    notes = [
        make_note("Alpha.md", note_id="n-stem"),
        make_note("x/other.md", note_id="n-title", title="alpha"),
        make_note("y/third.md", note_id="n-alias", aliases=("Alpha",)),
    ]
    r = Resolver(notes)
    assert r.resolve("alpha").target_id == "n-stem"
    assert Resolver(notes[1:]).resolve("alpha").target_id == "n-title"
    assert Resolver(notes[2:]).resolve("alpha").target_id == "n-alias"


def test_unresolved_target_id_never_names_an_existing_note(resolver: Resolver) -> None:
    ids = {"index", "alice-smith", "groesse", "todo-a"}
    for text in ["Index!", "alice smith", "Todo A", "todo_a"]:
        res = resolver.resolve(text, "x.md")
        assert res.status == "resolved" or res.target_id not in ids


def test_link_key_is_shared_by_text_and_note() -> None:
    assert link_key("folder/My Note.md") == link_key("my note") == "my-note"
    assert link_key("../a/Größe.md") == "größe"


# -- chunks -------------------------------------------------------------------------------------


def test_attach_links_fills_the_chunk_payload(resolver: Resolver) -> None:
    body = "See [[Index]] and [[Index|again]].\n\nMore: [[Nobody]], ![[diagram.png]], [w](https://w.org), [[#top]]"
    note = make_note("deep/x/sibling.md", body, note_id="sibling")
    split = body.index("More")
    first = make_chunk(note, 1, 0, split)
    # The second chunk repeats the first sentence as overlap; its links belong to chunk 1 only.
    second = make_chunk(note, 2, 0, len(body), content_start=split)
    links = extract_links(body)
    a = attach_links(first, links, resolver, note.path)
    b = attach_links(second, links, resolver, note.path)
    assert a.wikilinks == ("index",)
    assert a.references == (LinkRef("index", "wikilink", "resolved"),)
    assert b.wikilinks == ()
    assert b.external_links == ("https://w.org",)
    assert b.references == (
        LinkRef("nobody", "wikilink", "unresolved"),
        LinkRef("attachments/diagram.png", "embed", "attachment"),
        LinkRef("sibling", "wikilink", "resolved"),
    )


# -- embeds -------------------------------------------------------------------------------------


SOURCE_BODY = """Intro line.

## Part A
Text of A.
### Sub A
Deeper text.

## Part B
Para one
continues here. ^para-id

- item one
- item two ^item-id

```
## Not a heading
```
"""


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        (None, SOURCE_BODY),
        ("Part A", "## Part A\nText of A.\n### Sub A\nDeeper text."),
        ("part a#Sub A", "### Sub A\nDeeper text."),
        ("^para-id", "Para one\ncontinues here. ^para-id"),
        ("^item-id", "- item two ^item-id"),
        ("Not a heading", None),
        ("^nope", None),
    ],
)
def test_embedded_span(anchor: str | None, expected: str | None) -> None:
    span = embedded_span(SOURCE_BODY, anchor)
    assert (SOURCE_BODY[span[0] : span[1]] if span else None) == expected


def test_transclusions() -> None:
    source = make_note("src.md", SOURCE_BODY, note_id="src")
    host = make_note("host.md", "Host.\n\n![[src#Part A]]\n![[missing]]\n![[pic.png]]\n![[#Self]]", note_id="host")
    r = Resolver([source, host])
    (t,) = transclusions(host, r, {"src": source, "host": host})
    assert (t.host_note_id, t.source_note_id, t.anchor) == ("host", "src", "Part A")
    assert t.text == "## Part A\nText of A.\n### Sub A\nDeeper text."
    assert host.fulltext[t.link_start :].startswith("![[src#Part A]]")


# -- corpora ------------------------------------------------------------------------------------


def test_foam_docs_counts_and_spot_checks() -> None:
    vault = read_vault(corpus("foam-docs/vault"))
    resolver = Resolver(vault.notes, vault.attachments)
    counts: dict[str, int] = {}
    found: dict[tuple[str, str], Resolution] = {}
    for note in vault.notes:
        for link in extract_links(note.fulltext):
            res = resolver.resolve_link(link, note.path)
            counts[res.status] = counts.get(res.status, 0) + 1
            found.setdefault((note.path, link.raw), res)
    # 300 `[[…]]` in the files; 101 of them are syntax examples inside code and are not links.
    assert sum(counts.values()) == 540
    assert counts == {"resolved": 264, "external": 250, "attachment": 22, "unresolved": 4}

    expect = {
        ("user/recipes/recipes.md", "[[graph-view]]"): ("resolved", "user/features/graph-view.md"),
        ("user/recipes/search-and-navigate-notes.md", "[[resource-filters|filter the graph]]"): (
            "resolved",
            "user/features/resource-filters.md",
        ),
        ("user/recipes/migrating-from-obsidian.md", "[[note-properties]]"): (
            "resolved",
            "user/features/note-properties.md",
        ),
        ("index.md", "[[principles]]"): ("resolved", "principles.md"),
        ("user/getting-started/first-workspace.md", "[Explore navigation](navigation.md)"): (
            "resolved",
            "user/getting-started/navigation.md",  # relative to the linking note's folder
        ),
        ("index.md", "[License](#license)"): ("resolved", "index.md"),  # a heading of the note itself
        ("user/features/footnotes.md", "[[block-anchors]]"): ("resolved", "user/features/block-anchors.md"),
        ("user/getting-started/navigation.md", "[Set up templates](../features/templates.md)"): (
            "resolved",
            "user/features/templates.md",
        ),
        ("user/tools/cli/search.md", "[[cli-grep|foam grep]]"): ("unresolved", None),  # the file is cli/grep.md
        ("user/index.md", "[[publishing]]"): ("unresolved", None),  # a folder, not a note (Foam-only rule)
        ("index.md", "![Short video of Foam in use](assets/images/foam-navigation-demo.gif)"): ("attachment", None),
        ("index.md", "[MIT license](LICENSE.txt)"): ("attachment", None),
    }
    for key, (status, path) in expect.items():
        res = found[key]
        assert (res.status, res.target_path) == (status, path), key
    assert found[("user/tools/cli/search.md", "[[cli-grep|foam grep]]")].target_id == "cli-grep"
    # `index.md` exists twice (root and user/): a bare name takes the root one (shortest path).
    assert resolver.resolve("index", "user/tools/cli.md").target_path == "index.md"
    assert resolver.resolve("index", "user/tools/cli.md").ambiguous_candidates == ("index.md", "user/index.md")


def test_sample_vault_gold() -> None:
    """Every link of the sample vault with its expected target, kind and status (gold file)."""
    if not GOLD.is_file():
        pytest.skip("tests/gold/sample_vault_links.json not written yet")
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    vault = read_vault(SAMPLE)
    resolver = Resolver(vault.notes, vault.attachments)
    actual: list[dict[str, Any]] = []
    for note in vault.notes:
        for link in extract_links(note.fulltext):
            res = resolver.resolve_link(link, note.path)
            actual.append(
                {
                    "path": note.path,
                    "raw": link.raw,
                    "target": link.target,
                    "fragment": link.anchor,
                    "kind": link.kind,
                    "expected_note_path": res.target_path,
                    "status": res.status,
                }
            )

    def key(entry: dict[str, Any]) -> str:
        return json.dumps(entry, sort_keys=True, ensure_ascii=False)

    assert sorted(map(key, actual)) == sorted(map(key, gold))
