"""The vault index of `mindnet lint`: what link resolution needs of every note, cached on disk (R27).

A pre-commit hook lints only the staged files, but their links must still resolve against the
whole vault (issue: `mindnet lint`, point 3). Reading 3,000 notes for that takes over a second;
this module keeps, per note file, only what `links.Resolver` and the duplicate-id check look at
(path, id, whether the id was written, title, aliases, the line of `id`) in `lint-index.json` in the vault's
store folder (`cache_file`), keyed by the file's stat key (mtime, ctime, size, inode; see
`file_stat`). A warm run walks the folder, stats every file and re-reads only the files whose key
changed; files changed in the last 2 s are never cached (git's racy-clean rule).

The cache is an optimisation only: a missing, corrupt or foreign cache file is rebuilt, and a
vault folder that cannot be written is linted all the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings, prepare_store_dir, store_dir
from ..errors import NoteError
from ..file_stat import StatKey, is_racy, stat_key
from ..vault import Note, NoteProblem, discover, read_note, stat_note

CACHE_FILE = "lint-index.json"
"""The index's file name in the vault's store folder (`cache_file`)."""
SCHEMA = 2
"""Bump when an entry's meaning changes (e.g. how a default title is found), to drop old caches.
2: the stat key holds ctime and inode besides mtime and size."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One Markdown file of the vault as the resolver sees it, or the reason it is no note."""

    path: str
    key: StatKey | None
    """The file's stat key when it was read; None when it could not even be stat'ed (never cached)."""
    note_id: str | None = None
    """The id as read (frontmatter `id` or the stem slug), before duplicates are settled; None for a problem."""
    id_explicit: bool = False
    title: str = ""
    aliases: tuple[str, ...] = ()
    id_line: int | None = None
    """File line of the `id` key, so a duplicate-id finding points at it."""
    problem_line: int | None = None
    problem_reason: str | None = None
    """Why the file is no note (malformed YAML, invalid UTF-8…); None for a note."""

    def stub(self) -> Note:
        """A `Note` with just the fields `Resolver` and `vault.assign_ids` read; body and payload empty."""
        assert self.note_id is not None
        return Note(
            note_id=self.note_id,
            title=self.title,
            type="note",
            status=None,
            tags=(),
            aliases=self.aliases,
            area=None,
            project=None,
            priority=None,
            people=(),
            created="",
            updated=None,
            path=self.path,
            lang="",
            fulltext="",
            frontmatter={"id": self.note_id} if self.id_explicit else {},
            references=(),
            content_hash="",
            field_lines={"id": self.id_line} if self.id_line is not None else {},
        )

    def problem(self) -> NoteProblem | None:
        return NoteProblem(self.path, self.problem_line, self.problem_reason) if self.problem_reason else None


@dataclass(slots=True)
class VaultIndex:
    """The current state of every note file, and the notes this refresh had to read anyway."""

    root: Path
    entries: dict[str, IndexEntry]
    """Vault-relative path → entry, for every Markdown file found (sorted by path)."""
    attachments: tuple[str, ...]
    walk_problems: tuple[NoteProblem, ...]
    """Folders and symlinks the walk could not or would not follow."""
    read: dict[str, Note]
    """Notes parsed during this refresh (changed or new files), so the linter need not read them again."""
    reads: int = 0
    """How many files this refresh read (0 on a warm cache with nothing changed)."""


def refresh_index(root: Path, settings: Settings, *, use_cache: bool = True, keep: Iterable[str] = ()) -> VaultIndex:
    """Walk the vault and bring the index up to date, reading only files whose stat key changed.

    Args:
        root: the vault folder.
        settings: reading settings (size limit); lint passes non-strict ones so every file is read.
        use_cache: read and write the index (`cache_file`); False reads every file.
        keep: vault paths whose parsed `Note` the caller wants back in `read` (all when it holds "*").
    """
    files, attachments, walk_problems = discover(root)
    cached = _load(root, settings) if use_cache else {}
    wanted = set(keep)
    keep_all = "*" in wanted
    entries: dict[str, IndexEntry] = {}
    read: dict[str, Note] = {}
    reads = 0
    for rel in files:
        try:
            path, st = stat_note(root / rel)
        except OSError as exc:
            entries[rel] = IndexEntry(rel, None, problem_reason=f"cannot read file: {_reason(exc)}")
            continue
        key = stat_key(st)
        old = cached.get(rel)
        if old is not None and old.key == key:
            entries[rel] = old
            continue
        reads += 1
        try:
            note = read_note(path, rel, settings)
        except NoteError as exc:
            entries[rel] = IndexEntry(rel, key, problem_line=exc.line, problem_reason=exc.reason)
            continue
        entries[rel] = entry_of(note, key)
        if keep_all or rel in wanted:
            read[rel] = note
    index = VaultIndex(root, entries, tuple(attachments), tuple(walk_problems), read, reads)
    if use_cache and (reads or set(cached) != set(entries)):
        _save(root, settings, entries.values())
    return index


def entry_of(note: Note, key: StatKey) -> IndexEntry:
    """The index entry of a note read from a file with this stat key."""
    return IndexEntry(
        note.path,
        key,
        note_id=note.note_id,
        id_explicit=note.id_explicit,
        title=note.title,
        aliases=note.aliases,
        id_line=note.frontmatter_line("id"),
    )


def _key(settings: Settings) -> str:
    """What must match for cached entries to be valid: the schema and every setting reading depends on."""
    return f"{SCHEMA}:{settings.max_file_bytes}:{settings.frontmatter_max_nodes}:{settings.frontmatter_max_depth}"


def cache_file(root: Path, settings: Settings) -> Path:
    """Where the index of the vault at `root` is kept: in its store folder (`config.store_dir`, `VAULT/.mindnet/`
    unless `--store`, `MINDNET_STORE` or `store_path` move it), so a vault whose store lives outside it (a vault in
    a sync folder) gets no file from lint either; `.mindnet/` is never read as notes (vault.EXCLUDED_DIRS)."""
    return store_dir(root, settings) / CACHE_FILE


def _load(root: Path, settings: Settings) -> dict[str, IndexEntry]:
    try:
        data = json.loads(cache_file(root, settings).read_text(encoding="utf-8"))
        if data.get("key") != _key(settings):
            return {}
        return {rel: _entry(rel, row) for rel, row in data["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return {}  # no cache, or one from another version: rebuild it


def _entry(rel: str, row: list[Any]) -> IndexEntry:
    key, note_id, explicit, title, aliases, id_line, problem_line, problem_reason = row
    mtime_ns, ctime_ns, size, ino = key
    return IndexEntry(
        rel,
        (int(mtime_ns), int(ctime_ns), int(size), int(ino)),
        note_id,
        bool(explicit),
        title,
        tuple(aliases),
        id_line,
        problem_line,
        problem_reason,
    )


def _save(root: Path, settings: Settings, entries: Iterable[IndexEntry]) -> None:
    now_ns = time.time_ns()
    rows = {
        e.path: [
            list(e.key),
            e.note_id,
            e.id_explicit,
            e.title,
            list(e.aliases),
            e.id_line,
            e.problem_line,
            e.problem_reason,
        ]
        for e in entries
        if e.key is not None and not is_racy(e.key, now_ns)
    }
    target = cache_file(root, settings)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        prepare_store_dir(target.parent)
        tmp.write_text(json.dumps({"key": _key(settings), "files": rows}, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, target)  # atomic: a concurrent lint reads the old or the new index, never half
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a read-only vault is linted without a cache


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()
