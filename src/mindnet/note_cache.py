"""Parsed notes of unchanged files, kept between imports so an edit reads one file, not the vault.

An import needs every note of the vault (links resolve against all of them), but after a one-note
edit only that file is new. Reading and YAML-parsing 3,000 files takes over a second; this cache
keeps each file's parsed `Note` in `STORE/notes.sqlite`, keyed by the file's mtime, ctime, size
and inode, and `vault.read_vault` re-reads only the files whose key changed.

It is an optimisation only, never a source of truth:
- a missing, corrupt or foreign cache (another schema, mindnet version or reading setting) is
  ignored and rebuilt; a store folder that cannot be written just means no cache;
- files modified in the last 2 s are not cached: a second edit of the same size within one mtime
  tick would otherwise go unnoticed (git's "racily clean" entries; `file_stat` holds the rule);
- a note is cached only when its frontmatter survives a JSON round trip unchanged (dates under
  explicit YAML tags, non-string keys… are simply re-read every time).

JSON rather than pickle: the folder may sit inside a synced or shared vault, and loading a pickle
someone else wrote would run their code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from . import frontmatter, text, vault
from .config import Settings
from .file_stat import StatKey, is_racy, stat_key
from .vault import Note
from .version import __version__

SCHEMA = 1
"""Bump when `Note` or how a file becomes a `Note` changes, to drop every cached entry."""

_TUPLE_FIELDS = frozenset(f.name for f in dataclasses.fields(Note) if str(f.type).startswith("tuple"))

class NoteCache:
    """`vault.ReadCache` on SQLite: one row per file, so an edit rewrites one row, not the file."""

    def __init__(self, path: Path, settings: Settings) -> None:
        self.path = path
        self.key = json.dumps([SCHEMA, _reader_version(), settings.max_file_bytes, settings.strict,
                               list(settings.languages), settings.frontmatter_max_nodes,
                               settings.frontmatter_max_depth])
        self.hits = 0
        self._rows: dict[str, tuple[StatKey, str | Note]] = {}
        """Path → (stat key, the note as JSON until first asked for, then the `Note`)."""
        self._put: dict[str, tuple[StatKey, Note, str]] = {}
        self._seen: set[str] = set()
        self._db: sqlite3.Connection | None = None
        try:
            self._open()
        except (sqlite3.Error, ValueError):  # not a database, or an unreadable one: start afresh
            with contextlib.suppress(sqlite3.Error, OSError, ValueError):
                self.path.unlink(missing_ok=True)
                self._rows.clear()
                self._open()
        except OSError:
            pass  # a folder that cannot be written: no cache, same results

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False)  # a resident server imports on its worker
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, mtime_ns INTEGER, ctime_ns INTEGER,"
            " size INTEGER, ino INTEGER, note TEXT NOT NULL)"
        )
        stored = db.execute("SELECT key FROM meta").fetchone()
        if stored is None or stored[0] != self.key:
            with db:
                db.execute("DELETE FROM notes")
                db.execute("DELETE FROM meta")
                db.execute("INSERT INTO meta (key) VALUES (?)", (self.key,))
        for path, mtime_ns, ctime_ns, size, ino, note in db.execute("SELECT * FROM notes"):
            self._rows[path] = ((mtime_ns, ctime_ns, size, ino), note)
        self._db = db

    def get(self, rel: str, st: os.stat_result) -> Note | None:
        """The cached note of `rel` if the file is unchanged since it was cached, else None."""
        self._seen.add(rel)
        row = self._rows.get(rel)
        if row is None or row[0] != stat_key(st):
            return None
        note = row[1]
        if isinstance(note, str):  # parsed on first use and kept: a long-lived Index reads it once
            try:
                note = _note(json.loads(note))
            except (ValueError, TypeError, KeyError):
                return None
            self._rows[rel] = (row[0], note)
        self.hits += 1
        return note

    def put(self, rel: str, st: os.stat_result, note: Note) -> None:
        """Remember a freshly read note, unless the file is too recent or the note does not round-trip."""
        self._seen.add(rel)
        key = stat_key(st)
        if is_racy(key, time.time_ns()):
            return
        try:
            text = json.dumps(_row(note), ensure_ascii=False)
        except (TypeError, ValueError):
            return
        if json.loads(text)["frontmatter"] != note.frontmatter:
            return
        self._put[rel] = (key, note, text)

    def save(self) -> None:
        """Write new entries and drop those of files no longer read; errors only cost the cache."""
        gone = [(rel,) for rel in self._rows if rel not in self._seen]
        rows = [(rel, *key, text) for rel, (key, _, text) in self._put.items()]
        if self._db is not None and (gone or rows):
            with contextlib.suppress(sqlite3.Error), self._db:
                self._db.executemany("DELETE FROM notes WHERE path = ?", gone)
                self._db.executemany("INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?)", rows)
            for (rel,) in gone:
                self._rows.pop(rel, None)
            self._rows.update((rel, (key, note)) for rel, (key, note, _) in self._put.items())
        self._put.clear()
        self._seen.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


@functools.cache
def _reader_version() -> str:
    """The mindnet version and a hash of the modules that turn a file into a `Note`.

    A code change in how notes are read (a new default, a repaired YAML case) then drops every
    cached note, even in a development checkout where the version number stays the same.
    """
    digest = hashlib.sha256(__version__.encode())
    for module in (vault, frontmatter, text):
        with contextlib.suppress(OSError, TypeError):
            digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


def _row(note: Note) -> dict[str, Any]:
    return {f.name: getattr(note, f.name) for f in dataclasses.fields(note)}


def _note(row: dict[str, Any]) -> Note:
    return Note(**{k: tuple(v) if k in _TUPLE_FIELDS else v for k, v in row.items()})
