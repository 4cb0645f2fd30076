"""The vault's note names kept beside its embedded store, so a one-off search need not open the notes collection.

A search's title list (`titles.TitleIndex`) needs every note's title, aliases, area and project.
Reading them meant loading the notes collection from disk and scrolling it: about a sixth of a cold
`mindnet search` (issue 26), for a few kilobytes that change only when an import writes. So the
names are kept as a file (`PREFIX.names.json`, one per collection set) in the store folder and trusted
only while nothing has written to the store since they were read from it:

- Every writing operation (`api.Index._writing`, under the import lock; a dry run writes nothing)
  marks the store `writing <token>` before it writes and `done <token>` after it (`generation`,
  one line). One that wrote nothing to the store after all (`Store.writes`: a no-op import, the one
  every `serve` and `mcp` start runs) ends at the token it began at, so the names stay good.
- A one-off search (and a resident, which does not write the file) reads the generation before it
  opens the store. It uses the names file when the file was written at that generation and the
  generation is still current once the store is open; otherwise it reads the notes collection and
  writes the file, if the generation it saw is still current and done.
- A writer older than this file does not mark generations, but it rewrites `writer.json`
  (`config.record_writer`) after each import: the file also records that file's stat key.
- A writer cannot change the notes while a reader has the collection open (Qdrant Edge locks its
  write-ahead log), and it marks `writing` before it opens it; so names read under a `done`
  generation that is still current are the store's names. An import that crashed leaves
  `writing`: no file is trusted or written until the next writing operation ends.

Only for the embedded store: a server store may have writers on other machines that never touch
this folder. Standard library only (and the names of `config`, `file_stat` and `titles`).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from .config import WRITER_FILE
from .file_stat import replace_file, stat_key
from .titles import NoteNames

NAMES_FILE = "{prefix}.names.json"
GENERATION_FILE = "generation"
FORMAT = 1
"""Bumped when what `names.json` holds changes: a file of another format is not read."""

def begin_writing(folder: Path) -> None:
    """Mark the store as being written: from now on no names file is trusted or written."""
    replace_file(folder / GENERATION_FILE, f"writing {uuid.uuid4().hex}\n")


def end_writing(folder: Path, keep: str | None = None) -> None:
    """Mark the writing operation finished, with a generation no names file has seen yet; or, when the
    operation wrote nothing to the store, with the generation `keep` it began at, so names kept at it
    stay good (a no-op import; `api.Index._writing` knows from `Store.writes`)."""
    replace_file(folder / GENERATION_FILE, f"done {keep or uuid.uuid4().hex}\n")


def generation(folder: Path) -> str | None:
    """The store's current generation when its last writing operation finished; None while one runs,
    after one crashed, or for a store folder older than this file."""
    try:
        state, _, token = (folder / GENERATION_FILE).read_text(encoding="utf-8").strip().partition(" ")
    except OSError:
        return None
    return token if state == "done" and token else None


def read_names(folder: Path, prefix: str, seen: str) -> NoteNames | None:
    """The names of collection set `prefix` kept at generation `seen`, or None (another generation or
    writer record, missing or unreadable)."""
    try:
        kept = json.loads((folder / NAMES_FILE.format(prefix=prefix)).read_text(encoding="utf-8"))
        if kept.get("format") != FORMAT or kept.get("generation") != seen or kept.get("writer") != _writer(folder):
            return None
        return _pairs(kept["names"]), _pairs(kept["groups"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_names(folder: Path, prefix: str, seen: str, names: NoteNames) -> None:
    """Keep `names`, read from the store at generation `seen`, if that generation is still current (a
    folder that cannot be written is simply read from the store again next time)."""
    if generation(folder) != seen:
        return
    record = {"format": FORMAT, "generation": seen, "writer": _writer(folder), "names": names[0],
              "groups": names[1]}
    with contextlib.suppress(OSError):
        replace_file(folder / NAMES_FILE.format(prefix=prefix), json.dumps(record, ensure_ascii=False))


def _writer(folder: Path) -> list[int] | None:
    """The stat key of the store's writer record, which every import rewrites (by rename: a new inode)."""
    try:
        return list(stat_key(os.stat(folder / WRITER_FILE)))
    except OSError:
        return None


def _pairs(rows: Sequence[Sequence[str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(note_id), str(name)) for note_id, name in rows)
