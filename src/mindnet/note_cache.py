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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from . import frontmatter, text, vault
from .config import Settings
from .file_stat import StatKey, is_racy, stat_key
from .vault import Note
from .version import __version__

SCHEMA = 2
"""Bump when `Note`, how a file becomes a `Note` or the table changes, to drop every cached entry.
2: each row also holds its slim note (`slim`)."""

_TUPLE_FIELDS = frozenset(f.name for f in dataclasses.fields(Note) if str(f.type).startswith("tuple"))

class NoteCache:
    """`vault.ReadCache` on SQLite: one row per file, so an edit rewrites one row, not the file.

    Only each file's stat key stays in memory; a note is decoded from its row when asked for and
    not kept (issue 27: a resident process held every parsed note of the vault), except the slim form
    (no body) a resident asks to keep (`keep_slim`). New entries are
    written in batches of `SPILL` once `autosave` is on, so a cold read of a large vault holds a
    batch of them, not the vault.
    """

    SPILL = 256

    def __init__(self, path: Path, settings: Settings) -> None:
        self.path = path
        self.key = json.dumps([SCHEMA, _reader_version(), settings.max_file_bytes, settings.strict,
                               list(settings.languages), settings.frontmatter_max_nodes,
                               settings.frontmatter_max_depth])
        self.hits = 0
        self.autosave = False
        """Write new entries as they come (an import that writes); off, they wait for `save` (a dry run)."""
        self._rows: dict[str, StatKey] = {}
        """Path → stat key of its stored row."""
        self._put: dict[str, tuple[StatKey, Note, str, str]] = {}
        self._seen: set[str] = set()
        self._gone: set[str] | None = None
        """Set by `only_gone` for a read of changed files: the files that left the vault since the last read."""
        self._slim: dict[str, tuple[StatKey, Note]] | None = None
        """Path → (stat key, slim note), once `keep_slim` was called; None keeps no note in memory."""
        self._prefetched: dict[str, str] | None = None
        """Path → its row's slim note (JSON), read at once for the first slim note asked of the table."""
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
        stored = db.execute("SELECT key FROM meta").fetchone()
        if stored is None or stored[0] != self.key:
            with db:
                db.execute("DROP TABLE IF EXISTS notes")  # another schema's table may lack a column
                db.execute("DELETE FROM meta")
                db.execute("INSERT INTO meta (key) VALUES (?)", (self.key,))
        db.execute(
            "CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, mtime_ns INTEGER, ctime_ns INTEGER,"
            " size INTEGER, ino INTEGER, note TEXT NOT NULL, slim TEXT NOT NULL)"
        )
        for path, mtime_ns, ctime_ns, size, ino in db.execute("SELECT path, mtime_ns, ctime_ns, size, ino FROM notes"):
            self._rows[path] = (mtime_ns, ctime_ns, size, ino)
        self._db = db

    def keep_slim(self) -> None:
        """From now on keep each note's slim form (`vault.slim_note`, ~1.1 KB) in memory, for `get(slim=True)`.

        A resident that imports its vault's saves calls it before its first import (`Index.keep_notes_slim`):
        every import reads the whole vault's slim notes, and decoding 30,000 rows took 1.4 s of a 6.3 s save
        at 30,000 msdocs notes, and allocated and freed them all again on every save (issue 27). Kept, they
        cost ~34 MB at 30,000 notes, and a save decodes only the rows of the files it changed.
        """
        if self._slim is None:
            self._slim = {}

    def get(self, rel: str, st: os.stat_result, slim: bool = False) -> Note | None:
        """The cached note of `rel` if the file is unchanged since it was cached, else None; with `slim`, and
        once `keep_slim` was called, the note as `vault.slim_note` makes it, from memory."""
        self._seen.add(rel)
        key = stat_key(st)
        if slim and self._slim is not None:
            kept = self._slim.get(rel)
            if kept is not None and kept[0] == key:
                self.hits += 1
                return kept[1]
        pending = self._put.get(rel)
        if pending is not None:
            return pending[1] if pending[0] == key else None
        if self._rows.get(rel) != key or self._db is None:
            return None
        try:
            stored = self._slim_text(rel) if slim else self._column(rel, "note")
            note = _note(json.loads(stored)) if stored is not None else None
        except (sqlite3.Error, ValueError, TypeError, KeyError):
            return None
        if note is not None:
            self.hits += 1
            if slim and self._slim is not None:
                self._slim[rel] = (key, note)
        return note

    def _slim_text(self, rel: str) -> str | None:
        """The slim note's JSON of `rel`'s row. The first one asked reads them all in one query: an import
        reads every note slim, and 30,000 single-row queries, each decoding the whole note, were 1.7 s of a
        3.3 s no-op import (issue 27); the slim rows of 30,000 notes are ~10 MB, let go as they are taken."""
        assert self._db is not None
        if self._prefetched is None:
            self._prefetched = dict(self._db.execute("SELECT path, slim FROM notes"))
        found = self._prefetched.pop(rel, None)
        return found if found is not None else self._column(rel, "slim")  # else: written since the prefetch

    def _column(self, rel: str, column: Literal["note", "slim"]) -> str | None:
        """One column (`note` or `slim`) of `rel`'s row, or None without a row."""
        assert self._db is not None
        row = self._db.execute(f"SELECT {column} FROM notes WHERE path = ?", (rel,)).fetchone()
        return row[0] if row is not None else None

    def put(self, rel: str, st: os.stat_result, note: Note) -> None:
        """Remember a freshly read note, unless the file is too recent or the note does not round-trip."""
        self._seen.add(rel)
        key = stat_key(st)
        if is_racy(key, time.time_ns()):
            return
        slim = vault.slim_note(note)
        try:
            text = json.dumps(_row(note), ensure_ascii=False)
            slim_text = json.dumps(_row(slim), ensure_ascii=False)
        except (TypeError, ValueError):
            return
        if json.loads(text)["frontmatter"] != note.frontmatter:
            return
        self._put[rel] = (key, note, text, slim_text)
        if self._slim is not None:
            self._slim[rel] = (key, slim)
        if self.autosave and len(self._put) >= self.SPILL:
            self._write([], self._put)

    def only_gone(self, rels: Iterable[str]) -> None:
        """This read asked only for changed files (a resident's save, `vault_changes.KeptRead`): `save` drops the
        rows of `rels`, the files that left the vault, and keeps every other row, asked for or not."""
        self._gone = (self._gone or set()) | set(rels)

    def save(self) -> None:
        """Write new entries and drop those of files no longer read; errors only cost the cache."""
        if self._gone is not None:  # a read of changed files: what left is known, no row need be looked at
            gone = [rel for rel in self._gone if rel in self._rows and rel not in self._put]
            dropped = [rel for rel in self._gone if rel not in self._put]
        else:
            gone = [rel for rel in self._rows if rel not in self._seen and rel not in self._put]
            dropped = [rel for rel in self._slim or () if rel not in self._seen]
        if self._slim is not None:
            for rel in dropped:
                self._slim.pop(rel, None)
        self._write(gone, self._put)
        self._seen.clear()
        self._gone = None
        self._prefetched = None

    def _write(self, gone: list[str], put: dict[str, tuple[StatKey, Note, str, str]]) -> None:
        rows = [(rel, *key, text, slim) for rel, (key, _, text, slim) in put.items()]
        if self._db is not None and (gone or rows):
            written = False
            with contextlib.suppress(sqlite3.Error), self._db:
                self._db.executemany("DELETE FROM notes WHERE path = ?", [(rel,) for rel in gone])
                self._db.executemany("INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                written = True
            for rel in gone:
                self._rows.pop(rel, None)
            if written:
                self._rows.update((rel, key) for rel, (key, *_) in put.items())
            else:  # the table may still hold an older row of these files: never serve it for their new key
                for rel in put:
                    self._rows.pop(rel, None)
            if self._prefetched is not None:  # what was read before these rows were written is stale
                for rel in (*gone, *put):
                    self._prefetched.pop(rel, None)
        put.clear()

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
