"""Reading vaults (R1–R6): discovery, defaults, and every bad-input case of R3 with its exact message."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import corpus
from mindnet.config import Settings
from mindnet.errors import mib
from mindnet.vault import read_vault


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


FULL = """---
title: Chunking
id: 20240105-1030-concept-chunking
type: concept
status: draft
created: 2024-01-05
tags: [topic/chunking, area/ml]
---
# Chunking

Text über das Zerlegen von Notizen in Abschnitte.
"""


def test_full_frontmatter_note_has_r4_fields(tmp_path: Path) -> None:
    write(tmp_path, "concepts/chunking.md", FULL)
    result = read_vault(tmp_path)
    assert result.problems == ()
    (note,) = result.notes
    assert note.note_id == "20240105-1030-concept-chunking"
    assert note.title == "Chunking"
    assert note.type == "concept"
    assert note.status == "draft"
    assert note.created == "2024-01-05"
    assert note.tags == ("topic/chunking", "area/ml")
    assert note.path == "concepts/chunking.md"
    assert note.lang == "de"
    assert note.fulltext == "# Chunking\n\nText über das Zerlegen von Notizen in Abschnitte.\n"
    assert note.body_line == 9
    assert note.warnings == ()


def test_note_without_frontmatter_gets_defaults_reported_as_warnings(tmp_path: Path) -> None:
    body = "Backlinks turn a folder of notes into a network that you can walk in both directions.\n"
    write(tmp_path, "Mein Gedanke.md", "# Über Rückverweise\n\n" + body)
    (note,) = read_vault(tmp_path).notes
    assert note.note_id == "mein-gedanke"
    assert note.title == "Über Rückverweise"
    assert note.type == "note"
    assert note.tags == ()
    assert note.created.endswith("+00:00")
    assert note.lang == "en"
    missing = [w.split("'")[1] for w in note.warnings]
    assert missing == ["title", "id", "type", "status", "created", "tags"]


def test_title_falls_back_to_stem_when_no_h1(tmp_path: Path) -> None:
    write(tmp_path, "plain.md", "## Only an H2\n\ntext\n")
    assert read_vault(tmp_path).notes[0].title == "plain"


def test_frontmatter_lang_wins_over_detection(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\nlang: en\n---\nDies ist eindeutig ein deutscher Satz über Notizen.\n")
    assert read_vault(tmp_path).notes[0].lang == "en"


def test_strict_turns_missing_fields_into_errors(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "---\ntitle: A\n---\nbody\n")
    result = read_vault(tmp_path, Settings(strict=True))
    assert result.notes == ()
    assert [p.one_line() for p in result.problems] == [
        "a.md:2: error: missing required field(s): id, type, status, created, tags (--strict)"
    ]


def test_discovery_skips_obsidian_trash_git_and_mindnetignore(tmp_path: Path) -> None:
    for rel in [".obsidian/x.md", ".trash/y.md", ".git/z.md", "drafts/d.md", "keep/k.md", "n.md", "img.png"]:
        write(tmp_path, rel, "# t\n")
    write(tmp_path, ".mindnetignore", "drafts/\n")
    result = read_vault(tmp_path)
    assert [n.path for n in result.notes] == ["keep/k.md", "n.md"]
    assert result.attachments == ("img.png",)


def test_symlink_out_of_vault_is_reported_not_followed(tmp_path: Path) -> None:
    vault, outside = tmp_path / "vault", tmp_path / "outside"
    write(outside, "secret.md", "# secret\n")
    write(vault, "a.md", "# a\n")
    os.symlink(outside / "secret.md", vault / "link.md")
    os.symlink(outside, vault / "dir")
    result = read_vault(vault)
    assert [n.path for n in result.notes] == ["a.md"]
    assert sorted(p.one_line() for p in result.problems) == [
        "dir: error: symlink points outside the vault; not followed",
        "link.md: error: symlink points outside the vault; not followed",
    ]


def test_symlink_inside_vault_is_followed_and_loop_reported(tmp_path: Path) -> None:
    write(tmp_path, "sub/a.md", "# a\n")
    os.symlink(tmp_path / "sub", tmp_path / "sub" / "loop")
    os.symlink(tmp_path / "sub" / "a.md", tmp_path / "alias.md")
    result = read_vault(tmp_path)
    assert [n.path for n in result.notes] == ["alias.md", "sub/a.md"]
    assert [p.one_line() for p in result.problems] == [
        "sub/loop: error: symlink loop; folder already read, not followed"
    ]


BAD_CASES = [
    ("yaml.md", b"---\ntitle: ok\ntags: [a, b\n---\nbody\n",
     "yaml.md:4: error: malformed YAML frontmatter: did not find expected ',' or ']'"),
    ("utf8.md", b"# ok\n\nline two \xff\xfe bad\n", "utf8.md:3: error: invalid UTF-8 (byte 0xff at column 10); "
     "save the file as UTF-8"),
    ("nul.md", b"# ok\nsecond\x00line\n", "nul.md:2: error: NUL byte in file (binary file or wrong encoding)"),
    ("empty.md", b"", "empty.md:1: error: empty file"),
    ("blank.md", b"  \n\n", "blank.md:1: error: empty file"),
    ("notmap.md", b"---\n- a\n- b\n---\nbody\n", "notmap.md:2: error: frontmatter is not a mapping of fields"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_input_is_one_line_and_others_still_load(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    write(tmp_path, name, content)
    write(tmp_path, "good.md", "# Good\n\nfine\n")
    result = read_vault(tmp_path)
    assert [n.path for n in result.notes] == ["good.md"]
    assert [p.one_line() for p in result.problems] == [message]
    assert result.failed == 1


def test_file_over_size_limit(tmp_path: Path) -> None:
    write(tmp_path, "big.md", "x" * 2_000_001)
    result = read_vault(tmp_path, Settings(max_file_bytes=1_000_000))
    assert [p.one_line() for p in result.problems] == [
        "big.md: error: file is 1.91 MiB, over the 0.95 MiB limit (max_file_bytes)"
    ]


def test_the_default_size_limit_reads_as_the_readme_states_it(tmp_path: Path) -> None:
    """Issue 28: the 5 MiB default was reported as a "5.2 MB limit" while the README said 5.0 MB."""
    limit = Settings().max_file_bytes
    write(tmp_path, "big.md", "x" * (6 * 2**20))
    write(tmp_path, "edge.md", "x" * (limit + 1))
    lines = [p.one_line() for p in read_vault(tmp_path).problems]
    assert lines == [
        "big.md: error: file is 6.0 MiB, over the 5.0 MiB limit (max_file_bytes)",
        "edge.md: error: file is 5,242,881 bytes, over the 5.0 MiB limit of 5,242,880 bytes (max_file_bytes)",
    ]
    root = Path(__file__).resolve().parents[1]
    readme, guide = ((root / name).read_text(encoding="utf-8") for name in ("README.md", "docs/bad-input.md"))
    assert "over the 5.0 MiB limit (max_file_bytes)" in readme
    assert "| file size | `max_file_bytes` / `MINDNET_MAX_FILE_BYTES` | 5.0 MiB |" in guide
    assert not re.search(r"\d MB limit|limited to \d+ MB", readme + guide)


@given(st.integers(0, 2**40))
def test_mib_is_the_size_to_a_hundredth(size: int) -> None:
    shown = mib(size)
    assert re.fullmatch(r"\d+\.\d\d? MiB", shown)
    assert abs(float(shown.removesuffix(" MiB")) - size / 2**20) <= 0.005 + 1e-9


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI runs as root, where chmod 0 does not stop reads, so the OS error is injected."""
    write(tmp_path, "locked.md", "# x\n")
    write(tmp_path, "open.md", "# y\n")
    real = os.open

    def guarded_open(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: object) -> int:
        if Path(path).name == "locked.md":
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", guarded_open)
    result = read_vault(tmp_path)
    assert [n.path for n in result.notes] == ["open.md"]
    assert [p.one_line() for p in result.problems] == ["locked.md: error: cannot read file: permission denied"]


def test_bom_crlf_and_lone_cr_are_kept_in_fulltext(tmp_path: Path) -> None:
    write(tmp_path, "bom.md", "\ufeff---\r\ntitle: T\r\nid: t\r\n---\r\n# T\r\nline\rnext\r\n")
    (note,) = read_vault(tmp_path).notes
    assert note.title == "T"
    assert note.fulltext == "# T\r\nline\rnext\r\n"
    assert note.body_line == 5
    assert "UTF-8 byte order mark ignored" in note.warnings


def test_duplicate_explicit_ids_first_sorted_path_wins(tmp_path: Path) -> None:
    write(tmp_path, "b.md", "---\nid: same\n---\nB\n")
    write(tmp_path, "a.md", "---\ntitle: A\nid: same\n---\nA\n")
    result = read_vault(tmp_path)
    assert [n.path for n in result.notes] == ["a.md"]
    assert [p.one_line() for p in result.problems] == [
        "b.md:2: error: duplicate id 'same': already used by a.md; note skipped"
    ]


def test_defaulted_ids_that_collide_fall_back_to_the_path(tmp_path: Path) -> None:
    write(tmp_path, "index.md", "# root\n")
    write(tmp_path, "user/index.md", "# user\n")
    write(tmp_path, "x.md", "---\nid: user/index\n---\nexplicit wins\n")
    result = read_vault(tmp_path)
    ids = {n.path: n.note_id for n in result.notes}
    assert ids == {"index.md": "index", "user/index.md": "user/index-2", "x.md": "user/index"}


def test_yaml_11_surprises_keep_the_written_text(tmp_path: Path) -> None:
    write(
        tmp_path,
        "n.md",
        "---\nid: 0012\ntitle: Ratio: 3 to 1\ntags: #idea #later\nstatus: no\ntime: 12:30\n"
        "related: [[Other Note]]\ncreated: 2024-01-05\n---\nbody\n",
    )
    result = read_vault(tmp_path)
    (note,) = result.notes
    assert note.note_id == "0012"
    assert note.title == "Ratio: 3 to 1"
    assert note.tags == ("idea", "later")
    assert note.status == "no"
    assert note.frontmatter["time"] == "12:30"
    assert note.frontmatter["related"] == "[[Other Note]]"
    assert note.references == ("Other Note",)
    assert note.created == "2024-01-05"
    assert sorted(note.warnings) == [
        "line 3: value with ': ' read as text",
        "line 4: value of 'tags' starts with '#', read as text",
        "missing required field 'type'; default used",
    ]


def test_content_hash_changes_with_any_byte(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "# A\n\ntext\n")
    before = read_vault(tmp_path).notes[0].content_hash
    write(tmp_path, "a.md", "# A\n\ntext \n")
    assert read_vault(tmp_path).notes[0].content_hash != before


CORPUS_COUNTS = {
    "foam-docs/vault": 86,
    "rustbook-de/src": 112,
    "msdocs-skype-teams-de/docs": 2905,
    "xquad/vault": 96,
}


@pytest.mark.slow
@pytest.mark.parametrize(("folder", "count"), CORPUS_COUNTS.items())
def test_every_corpus_file_becomes_one_note(folder: str, count: int) -> None:
    root = corpus(folder)
    md_files = sum(1 for p in root.rglob("*.md"))
    result = read_vault(root)
    assert md_files == count
    assert len(result.notes) == count
    assert result.problems == ()
    assert len({n.note_id for n in result.notes}) == count


_STEMS = st.sampled_from(["index", "Index", "notes", "a"])
_FOLDERS = st.sampled_from(["", "x/", "y/", "x/y/"])
_EXPLICIT = st.sampled_from([None, "", "index", "twin"])


@given(st.lists(st.tuples(_FOLDERS, _STEMS, _EXPLICIT, st.text(max_size=20)), max_size=12,
                unique_by=lambda t: (t[0] + t[1]).casefold()))
def test_slim_notes_get_the_ids_and_problems_whole_notes_get(files: list[tuple[str, str, str | None, str]]) -> None:
    """Issue 27: an import keeps every note slim (no body, frontmatter reduced to its id) and makes ids
    unique on those; the ids, the notes kept and the duplicates reported must be those of whole notes."""
    from fakes import make_note
    from mindnet.vault import assign_ids, slim_note

    notes = []
    for folder, stem, explicit, body in files:
        front = {"id": explicit, "title": "T", "tags": ["a"]} if explicit is not None else {"title": "T"}
        note = make_note(f"{folder}{stem}.md", body, note_id=explicit or stem.lower(), frontmatter=front)
        notes.append(note)
    whole, whole_problems = assign_ids(notes)
    slim, slim_problems = assign_ids([slim_note(n) for n in notes])
    assert [(n.path, n.note_id) for n in slim] == [(n.path, n.note_id) for n in whole]
    assert slim_problems == whole_problems
    by_path = {n.path: n for n in notes}  # a note renamed field by field is the note with only its id changed
    assert all(n == dataclasses.replace(by_path[n.path], note_id=n.note_id) for n in whole)
    assert all(n.fulltext == "" and set(n.frontmatter) <= {"id"} for n in slim)
    for note in notes:  # a slim note is slim already: it comes back as it is, equal to a slimming of it
        once = slim_note(note)
        assert slim_note(once) is once
        assert once == dataclasses.replace(note, fulltext="", warnings=(),
                                           frontmatter={k: v for k, v in note.frontmatter.items() if k == "id"},
                                           field_lines={k: v for k, v in note.field_lines.items() if k == "id"})
