"""A save's read of the vault: only the files a watcher named, placed in what the last read found.

A resident (`mindnet serve`, `watch`, `mcp`) imports on every save, and an import compares the whole vault with
the store. Reading the whole vault again for that walked every folder, asked every file's stat, looked every
note up in the read cache and made every id unique again: ~0.35 s of a ~0.8 s save at 30,000 notes, and some
hundred thousand objects made and dropped per save (issue 27: "the watcher's bookkeeping is per file"). The
watcher already knows which files changed, so `KeptRead` keeps what the last read found (the walk's listing,
each file's note or problem, the notes with their unique ids) and a save reads only its files.

It trusts the watcher for the files it did not name, and nothing else: whenever the changes are not plain files
in folders the last walk entered (a folder created, moved or deleted, a symlink, `.mindnetignore`, a name that is
not NFC or not UTF-8, a vault that holds a symlink anywhere) `changed_listing` says so and the caller walks the
vault as before. The resident also walks on the first save `service.WALK_EVERY_SECONDS` after its last walk, so a
change its watcher missed is found within minutes.
"""

from __future__ import annotations

import bisect
import os
import stat
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .text import not_utf8_at
from .vault import (
    EXCLUDED_DIRS,
    Listing,
    Note,
    NoteProblem,
    VaultResult,
    assign_ids,
    is_attachment_name,
    is_note_name,
    problem_order,
    with_note_id,
)

ReadOne = Callable[[str], Note | NoteProblem]
"""One file read as `read_vault` reads it (stat, cache, parse; slim if the read is)."""


def vault_relative(root: Path, path: str) -> str | None:
    """A changed path as the walk names it (vault-relative, `/`, NFC), or None when it is not below `root`
    or not in NFC (a walk then finds the file by its other Unicode form)."""
    absolute = Path(path).absolute()
    for base in (root.absolute(), root.resolve()):
        if absolute.is_relative_to(base):
            rel = absolute.relative_to(base).as_posix()
            if rel in ("", ".") or unicodedata.normalize("NFC", rel) != rel:
                return None
            return rel
    return None


def changed_listing(root: Path, listing: Listing, changed: Iterable[str]) -> Listing | None:
    """`listing` with each changed path added or removed as the walk would, or None when only a walk can say.

    A walk is needed for: a vault with a symlink; a path that is a folder, a symlink, or a file in a folder the
    walk did not enter; a folder that went away; `.mindnetignore`; a name that is not UTF-8; a path that
    cannot be read. A path below an excluded folder (`.git/`…) or matched by `.mindnetignore` changes nothing.
    """
    if listing.linked:
        return None
    files, attachments = list(listing.files), list(listing.attachments)
    for rel in sorted(set(changed)):
        parts = rel.split("/")
        if any(part in EXCLUDED_DIRS for part in parts):
            continue
        name, folder = parts[-1], rel[: len(rel) - len(parts[-1])]
        if not is_attachment_name(name) or not_utf8_at(name) is not None:
            return None  # `.mindnetignore` changes what the walk reads; such a name the walk reports
        try:
            mode = os.lstat(os.path.join(root, rel)).st_mode
        except FileNotFoundError:
            if rel + "/" in listing.folders:
                return None  # a folder gone: its files with it
            _remove(files, rel)
            _remove(attachments, rel)
            continue
        except OSError:
            return None
        if not stat.S_ISREG(mode) or folder not in listing.folders:
            return None  # a folder, a symlink, a device, or a file in a folder new to the listing
        if listing.ignores is not None and listing.ignores.match_file(rel):
            continue
        if is_note_name(name):
            _insert(files, rel)
        else:
            _insert(attachments, rel)
    return Listing(tuple(files), tuple(attachments), listing.problems, listing.folders, False, listing.ignores)


def _insert(items: list[str], rel: str) -> None:
    at = bisect.bisect_left(items, rel)
    if at == len(items) or items[at] != rel:
        items.insert(at, rel)


def _remove(items: list[str], rel: str) -> None:
    at = _position(items, rel)
    if at is not None:
        del items[at]


def _position(items: Sequence[str], rel: str) -> int | None:
    """Where `rel` is in the sorted `items`, or None."""
    at = bisect.bisect_left(items, rel)
    return at if at < len(items) and items[at] == rel else None


class KeptRead:
    """The last read of a vault, kept by a resident so that a save reads only the files it changed.

    Holds references to what the read made anyway (the slim notes the note cache keeps too), plus a position
    per note: ~2.5 MB at 30,000 notes.
    """

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Drop what was kept: the next read walks the vault (after an import that failed)."""
        self._listing: Listing | None = None
        self._read: dict[str, Note | NoteProblem] = {}
        """Each file's note (slim, before its id was made unique) or the problem that kept it out."""
        self._notes: tuple[Note, ...] = ()
        """The read's notes with their unique ids, in the files' order."""
        self._at: dict[str, int] = {}
        """A note's path -> its position in `_notes`."""
        self._duplicates: tuple[NoteProblem, ...] = ()

    def record(self, listing: Listing, read: dict[str, Note | NoteProblem], notes: Iterable[Note],
               duplicates: Iterable[NoteProblem]) -> None:
        """Keep a whole read: its walk, each file's outcome (the dict is kept as it is, not copied), and the notes
        `assign_ids` made of them."""
        self._listing = listing
        self._read = read
        self._notes = tuple(notes)
        self._at = {note.path: i for i, note in enumerate(self._notes)}
        self._duplicates = tuple(duplicates)

    def reread(self, root: Path, changed: Collection[str], read_one: ReadOne, cache: Any = None) -> VaultResult | None:
        """The vault as a whole read would find it now, reading only the `changed` files; None when only a walk
        can place the changes (`changed_listing`) or nothing was kept. What it finds is kept for the next save.

        `cache` (a `vault.ReadCache`) is told which files left the vault; it keeps the entries of all others."""
        if self._listing is None:
            return None
        listing = changed_listing(root, self._listing, changed)
        if listing is None:
            return None
        before = {rel: self._read[rel] for rel in changed if rel in self._read}
        read = self._read  # changed in place: an import that fails forgets it all (`Index.import_vault`)
        fresh: dict[str, Note | NoteProblem] = {}
        for rel in changed:
            read.pop(rel, None)
            if _position(listing.files, rel) is not None:
                fresh[rel] = read[rel] = read_one(rel)
        if cache is not None:
            cache.only_gone([rel for rel in changed if rel in before and rel not in fresh])
        notes = self._same_ids(listing, before, fresh)
        if notes is None:
            self.record(listing, read, *assign_ids([n for rel in listing.files if isinstance(n := read[rel], Note)]))
        else:
            self._listing, self._read, self._notes = listing, read, notes
        problems = [*listing.problems, *(p for p in read.values() if isinstance(p, NoteProblem)), *self._duplicates]
        problems.sort(key=problem_order)
        return VaultResult(str(root), self._notes, tuple(problems), listing.attachments)

    def _same_ids(self, listing: Listing, before: Mapping[str, Note | NoteProblem],
                  fresh: Mapping[str, Note | NoteProblem]) -> tuple[Note, ...] | None:
        """The kept notes with the fresh ones in their places, when no id can have moved: the same files, and
        each fresh file a note that had one and keeps its id as read (so `assign_ids` would give the same ids);
        else None."""
        assert self._listing is not None
        if listing.files != self._listing.files:
            return None
        notes = list(self._notes)
        for rel, note in fresh.items():
            was, at = before.get(rel), self._at.get(rel)
            if not isinstance(note, Note) or not isinstance(was, Note) or at is None:
                return None
            if note.note_id != was.note_id or note.id_explicit != was.id_explicit:
                return None
            unique = notes[at].note_id
            notes[at] = note if unique == note.note_id else with_note_id(note, unique)
        return tuple(notes)
