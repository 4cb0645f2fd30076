"""A save's read (`vault_changes`): reading only the changed files gives what a whole read gives, or walks."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet import file_stat, vault
from mindnet.config import Settings
from mindnet.note_cache import NoteCache
from mindnet.vault import read_vault, walk
from mindnet.vault_changes import KeptRead, changed_listing, vault_relative

_FOLDERS = ("", "x/", "x/y/", "z/")
_NAMES = ("index.md", "Index.md", "a.md", "b.MD", "pic.png")
_PATHS = [f + n for f in _FOLDERS for n in _NAMES]
_IDS = st.sampled_from([None, "", "index", "twin", "a"])
_BODIES = st.sampled_from(["", "# Head\n\ntext", "[[a]] and [[index]]", "---\nbroken: [\n---\nbody"])

_WRITE = st.tuples(st.just("write"), st.sampled_from(_PATHS), _IDS, _BODIES)
_DELETE = st.tuples(st.just("delete"), st.sampled_from(_PATHS))
_DROP_FOLDER = st.tuples(st.just("drop"), st.sampled_from(["x/y/", "z/", "x/"]))
_IGNORE = st.tuples(st.just("ignore"), st.sampled_from(["z/\n", "a.md\n", "*.png\n"]))
_LINK = st.tuples(st.just("link"), st.sampled_from(["x/link.md", "linked/"]))
_OPS = st.one_of(_WRITE, _WRITE, _WRITE, _DELETE, _DELETE, _DROP_FOLDER, _IGNORE, _LINK)


def _text(note_id: str | None, body: str) -> str:
    return body if note_id is None else f"---\nid: {note_id!r}\ntitle: T\n---\n{body}"


def _apply(root: Path, op: tuple) -> set[str]:
    """Do one change to the vault; the paths a watcher would report for it."""
    kind, rel = op[0], op[1]
    path = root / rel
    if kind == "write":
        created = {f.rstrip("/") for f in _FOLDERS[1:] if rel.startswith(f) and not (root / f).is_dir()}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(op[2], op[3]), encoding="utf-8")
        return {rel} | created  # and the folders made on the way
    if kind == "delete":
        path.unlink(missing_ok=True)
        return {rel}
    if kind == "drop":
        shutil.rmtree(path, ignore_errors=True)
        return {rel.rstrip("/")}
    if kind == "ignore":
        (root / ".mindnetignore").write_text(rel, encoding="utf-8")
        return {".mindnetignore"}
    made = set() if (root / "x").is_dir() else {"x"}
    (root / "x").mkdir(exist_ok=True)
    if rel.endswith("/"):  # a folder symlink to a folder of the vault
        link = root / rel.rstrip("/")
        if not link.is_symlink():
            link.symlink_to(root / "x", target_is_directory=True)
        return {rel.rstrip("/")} | made
    (root / "index.md").write_text("target", encoding="utf-8")
    if not path.is_symlink():
        path.symlink_to(root / "index.md")
    return {rel, "index.md"} | made


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_WRITE, _WRITE, _IGNORE), max_size=8),
       st.lists(st.lists(_OPS, min_size=1, max_size=4), min_size=1, max_size=4))
def test_a_read_of_the_changed_files_is_a_whole_read(start: list[tuple], saves: list[list[tuple]]) -> None:
    """After any changes, a read given the paths a watcher reports equals a whole read of the vault now:
    the same notes with the same unique ids, the same problems, the same attachments."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        root.mkdir()
        for op in start:
            _apply(root, op)
        kept = KeptRead()
        assert read_vault(root, slim=True, kept=kept) == read_vault(root, slim=True)
        for save in saves:
            changed: set[str] = set()
            for op in save:
                changed |= _apply(root, op)
            again = read_vault(root, slim=True, kept=kept, changed=changed)
            assert again == read_vault(root, slim=True)


def test_a_plain_save_reads_its_file_alone_and_walks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it (issue 27): a save in a known folder reads that file, and the vault is not walked."""
    root = tmp_path / "vault"
    for i in range(20):
        (root / f"f{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"f{i % 3}" / f"n{i}.md").write_text(f"# N{i}\n\nlinks [[n{(i + 1) % 20}]]", encoding="utf-8")
    kept = KeptRead()
    before = read_vault(root, slim=True, kept=kept)
    read: list[str] = []
    original = vault.read_note
    monkeypatch.setattr(vault, "read_note", lambda path, rel, *a, **k: read.append(rel) or original(path, rel, *a, **k))

    def no_walk(_root: Path) -> None:
        raise AssertionError("walked")

    monkeypatch.setattr(vault, "walk", no_walk)
    (root / "f1" / "n4.md").write_text("# N4 again", encoding="utf-8")
    (root / "f2" / "new.md").write_text("# New", encoding="utf-8")
    (root / "f0" / "n0.md").unlink()
    again = read_vault(root, slim=True, kept=kept, changed=["f1/n4.md", "f2/new.md", "f0/n0.md"])
    assert sorted(read) == ["f1/n4.md", "f2/new.md"]
    assert len(again.notes) == len(before.notes)
    assert {n.path for n in again.notes} == {n.path for n in before.notes} - {"f0/n0.md"} | {"f2/new.md"}
    assert next(n.title for n in again.notes if n.path == "f1/n4.md") == "N4 again"


@pytest.mark.parametrize(("make", "reported"), [
    (lambda r: (r / "new").mkdir(), "new"),
    (lambda r: ((r / "new").mkdir(), (r / "new" / "a.md").write_text("a")), "new/a.md"),
    (lambda r: shutil.rmtree(r / "f"), "f"),
    (lambda r: (r / ".mindnetignore").write_text("f/"), ".mindnetignore"),
    (lambda r: (r / "l.md").symlink_to(r / "f" / "a.md"), "l.md"),
])
def test_what_only_a_walk_can_place_asks_for_one(tmp_path: Path, make, reported: str) -> None:
    root = tmp_path / "vault"
    (root / "f").mkdir(parents=True)
    (root / "f" / "a.md").write_text("a", encoding="utf-8")
    listing = walk(root)
    make(root)
    assert changed_listing(root, listing, [reported]) is None


def test_a_vault_with_a_symlink_is_always_walked(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "f").mkdir(parents=True)
    (root / "f" / "a.md").write_text("a", encoding="utf-8")
    (root / "g").symlink_to(root / "f", target_is_directory=True)
    listing = walk(root)
    assert listing.linked
    (root / "f" / "a.md").write_text("b", encoding="utf-8")
    assert changed_listing(root, listing, ["f/a.md"]) is None


def test_a_changed_path_is_named_as_the_walk_names_it(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    assert vault_relative(root, str(root / "a" / "b.md")) == "a/b.md"
    assert vault_relative(root, str(tmp_path / "elsewhere.md")) is None
    assert vault_relative(root, str(root)) is None
    assert vault_relative(root, str(root / "Cafe\u0301.md")) is None  # not NFC: the walk finds its other form


def test_a_read_of_changed_files_keeps_the_cache_rows_of_the_others(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The read cache drops the rows of files a read did not see; a save's read must say the others are there."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    root = tmp_path / "vault"
    root.mkdir()
    for i in range(5):
        (root / f"n{i}.md").write_text(f"# {i}", encoding="utf-8")
    cache = NoteCache(tmp_path / "notes.sqlite", Settings())
    cache.autosave = True
    kept = KeptRead()
    read_vault(root, cache=cache, slim=True, kept=kept)
    cache.save()
    (root / "n1.md").write_text("# one", encoding="utf-8")
    os.utime(root / "n1.md", ns=(1, 1))
    (root / "n3.md").unlink()
    again = read_vault(root, cache=cache, slim=True, kept=kept, changed=["n1.md", "n3.md"])
    cache.save()
    fresh = NoteCache(tmp_path / "notes.sqlite", Settings())
    assert sorted(fresh._rows) == ["n0.md", "n1.md", "n2.md", "n4.md"]  # the deleted file's row went, no other
    assert again == read_vault(root, cache=fresh, slim=True) == read_vault(root, slim=True)


def test_a_new_file_that_the_ignore_file_matches_stays_out(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / "f").mkdir(parents=True)
    (root / ".mindnetignore").write_text("drafts-*.md\n*.png\n", encoding="utf-8")
    (root / "f" / "a.md").write_text("a", encoding="utf-8")
    kept = KeptRead()
    read_vault(root, slim=True, kept=kept)
    for name in ("drafts-1.md", "pic.png", "b.md"):
        (root / "f" / name).write_text("x", encoding="utf-8")
    again = read_vault(root, slim=True, kept=kept, changed=["f/drafts-1.md", "f/pic.png", "f/b.md"])
    assert again == read_vault(root, slim=True)
    assert [n.path for n in again.notes] == ["f/a.md", "f/b.md"] and again.attachments == ()


def _wait(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_watching_resident_reads_a_save_without_walking_the_vault(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher's paths reach the import: a save in a known folder walks nothing; a new folder walks once."""
    from fakes import FakeEmbedder
    from mindnet.service import Resident

    root = tmp_path / "vault"
    (root / "notes").mkdir(parents=True)
    for i in range(5):
        (root / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\nText {i}.\n", encoding="utf-8")
    walks: list[Path] = []
    original = vault.walk
    monkeypatch.setattr(vault, "walk", lambda r: walks.append(r) or original(r))
    resident = Resident(root, Settings(store_path=str(tmp_path / "store")), e5=False, embedder=FakeEmbedder(),
                        step_ms=50, debounce_ms=300)
    try:
        resident.start().result(timeout=60)
        _wait(lambda: resident.state.watching)
        time.sleep(0.5)  # the watches are set
        assert len(walks) == 1
        (root / "notes" / "n2.md").write_text("# Note 2\n\nChanged.\n", encoding="utf-8")
        _wait(lambda: resident.state.imports == 2)
        assert resident.state.last_import is not None and resident.state.last_import["notes_changed"] == 1
        assert len(walks) == 1
        assert resident.state.last_event is not None and " notes/n2.md" in resident.state.last_event
        (root / "more").mkdir()
        (root / "more" / "m.md").write_text("# More\n", encoding="utf-8")
        _wait(lambda: resident.state.last_import is not None and resident.state.last_import["notes_new"] == 1)
        assert len(walks) == 2
        resident.request_import().result(timeout=60)  # a client's request: the whole vault
        assert len(walks) == 3
    finally:
        resident.stop()


def test_requests_that_share_an_import_share_their_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests before an import starts are one import: it reads the union of their paths, or walks when any of
    them did not say which files changed."""
    from fakes import FakeEmbedder
    from mindnet.service import Resident

    root = tmp_path / "vault"
    root.mkdir()
    resident = Resident(root, Settings(store_path=str(tmp_path / "store")), e5=False, embedder=FakeEmbedder())
    asked: list[object] = []
    monkeypatch.setattr(resident.index, "import_vault", lambda **kw: asked.append(kw["changed"]) or sync_summary())
    try:
        resident._walked_at = time.monotonic()  # a walk just happened
        resident.request_import(changed=["a.md"])
        resident.request_import(changed=["b.md"])
        assert resident._next_import() and asked[-1] == {"a.md", "b.md"}
        resident.request_import(changed=["a.md"])
        resident.request_import()
        resident.request_import(changed=["c.md"])
        assert resident._next_import() and asked[-1] is None
        resident.request_import(changed=["c.md"])
        assert resident._next_import() and asked[-1] == {"c.md"}
        resident._walked_at -= 10_000  # the last walk is old: the next import walks whatever it was told
        resident.request_import(changed=["c.md"])
        assert resident._next_import() and asked[-1] is None
    finally:
        resident.index.close()


def sync_summary() -> object:
    from mindnet.sync import ImportSummary

    return ImportSummary()
