"""Discover and read the notes of a vault (R1–R6): the only stage that reads note files.

A bad file never stops the others (R3): `read_vault` returns the notes it could read and one
`NoteProblem` per file it could not, each with path, line and a one-line reason.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pathspec

from . import frontmatter as fm
from .config import Settings
from .errors import NoteError, VaultNotFoundError, location, mib, printable
from .language import detect_language, language_identifier
from .text import content_hash, line_of, line_starts, not_utf8_at, slugify, without_fences


@dataclass(frozen=True, slots=True)
class Note:
    """One Markdown file of the vault, frontmatter parsed, body kept byte-for-byte (R4)."""

    note_id: str
    """Frontmatter `id`, else the slug of the filename stem."""
    title: str
    """Frontmatter `title`, else the first H1, else the filename stem."""
    type: str
    """Frontmatter `type`, else `note`; selects the chunk profile."""
    status: str | None
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    area: str | None
    project: str | None
    priority: str | None
    people: tuple[str, ...]
    created: str
    """ISO 8601; frontmatter `created`, else the file's mtime."""
    updated: str | None
    path: str
    """Vault-relative, `/`-separated."""
    lang: str
    """ISO 639-1; frontmatter `lang` wins over detection (R6)."""
    fulltext: str
    """The body exactly as in the file (CRLF, BOM-less), frontmatter removed: lossless."""
    frontmatter: dict[str, Any]
    """The whole parsed mapping, with YAML 1.1 surprises repaired (see `_repair`)."""
    references: tuple[str, ...]
    """Link targets named in frontmatter link fields (`related: "[[X]]"`), raw text."""
    content_hash: str
    """Hash of the whole file text; decides whether an import must redo the note."""
    body_line: int = 1
    """1-based file line on which `fulltext` starts, to map body positions to file lines."""
    warnings: tuple[str, ...] = field(default=())
    """Defaults applied and other non-fatal findings, one line each (reported by lint)."""
    field_lines: dict[str, int] = field(default_factory=dict)
    """1-based file line of each frontmatter key, so findings point at the exact line."""

    @property
    def id_explicit(self) -> bool:
        """Whether the id was written in the frontmatter rather than defaulted."""
        return not _blank(self.frontmatter.get("id"))

    def frontmatter_line(self, key: str) -> int | None:
        return self.field_lines.get(key)


@dataclass(frozen=True, slots=True)
class NoteProblem:
    """A file that could not become a note, or a note with a finding worth reporting."""

    path: str
    line: int | None
    reason: str
    severity: str = "error"
    """`error`: the file was skipped (exit code says so); `warning`: imported with a default."""

    def one_line(self) -> str:
        return f"{location(self.path, self.line)}: {self.severity}: {printable(self.reason)}"


@dataclass(frozen=True, slots=True)
class VaultResult:
    """Everything read from a vault folder in one pass."""

    root: str
    notes: tuple[Note, ...]
    problems: tuple[NoteProblem, ...]
    """Skipped files (errors); per-note warnings stay on `Note.warnings`."""
    attachments: tuple[str, ...]
    """Vault-relative paths of non-Markdown files, so links to them resolve as attachments."""

    @property
    def failed(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")


REQUIRED_FIELDS = ("title", "id", "type", "status", "created", "tags")
EXCLUDED_DIRS = frozenset({".obsidian", ".trash", ".git", ".mindnet"})
IGNORE_FILE = ".mindnetignore"
NAME_NOT_UTF8 = "file name is not valid UTF-8; rename it to read it"
"""The walk's reason for a name it cannot hash, store or print (lint tells a note file from a folder by it)."""
_H1 = re.compile(r"^ {0,3}#[ \t]([^\n]+)$", re.M)
"""An ATX H1 line; its closing hashes are removed in code. The one-regex form `[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$`
backtracked quadratically on a heading holding a long run of spaces (20k spaces: 10 s)."""
_CLOSING_HASHES = re.compile(r"(?<=[^ \t])[ \t]+#+$")
_BOM = "\ufeff"


class KnownLanguages(Protocol):
    """Languages detected at an earlier import, by `content_hash`: a dict, or `sync.StoredLanguages`."""

    def get(self, content_hash: str, /) -> str | None: ...


class ReadCache(Protocol):
    """Parsed notes of unchanged files (`note_cache.NoteCache`): `get` by the file's stat, `put` after a read."""

    def get(self, rel: str, st: os.stat_result, slim: bool = False) -> Note | None:
        """The note of an unchanged file; with `slim`, it may come as `slim_note` makes it."""
        ...

    def put(self, rel: str, st: os.stat_result, note: Note) -> None: ...

    def only_gone(self, rels: Iterable[str]) -> None:
        """This read asked only for changed files: the entries of `rels` (files gone) go, every other stays."""
        ...


class ReadKeeper(Protocol):
    """What a resident keeps of its reads (`vault_changes.KeptRead`), so that a save reads only its files."""

    def record(self, listing: Listing, read: dict[str, Note | NoteProblem], notes: list[Note],
               duplicates: list[NoteProblem]) -> None:
        """Keep a whole read: its walk, each file's outcome, the notes with their unique ids."""
        ...

    def reread(self, root: Path, changed: Collection[str], read_one: Callable[[str], Note | NoteProblem],
               cache: ReadCache | None) -> VaultResult | None:
        """The vault read anew from the `changed` files alone, or None when only a walk can tell."""
        ...


PROGRESS_EVERY = 100
"""Files between two calls of `read_vault`'s progress."""


def read_vault(
    root: str | Path,
    settings: Settings | None = None,
    known_langs: KnownLanguages | None = None,
    cache: ReadCache | None = None,
    jobs: int | Callable[[int], int] = 1,
    on_note: Callable[[Note], None] | None = None,
    slim: bool = False,
    progress: Callable[[int, int], None] | None = None,
    kept: ReadKeeper | None = None,
    changed: Collection[str] | None = None,
) -> VaultResult:
    """Read every note of a vault; bad files become problems, never exceptions (R1, R3).

    Duplicate ids: the first path in sorted order keeps the id, later ones are reported and skipped.

    Args:
        root: the vault folder.
        settings: resolved settings (defaults when None).
        known_langs: detected language by `content_hash` from an earlier import; an unchanged file
            then skips detection, which keeps a no-op re-import from loading the language model.
        cache: notes of files unchanged since an earlier read; only the other files are read.
        jobs: worker processes that read and parse the files, or a function of the number of
            files that picks them; only without `known_langs` and `cache`, whose lookups stay in
            this process. Results keep the files' order either way.
        on_note: called with each note as soon as it is read, in the files' order, before ids are
            made unique (a note may still lose or change its id): the import starts chunking and
            embedding a fresh store's notes while the rest of the vault is read.
        slim: keep each note as `slim_note` makes it (no body): what an import of a large vault
            holds for every note, loading the whole note again only for the notes it writes.
        progress: called with (files read, files found) every `PROGRESS_EVERY` files and at the end.
        kept: what a resident keeps of its reads (`vault_changes.KeptRead`): this read is recorded in it.
        changed: with `kept`, the vault-relative paths of every file changed since the kept read (a watcher's
            events): only these are read, unless only a walk can place them (`vault_changes.changed_listing`).
    """
    settings = settings or Settings()
    root_path = Path(root)
    if not root_path.is_dir():
        raise VaultNotFoundError(str(root))
    slim_read = slim and on_note is None  # a cache may hand its slim notes over as they are

    def read_file(rel: str) -> Note | NoteProblem:
        return _read_or_problem(root_path, rel, settings, known_langs, cache, slim_read)

    def read_one(rel: str) -> Note | NoteProblem:
        outcome = read_file(rel)
        return slim_note(outcome) if slim and isinstance(outcome, Note) else outcome

    if kept is not None and changed is not None:
        again = kept.reread(root_path, changed, read_one, cache)
        if again is not None:
            if progress is not None:
                progress(len(again.notes), len(again.notes))
            return again
    listing = walk(root_path)
    files, problems = listing.files, list(listing.problems)
    read: list[Note] = []
    by_file: dict[str, Note | NoteProblem] = {}
    if not isinstance(jobs, int):
        jobs = jobs(len(files))
    if jobs > 1 and len(files) > 1 and known_langs is None and cache is None:
        outcomes: Iterable[Note | NoteProblem] = _read_parallel(root_path, list(files), settings, jobs)
    else:
        outcomes = map(read_file, files)
    for done, (rel, outcome) in enumerate(zip(files, outcomes, strict=True), 1):
        if progress is not None and (done % PROGRESS_EVERY == 0 or done == len(files)):
            progress(done, len(files))
        if isinstance(outcome, NoteProblem):
            problems.append(outcome)
        else:
            if on_note is not None:
                on_note(outcome)
            outcome = slim_note(outcome) if slim else outcome
            read.append(outcome)
        if kept is not None:
            by_file[rel] = outcome
    notes, duplicates = assign_ids(read)
    if kept is not None:
        kept.record(listing, by_file, notes, duplicates)
    problems.extend(duplicates)
    problems.sort(key=problem_order)
    return VaultResult(str(root_path), tuple(notes), tuple(problems), tuple(listing.attachments))


def problem_order(problem: NoteProblem) -> tuple[str, int]:
    """The order of a read's problems: by path, then line."""
    return problem.path, problem.line or 0


def slim_note(note: Note) -> Note:
    """The note without its body and frontmatter (the `id` key kept, for `assign_ids`): what link
    resolution, sync states and ids need of every note, at a small fraction of its size (issue 27).

    A note that is slim already comes back as it is: a resident's read cache hands every unchanged note over
    slim, and copying 30,000 of them again cost a save's import ~0.25 s (`dataclasses.replace`, ~8 µs each)."""
    if (not note.fulltext and not note.warnings and note.frontmatter.keys() <= {"id"}
            and note.field_lines.keys() <= {"id"}):
        return note
    kept = {"id": note.frontmatter["id"]} if "id" in note.frontmatter else {}
    lines = {"id": note.field_lines["id"]} if "id" in note.field_lines else {}
    return replace(note, fulltext="", frontmatter=kept, warnings=(), field_lines=lines)


def _read_or_problem(
    root: Path, rel: str, settings: Settings, known_langs: KnownLanguages | None, cache: ReadCache | None,
    slim: bool = False,
) -> Note | NoteProblem:
    try:
        return _read_cached(root, rel, settings, known_langs, cache, slim)
    except NoteError as exc:
        return NoteProblem(exc.path, exc.line, exc.reason)


_READER: tuple[Path, Settings] | None = None
"""The vault root and settings of a `_read_parallel` worker process."""


def _reader_init(root: Path, settings: Settings) -> None:
    global _READER
    _READER = (root, settings)


def _read_in_worker(rel: str) -> Note | NoteProblem:
    assert _READER is not None
    return _read_or_problem(_READER[0], rel, _READER[1], None, None)


def _read_parallel(root: Path, files: list[str], settings: Settings, jobs: int) -> Iterator[Note | NoteProblem]:
    """Read files in `jobs` worker processes, in order: parsing and language detection are CPU work.

    Forked where the platform can, so workers inherit the loaded language model.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if len(settings.languages) > 1:
        language_identifier(tuple(settings.languages), settings.cache_dir)  # loaded once, before the fork
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    batch = max(1, min(64, len(files) // (jobs * 8)))
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_reader_init, initargs=(root, settings)) as pool:
        yield from pool.map(_read_in_worker, files, chunksize=batch)


def _read_cached(
    root: Path, rel: str, settings: Settings, known_langs: KnownLanguages | None, cache: ReadCache | None,
    slim: bool = False,
) -> Note:
    if cache is None:
        return read_note(root / rel, rel, settings, known_langs)
    # Every import stats every file: joined as strings, not as `Path`s (~3 µs a note less, 0.1 s of each
    # save's import in a 30,000-note vault, issue 27); a `Path` only for a file that is read or not found.
    path: Path | None = None
    try:
        try:
            st = os.stat(os.path.join(root, rel))
        except FileNotFoundError:
            path, st = stat_note(root / rel)  # a name on disk in another Unicode form (`_on_disk`)
    except OSError as exc:
        raise NoteError(rel, f"cannot read file: {_os_reason(exc)}") from None
    note = cache.get(rel, st, slim)
    if note is None:
        note = read_note(path or root / rel, rel, settings, known_langs)
        cache.put(rel, st, note)
    return note


def assign_ids(read: list[Note]) -> tuple[list[Note], list[NoteProblem]]:
    """Make note ids unique: explicit ids first, then defaults (R3).

    Two explicit equal ids are a user error: the first path (sorted) wins and the others are
    reported and skipped. A *defaulted* id (the filename stem) that collides with an earlier one is
    not the user's error (`index.md` in many folders is normal): it falls back to the slug of the
    vault-relative path, so every file still becomes exactly one note.
    """
    taken: dict[str, str] = {}
    problems: list[NoteProblem] = []
    explicit = [n for n in read if n.id_explicit]
    for note in explicit:
        key = note.note_id.casefold()
        if key in taken:
            reason = f"duplicate id {note.note_id!r}: already used by {taken[key]}; note skipped"
            problems.append(NoteProblem(note.path, note.frontmatter_line("id"), reason))
        else:
            taken[key] = note.path
    kept: list[Note] = []
    for note in read:
        if note.id_explicit:
            if taken.get(note.note_id.casefold()) == note.path:
                kept.append(note)
            continue
        note_id = note.note_id
        if note_id.casefold() in taken:
            base = note_id = path_slug(note.path)
            suffix = 1
            while note_id.casefold() in taken:
                suffix += 1
                note_id = f"{base}-{suffix}"
            note = with_note_id(note, note_id)
        taken[note_id.casefold()] = note.path
        kept.append(note)
    return kept, problems


_NOTE_FIELDS = tuple(f.name for f in fields(Note))


def with_note_id(note: Note, note_id: str) -> Note:
    """`dataclasses.replace(note, note_id=note_id)`, field by field: a vault where most file names repeat (an
    `index.md` per folder, copies of one folder) renames most notes on every read. `replace` runs `__init__` again
    (5.9 µs a note against 3.4): `assign_ids` over 30,000 slim notes with 27,000 renames took 0.198 s, now 0.123."""
    out = object.__new__(Note)
    for name in _NOTE_FIELDS:
        object.__setattr__(out, name, getattr(note, name))
    object.__setattr__(out, "note_id", note_id)
    return out


@functools.lru_cache(maxsize=1 << 16)
def path_slug(rel: str) -> str:
    """Slug of a vault-relative path without `.md`, segment by segment (`a/B c.md` → `a/b-c`)."""
    stem = rel[:-3] if rel.lower().endswith(".md") else rel
    return "/".join(slugify(part) or "_" for part in stem.split("/"))


@dataclass(frozen=True, slots=True)
class Listing:
    """What one walk of the vault found: its notes' and attachments' paths (sorted), what could not be walked,
    and what a later change needs to be placed without walking again (`vault_changes.changed_listing`)."""

    files: tuple[str, ...]
    attachments: tuple[str, ...]
    problems: tuple[NoteProblem, ...]
    folders: frozenset[str]
    """Every folder the walk entered, as its path prefix: `""` for the root, `"a/b/"` below it."""
    linked: bool
    """A symlink was met: a file may then be reached by two paths, and only a walk says which."""
    ignores: pathspec.PathSpec | None
    """The vault's `.mindnetignore` as the walk applied it."""


def discover(root: Path) -> tuple[list[str], list[str], list[NoteProblem]]:
    """Walk the vault: Markdown files, other files (attachments), and paths that cannot be walked (`walk`)."""
    listing = walk(root)
    return list(listing.files), list(listing.attachments), list(listing.problems)


def walk(root: Path) -> Listing:
    """Walk the vault: Markdown files, other files (attachments), and paths that cannot be walked.

    Symlinks are followed only while they stay inside the vault, and each real folder is entered
    once, so a symlink loop ends with a report instead of recursion.
    """
    spec = ignore_spec(root)
    real_root = root.resolve()
    notes: list[str] = []
    others: list[str] = []
    problems: list[NoteProblem] = []
    folders: set[str] = {""}
    linked = False
    visited: set[str] = {str(real_root)}
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        folder, rel_folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            problems.append(NoteProblem(rel_folder or ".", None, f"cannot read folder: {_os_reason(exc)}"))
            continue
        for entry in entries:
            rel = f"{rel_folder}{entry.name}"
            rel = unicodedata.normalize("NFC", rel)
            if entry.name in EXCLUDED_DIRS:
                continue
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                problems.append(NoteProblem(rel, None, f"cannot read: {_os_reason(exc)}"))
                continue
            if spec is not None and spec.match_file(rel + ("/" if is_dir else "")):
                continue
            if not_utf8_at(entry.name) is not None:  # such a path cannot be hashed, stored or printed
                if is_dir or entry.name.lower().endswith(".md"):
                    problems.append(NoteProblem(rel, None, NAME_NOT_UTF8))
                continue
            if entry.is_symlink():
                linked = True
                target = _symlink_target(Path(entry.path), real_root)
                if target is None:
                    if rel.endswith(".md") or is_dir:
                        problems.append(NoteProblem(rel, None, "symlink points outside the vault; not followed"))
                    continue
                if not os.path.exists(entry.path):
                    problems.append(NoteProblem(rel, None, "broken symlink; not followed"))
                    continue
            if is_dir:
                real = os.path.realpath(entry.path)
                if real in visited:
                    problems.append(NoteProblem(rel, None, "symlink loop; folder already read, not followed"))
                    continue
                visited.add(real)
                folders.add(rel + "/")
                stack.append((Path(entry.path), rel + "/"))
            elif is_note_name(entry.name):
                notes.append(rel)
            elif is_attachment_name(entry.name):
                others.append(rel)
    notes.sort()
    others.sort()
    return Listing(tuple(notes), tuple(others), tuple(problems), frozenset(folders), linked, spec)


def is_note_name(name: str) -> bool:
    """Whether a file of this name is a note (`.md`, any case)."""
    return name.lower().endswith(".md")


def is_attachment_name(name: str) -> bool:
    """Whether a file of this name that is not a note is an attachment: everything but mindnet's own files."""
    return name != IGNORE_FILE and name != "mindnet.toml"


def ignore_spec(root: Path) -> pathspec.PathSpec | None:
    """The vault's `.mindnetignore` as gitignore patterns, or None without one."""
    path = root / IGNORE_FILE
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return pathspec.PathSpec.from_lines("gitignore", lines)


def _symlink_target(link: Path, real_root: Path) -> Path | None:
    """The resolved target if it stays inside the vault, else None (R1)."""
    try:
        target = link.resolve()
    except (OSError, RuntimeError):
        return link  # a loop: let the folder walk report it
    try:
        target.relative_to(real_root)
    except ValueError:
        return None
    return target


def _os_reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def read_note(path: Path, rel: str, settings: Settings, known_langs: KnownLanguages | None = None) -> Note:
    """Read one note file.

    Raises:
        NoteError: the file cannot become a note (size, encoding, NUL, empty, malformed YAML).
    """
    path, text = _read_text(path, rel, settings.max_file_bytes)
    return parse_note(text, rel, settings, lambda: _mtime_iso(path), known_langs)


def parse_note(
    text: str,
    rel: str,
    settings: Settings,
    default_created: Callable[[], str] | None = None,
    known_langs: KnownLanguages | None = None,
) -> Note:
    """A note from its file text; `default_created` gives the creation time when none is written (mtime).

    Raises:
        NoteError: empty text, malformed YAML, or missing required fields under `--strict`.
    """
    warnings: list[str] = []
    if text.startswith(_BOM):
        text = text[1:]
        warnings.append("UTF-8 byte order mark ignored")
    if not text.strip():
        raise NoteError(rel, "empty file", 1)
    parts = fm.split(text)
    if parts.yaml_text is not None:
        limits = fm.Limits(settings.frontmatter_max_nodes, settings.frontmatter_max_depth)
        parsed = fm.parse(parts.yaml_text, rel, parts.yaml_line, limits)
        data, field_lines = parsed.data, parsed.field_lines
        warnings.extend(parsed.repairs)
    else:
        data, field_lines = {}, {}
    body = parts.body
    missing = [f for f in REQUIRED_FIELDS if _blank(data.get(f))]
    if missing and settings.strict:
        raise NoteError(rel, f"missing required field(s): {', '.join(missing)} (--strict)", parts.yaml_line or 1)
    stem = unicodedata.normalize("NFC", Path(rel).stem)
    title = _text(data.get("title")) or _first_h1(body) or stem
    note_id = _text(data.get("id")) or slugify(stem) or content_hash(rel)[:12]
    created = _text(data.get("created")) or (default_created() if default_created else _now_iso())
    for f in missing:
        warnings.append(f"missing required field {f!r}; default used")
    digest = content_hash(text)
    known = known_langs.get(digest) if known_langs is not None else None
    lang = _text(data.get("lang")) or known or detect_language(body, settings.languages, cache_dir=settings.cache_dir)
    return Note(
        note_id=note_id,
        title=title,
        type=_text(data.get("type")) or "note",
        status=_text(data.get("status")),
        tags=_string_list(data.get("tags"), tags=True),
        aliases=_string_list(data.get("aliases")),
        area=_text(data.get("area")),
        project=_text(data.get("project")),
        priority=_text(data.get("priority")),
        people=_string_list(data.get("people")),
        created=created,
        updated=_text(data.get("updated")),
        path=rel,
        lang=lang,
        fulltext=body,
        frontmatter=data,
        references=_frontmatter_link_targets(data),
        content_hash=digest,
        body_line=parts.body_line,
        warnings=tuple(warnings),
        field_lines=field_lines,
    )


def _read_text(path: Path, rel: str, limit: int) -> tuple[Path, str]:
    """The path the file was found at and its text."""
    try:
        path, raw = _found(path, lambda at: _read_bytes(at, rel, limit))
    except NoteError:
        raise
    except OSError as exc:
        raise NoteError(rel, f"cannot read file: {_os_reason(exc)}") from None
    return path, decode_note(raw, rel, limit)


def note_file(path: Path) -> Path:
    """`path` if it exists, else the file of the same NFC name (`_on_disk`): for writers like lint --fix."""
    return path if os.path.lexists(path) else _on_disk(path)


def stat_note(path: Path) -> tuple[Path, os.stat_result]:
    """The path a note is found at (see `_on_disk`) and its stat; OSError when it is not there."""
    return _found(path, Path.stat)


_T = TypeVar("_T")


def _found(path: Path, use: Callable[[Path], _T]) -> tuple[Path, _T]:
    """`use(path)`, or, when nothing is at `path`, `use` of the file of the same NFC name (`_on_disk`),
    with the path it was found at; FileNotFoundError when neither is there."""
    try:
        return path, use(path)
    except FileNotFoundError:
        found = _on_disk(path)
        if found == path:
            raise
        return found, use(found)


def _on_disk(path: Path) -> Path:
    """`path` with each missing part replaced by the folder entry of the same NFC form (else `path`).

    Why: vault paths are NFC (R1: stable across systems), but a file made on macOS or synced from it
    may be named in NFD on disk ('Cafe' + U+0301); joined from the NFC path it was "not found", and
    every note with an accent in its name or folder was lost. Runs only after a read failed.
    """
    found = Path(path.anchor)
    for part in path.parts[len(found.parts):]:
        candidate = found / part
        if not os.path.lexists(candidate):
            wanted = unicodedata.normalize("NFC", part)
            try:
                names = os.listdir(found)
            except OSError:
                return path
            match = next((n for n in sorted(names) if unicodedata.normalize("NFC", n) == wanted), None)
            if match is None:
                return path
            candidate = found / match
        found = candidate
    return found


_SPECIAL_FILES = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _read_bytes(path: Path, rel: str, limit: int) -> bytes:
    """At most `limit + 1` bytes of a regular file, judged on the open descriptor.

    Why: `x.md` may be a named pipe (reading blocks until a writer comes: a hang) or a device like
    /dev/zero (endless bytes: memory runs away), and a file may grow after its size was checked.
    O_NONBLOCK makes opening a pipe return at once; fstat on the descriptor sees what was opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _SPECIAL_FILES if test(info.st_mode)), "not a regular file")
            raise NoteError(rel, f"cannot read file: {kind}, not a regular file")
        if info.st_size > limit:
            raise NoteError(rel, _too_big(info.st_size, limit))
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)


def _too_big(size: int, limit: int) -> str:
    if mib(size) == mib(limit):  # a few bytes over: "5.0 MiB, over the 5.0 MiB limit" would read as no excess
        return f"file is {size:,} bytes, over the {mib(limit)} limit of {limit:,} bytes (max_file_bytes)"
    return f"file is {mib(size)}, over the {mib(limit)} limit (max_file_bytes)"


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def decode_note(raw: bytes, rel: str, limit: int) -> str:
    """The text of a note's bytes, from a file or stdin, so both report bad bytes the same way (R3).

    Raises:
        NoteError: over `limit` bytes, a UTF-16/32 file, a NUL byte, or invalid UTF-8, with the line.
    """
    if len(raw) > limit:
        raise NoteError(rel, _too_big(len(raw), limit))
    if raw.startswith(_UTF16_BOMS):
        raise NoteError(rel, "UTF-16 or UTF-32 file (byte order mark); save the file as UTF-8", 1)
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        hint = "; it looks like UTF-16, save the file as UTF-8" if _looks_utf16(raw) else ""
        raise NoteError(rel, f"NUL byte in file (binary file or wrong encoding){hint}", line)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise NoteError(
            rel, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {col}); save the file as UTF-8", line
        ) from None


def _looks_utf16(raw: bytes) -> bool:
    """ASCII text saved as UTF-16 without a byte order mark: every other byte of its start is NUL."""
    head = raw[:64]
    return len(head) >= 4 and (not any(head[1::2]) or not any(head[0::2]))


def _blank(value: Any) -> bool:
    return value is None or value == "" or value == []


_COLLECTIONS = (list, tuple, dict, set, frozenset)
"""What YAML builds for a value a user meant as a list (`[a, b]`, `{a, b}`, `!!set`, `!!omap`…)."""


def _text(value: Any) -> str | None:
    if _blank(value):
        return None
    if isinstance(value, _COLLECTIONS):
        return ", ".join(str(v) for v in _entries(value)) or None
    return str(value).strip() or None


def _entries(value: list[Any] | tuple[Any, ...] | dict[Any, Any] | set[Any] | frozenset[Any]) -> list[Any]:
    """The items of a YAML collection a user meant as a list: a mapping's keys, a set's members sorted.

    Why: `tags: {a, b}` is a YAML mapping (`!!set` a set); as strings they gave tags like `{'a':` and
    `None}`, and a set's order changes with every process (hash seed), so its text was not stable.
    """
    if isinstance(value, dict):
        return list(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return list(value)


_TAG_SPLIT = re.compile(r"[,\s]+")


def _string_list(value: Any, tags: bool = False) -> tuple[str, ...]:
    """A list field as strings; a scalar becomes a one-item list (`tags: a, b` or `tags: #a #b` split)."""
    if _blank(value):
        return ()
    items = _entries(value) if isinstance(value, _COLLECTIONS) else _TAG_SPLIT.split(str(value)) if tags else [value]
    out: list[str] = []
    for item in items:
        if _blank(item) or isinstance(item, dict | tuple | set | frozenset):
            continue
        s = str(item).strip()
        if tags:
            s = s.lstrip("#")
        if s and s not in out:
            out.append(s)
    return tuple(out)


_WIKILINK_VALUE = re.compile(r"\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")


def _frontmatter_link_targets(data: dict[str, Any]) -> tuple[str, ...]:
    """Targets of `[[X]]` values anywhere in the frontmatter (R4 `references` fallback)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.extend(m.group(1).strip() for m in _WIKILINK_VALUE.finditer(value))
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(data)
    return tuple(dict.fromkeys(found))


def _first_h1(body: str) -> str | None:
    masked = without_fences(body.replace("\r\n", "\n").replace("\r", "\n"), "")
    m = _H1.search(masked)
    if not m:
        return None
    return _CLOSING_HASHES.sub("", m.group(1).strip(" \t")).strip()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _mtime_iso(path: Path) -> str:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat(timespec="seconds")
    except OSError:
        return datetime.fromtimestamp(0, tz=UTC).isoformat(timespec="seconds")


def file_line(note: Note, body_offset: int, starts: list[int] | None = None) -> int:
    """1-based file line of a char offset into `note.fulltext`."""
    return note.body_line - 1 + line_of(starts or line_starts(note.fulltext), body_offset)
