"""Findings of the hostile-input campaign against the real entry points (mindnet-chunk, import, serve).

Each test is the smallest input that broke an entry point, run against the module that owned the bug.
`pytest.mark.timeout` is a tripwire for super-linear work (minutes before the fix, about a second
after), not a speed assertion.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindnet.chunking import sentences
from mindnet.chunking.sentences import sentence_spans
from mindnet.config import Settings, load_settings
from mindnet.errors import ConfigError, NoteError, printable
from mindnet.points import jsonable
from mindnet.vault import NoteProblem, parse_note, read_note, read_vault

BIN = Path(sys.executable).parent


@pytest.mark.timeout(60)
def test_sentence_split_is_linear_in_many_links_on_one_line() -> None:
    text = "[[n]] " * 100_000  # each link rescanned the rest of its line: mindnet-chunk ran > 60 s
    spans = sentences._wikilink_spans(text)
    assert len(spans) == 100_000 and spans[-1] == (len(text) - 6, len(text) - 1)
    assert sentence_spans(text, "en")[-1][1] == len(text.rstrip())


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_printable_text_is_one_line_and_keeps_printable_characters(text: str) -> None:
    shown = printable(text)
    assert len(f"{shown}x".splitlines()) == 1 and "\x1b" not in shown
    assert all(c in shown for c in text if c.isprintable())
    assert NoteProblem(text, 3, text).one_line().count("\n") == 0
    assert len(str(NoteError(text, text, 1)).splitlines()) <= 1


@given(st.text(alphabet=st.sampled_from("ab.\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u200d"),
               max_size=20))
def test_no_bidi_control_reaches_a_report_line(text: str) -> None:
    """A right-to-left override in a file name made the report show another name (`evil\u202edm.md`);
    the zero-width joiner of emoji and Indic names is no control and stays."""
    shown = printable(text)
    assert not any(unicodedata.bidirectional(c) in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")
                   or c in "\u200e\u200f" for c in shown)
    assert shown.count("\u200d") == text.count("\u200d")


def _output(*command: str) -> tuple[list[str], list[str]]:
    """stdout and stderr lines of a command that must report a bad file (exit 1) without a traceback."""
    done = subprocess.run([str(BIN / command[0]), *command[1:]], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr and done.returncode == 1
    return done.stdout.splitlines(), done.stderr.splitlines()


@pytest.mark.parametrize("name", ["bad\nname.md", "esc\x1b[31mred.md", "sep\u2028line.md"])
def test_a_bad_file_whose_name_breaks_lines_is_still_reported_on_one_line(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"# x\n\x00\n")  # a newline in the name split the report in two
    (tmp_path / "ok.md").write_text("# ok\n\nfine\n", encoding="utf-8")
    shown = printable(name)
    assert shown != name and "\n" not in shown
    assert _output("mindnet-chunk", "-j", "1", str(tmp_path))[1] == [
        f"{shown}:2: error: NUL byte in file (binary file or wrong encoding)"
    ]
    lint = [line for line in _output("mindnet", "lint", str(tmp_path))[0] if "MN003" in line]
    assert len(lint) == 1 and lint[0].startswith(f"{tmp_path}/{shown}:2:")


_COLLECTIONS = st.lists(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), min_size=1, max_size=6, unique=True)


@given(_COLLECTIONS, st.sampled_from(["{%s}", "!!set {%s}", "[%s]"]))
@settings(max_examples=100, deadline=None)
def test_tags_written_as_a_mapping_or_set_are_their_names(names: list[str], form: str) -> None:
    text = f"---\ntags: {form % ', '.join(names)}\naliases: {{{', '.join(names)}}}\n---\nbody\n"
    note = parse_note(text, "a.md", Settings(), lambda: "2020-01-01")  # gave tags like "{'a':" and "None}"
    expected = tuple(sorted(names)) if form.startswith("!!set") else tuple(names)
    assert note.tags == expected and note.aliases == tuple(names)
    if form.startswith("!!set"):  # the payload's frontmatter keeps what was written, a set in a stable order
        assert jsonable(note.frontmatter)["tags"] == list(expected)


def test_a_request_path_cannot_forge_a_line_of_the_server_log(caplog: pytest.LogCaptureFixture) -> None:
    from mindnet.server.app import Guard

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    sent: list[dict[str, Any]] = []
    path = "/x\n2026-12-01 INFO forged \x1b[31m"  # what `/x%0a...%1b[31m` decodes to
    scope = {"type": "http", "method": "GET", "path": path, "headers": [(b"host", b"127.0.0.1")]}
    with caplog.at_level("INFO", logger="mindnet.http"):
        asyncio.run(Guard(app, allowed_hosts=frozenset(), api_key=None, trusted=True)(scope, receive, send))
    logged = [r.getMessage() for r in caplog.records if r.name == "mindnet.http"]
    assert sent[0]["status"] == 404
    assert logged == ["GET /x\\n2026-12-01 INFO forged \\x1b[31m 404 " + logged[0].rsplit(" ", 1)[1]]


def test_a_named_pipe_called_md_is_reported_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.md")  # reading it blocked until a writer came: chunk, lint and import hung
    (tmp_path / "ok.md").write_text("# ok\n\nfine\n", encoding="utf-8")
    with pytest.raises(NoteError, match="named pipe, not a regular file"):
        read_note(tmp_path / "pipe.md", "pipe.md", Settings())
    out, err = _output("mindnet-chunk", "-j", "1", str(tmp_path))
    assert err == ["pipe.md: error: cannot read file: a named pipe, not a regular file"]
    assert [json.loads(line)["note_id"] for line in out] == ["ok"]



_BREAKS = st.sampled_from(["\n", "\r\n", "\r"])


@given(st.lists(_BREAKS, min_size=4, max_size=4))
@settings(max_examples=60, deadline=None)
def test_frontmatter_closes_after_any_line_ending(breaks: list[str]) -> None:
    a, b, c, d = breaks  # "---\rtitle: T\r---\r" was not closed: the YAML became chunk text, its fields lost
    text = f"---{a}title: Kept title{b}tags: [x]{c}---{d}# Heading{d}{d}body words here{d}"
    note = parse_note(text, "a.md", Settings(), lambda: "2020-01-01")
    assert note.title == "Kept title" and note.tags == ("x",)
    assert note.fulltext == f"# Heading{d}{d}body words here{d}"
    assert note.body_line == 5 and note.field_lines == {"title": 2, "tags": 3}


def test_a_file_name_that_is_not_utf8_is_reported_and_the_rest_imports(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / os.fsdecode(b"sub\xff")).mkdir(parents=True)  # one such name ended every command in an internal error
    (vault / os.fsdecode(b"sub\xff") / "inner.md").write_text("# inner\n\ntext\n", encoding="utf-8")
    (vault / os.fsdecode(b"\xff\xfe.md")).write_text("# bad name\n\ntext\n", encoding="utf-8")
    (vault / "ok.md").write_text("# ok\n\nrivers and gardens\n", encoding="utf-8")
    result = read_vault(vault)
    assert [n.path for n in result.notes] == ["ok.md"]
    assert sorted(p.one_line() for p in result.problems) == [
        "\\xff\\xfe.md: error: file name is not valid UTF-8; rename it to read it",
        "sub\\xff: error: file name is not valid UTF-8; rename it to read it",
    ]
    store = ["--store", str(tmp_path / "store")]
    _, err = _output("mindnet", "import", str(vault), *store)
    assert sorted(line for line in err if ": error: " in line) == sorted(p.one_line() for p in result.problems)
    out, _ = _output("mindnet", "lint", str(vault))  # exit 1 like the import: the note file is skipped there
    codes = {line.split(" ")[0].rsplit("/", 1)[-1]: line.split(" ")[1] for line in out if "not valid UTF-8" in line}
    assert codes == {"\\xff\\xfe.md:1:1:": "MN003", "sub\\xff:1:1:": "MN005"}  # a folder is a walk warning
    query = os.fsdecode(b"rivers \xff")  # the tokenizer's TypeError on it was an internal error
    done = subprocess.run([str(BIN / "mindnet"), "search", query, "--vault", str(vault), *store],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["error: the query is not valid UTF-8 (at character 8); "
                                        "set the terminal to UTF-8 or retype it"]


def test_notes_named_in_nfd_on_disk_are_read_under_their_nfc_path(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    folder = vault / unicodedata.normalize("NFD", "Résumé")  # as macOS writes names: "no such file" before
    folder.mkdir(parents=True)
    (folder / "inner.md").write_text("# Inner\n\nwords in a folder\n", encoding="utf-8")
    nfd_note = vault / unicodedata.normalize("NFD", "Café.md")
    nfd_note.write_text("# Café\n\nabout coffee [[inner]]\n", encoding="utf-8")
    result = read_vault(vault)
    assert not result.problems
    assert [n.path for n in result.notes] == ["Café.md", "Résumé/inner.md"]
    done = subprocess.run([str(BIN / "mindnet"), "import", str(vault), "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "2 new" in done.stdout + done.stderr
    done = subprocess.run([str(BIN / "mindnet"), "lint", str(vault), "--fix"], capture_output=True, text=True,
                          timeout=300)
    assert "MN003" not in done.stdout and "Traceback" not in done.stderr
    names = sorted(p.name for p in vault.iterdir() if not p.name.startswith("."))
    assert names == sorted([nfd_note.name, folder.name])  # no NFC twin written beside the NFD file
    assert nfd_note.read_text(encoding="utf-8").startswith("---\n") and "about coffee [[inner]]" in nfd_note.read_text()


def test_a_config_file_that_is_not_utf8_or_not_a_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_bytes(b"strategy = 'structure'\n\xff\xfe\n")  # was an internal error
    with pytest.raises(ConfigError, match=r"mindnet.toml: invalid UTF-8 \(byte 0xff on line 2\)"):
        load_settings(tmp_path)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(tmp_path, tmp_path)  # a folder given as --config
    (tmp_path / "ok.md").write_text("# ok\n\nfine\n", encoding="utf-8")
    done = subprocess.run([str(BIN / "mindnet-chunk"), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"error: {tmp_path / 'mindnet.toml'}: invalid UTF-8 (byte 0xff on line 2); save the file as UTF-8"
    ]
