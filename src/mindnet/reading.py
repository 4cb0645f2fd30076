"""The vault as files: notes read, chunked and rendered as NDJSON, without a store or a model.

The part of the public API (`mindnet.api` re-exports all of it) that `mindnet-chunk` and a program
that only chunks need: importing it loads no Qdrant, no embedder and no search, so a chunk run
starts in the time its own modules take.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .chunking.base import Chunk
from .chunking.pipeline import check_settings, chunk_note
from .chunking.tokens import default_tokenizer
from .config import Settings, load_settings
from .errors import InputError, MindnetError, NoteError, VaultNotFoundError
from .links import Resolver
from .points import chunk_payload
from .vault import Note, NoteProblem, VaultResult, decode_note, parse_note, read_vault

if TYPE_CHECKING:
    from .graph import Edge


class Vault:
    """A vault folder read once: notes, problems, the link resolver, and chunks on demand."""

    def __init__(self, root: str | Path, settings: Settings | None = None, jobs: int = 1) -> None:
        """`jobs`: processes that read the notes (0: `read_jobs` picks them from the file count and load)."""
        self.root = Path(root).expanduser()
        if not self.root.is_dir():  # before anything reads settings or opens a store beside it
            raise VaultNotFoundError(str(self.root))
        self.settings = settings or load_settings(self.root)
        self.jobs = jobs
        check_settings(self.settings)

    @cached_property
    def result(self) -> VaultResult:
        return read_vault(self.root, self.settings, jobs=self.jobs or read_jobs)

    def refresh(self) -> None:
        """Forget what was read, so the next access sees the files as they are now."""
        for name in ("result", "resolver"):
            self.__dict__.pop(name, None)

    @property
    def notes(self) -> tuple[Note, ...]:
        return self.result.notes

    @property
    def problems(self) -> tuple[NoteProblem, ...]:
        return self.result.problems

    @cached_property
    def resolver(self) -> Resolver:
        return Resolver(self.result.notes, self.result.attachments)

    def note(self, ref: str) -> Note | None:
        """A note by id, vault-relative path (with or without `.md`) or title, case-insensitive."""
        wanted = ref.casefold().removesuffix(".md")
        for note in self.notes:
            if wanted in (note.note_id.casefold(), note.path.casefold().removesuffix(".md"), note.title.casefold()):
                return note
        resolution = self.resolver.resolve(ref)
        if resolution.status == "resolved":
            return next((n for n in self.notes if n.note_id == resolution.target_id), None)
        return None

    def graph(self, ref: str, view: str = "neighbors") -> list[dict[str, Any]]:
        """Linked notes computed from the files alone, for a vault that has no store yet."""
        note = self.note(ref)
        if note is None:
            raise MindnetError(f"no note {ref!r} in {self.root} (give a note id, a vault-relative path or a title)")
        # Without chunks, body links surface as note-level references (R16's optional edges).
        from .graph import build_edges  # here: a chunk run never builds edges

        edges = build_edges(self.notes, {}, self.resolver, self.settings, note_references=True)
        info = {n.note_id: {"path": n.path, "title": n.title} for n in self.notes}
        return linked_notes(edges, note.note_id, view, info)

    def chunks(self, notes: Iterable[Note] | None = None) -> Iterator[Chunk]:
        """Chunks of the given notes (default: all), links resolved within this vault."""
        for note in self.notes if notes is None else notes:
            yield from chunk_note(note, self.settings, self.resolver)

    def chunk_lines(
        self, notes: Sequence[Note] | None = None, jobs: int = 0
    ) -> Iterator[tuple[Note, bytes, str | None]]:
        """Each note's chunks as UTF-8 NDJSON (`ndjson`), in note order: (note, lines, error or None).

        With more than one job (`chunk_jobs`) the notes are chunked by worker processes, which also
        render the lines; the order stays the notes' order, so the output is the same bytes as with
        one. A note that fails (`MindnetError`) yields its message and no lines. Bytes, because the
        caller writes them as they are: encoding in the workers spares the parent that work.
        """
        todo = list(self.notes if notes is None else notes)
        workers = chunk_jobs(todo, jobs)
        resolver = self.resolver
        default_tokenizer()  # loaded here, before any fork, so that workers share it instead of loading it
        if workers <= 1:
            for note in todo:
                yield note, *_chunk_one(note, self.settings, resolver)
            return
        yield from _chunk_in_workers(todo, self.settings, resolver, workers)

    def notes_at(self, paths: Iterable[str | Path]) -> tuple[list[Note], list[NoteProblem]]:
        """The notes of files given on a command line, as vault-relative paths."""
        by_path = {n.path: n for n in self.notes}
        problems_by_path = {p.path: p for p in self.problems}
        found: list[Note] = []
        problems: list[NoteProblem] = []
        for raw in paths:
            try:
                rel = Path(raw).resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                problems.append(NoteProblem(str(raw), None, f"not inside the vault {self.root}"))
                continue
            if rel in by_path:
                found.append(by_path[rel])
            elif rel in problems_by_path:
                problems.append(problems_by_path[rel])
            else:
                problems.append(NoteProblem(rel, None, "not a note of the vault (ignored or not a .md file)"))
        return found, problems


PARALLEL_MIN_CHARS = 2_000_000
"""Below this much note text `chunk_jobs` picks one process: starting workers and shipping notes to
them cost more than they save (a 500-note vault chunks in about a second)."""


def chunk_jobs(notes: Sequence[Note], jobs: int = 0) -> int:
    """Processes to chunk `notes` with: `jobs` when given, else one per core left idle by the
    measured 1-minute load (`LoadAwareThreads`), and 1 for small inputs (`PARALLEL_MIN_CHARS`).

    On the shared 2-core VM a second process only helps while the other programs leave a core free;
    under load it would wait for one, so the load decides.
    """
    if jobs > 0:
        return max(1, min(jobs, len(notes)))
    if sum(len(note.fulltext) for note in notes) < PARALLEL_MIN_CHARS:
        return 1
    from .embedding import LoadAwareThreads

    return max(1, min(LoadAwareThreads().choose(), len(notes)))


PARALLEL_MIN_FILES = 300
"""Below this many files `read_jobs` picks one process (a 300-note vault reads in about a second)."""


def read_jobs(files: int) -> int:
    """Processes to read `files` note files with: 1 for few, else as `chunk_jobs` decides from the load."""
    if files < PARALLEL_MIN_FILES:
        return 1
    from .embedding import LoadAwareThreads  # the load rule the encoder's threads follow

    return max(1, min(LoadAwareThreads().choose(), files))


def ndjson(chunks: Iterable[Chunk]) -> str:
    """Chunks as `mindnet-chunk` prints them (R24): one JSON payload per line."""
    encode = _JSON.encode
    return "".join([encode(chunk_payload(c)) + "\n" for c in chunks])


_JSON = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(..., ensure_ascii=False)` without building an encoder per call (same bytes)."""


def _chunk_one(note: Note, settings: Settings, resolver: Resolver) -> tuple[bytes, str | None]:
    """One note's NDJSON lines as UTF-8, or its error message: errors travel back as text, not tracebacks."""
    try:
        return ndjson(chunk_note(note, settings, resolver)).encode("utf-8"), None
    except InputError as exc:  # the caller names the note: its reason alone, or the path comes twice
        return b"", exc.reason
    except MindnetError as exc:
        return b"", str(exc)


TASK_NOTES = 64
"""Most notes in one worker task: enough that a task's round trip is noise next to its chunking."""
TASKS_PER_WORKER = 12
"""Tasks per worker, at least: tasks of equal text, so no worker idles long while the last ones finish."""


def note_ranges(notes: Sequence[Note], workers: int) -> list[range]:
    """Consecutive index ranges of `notes` with about equal text each (chunking time follows the text).

    At most `TASK_NOTES` notes a range and about `TASKS_PER_WORKER` ranges per worker: one big note
    then makes a range of its own instead of holding up 63 others behind it.
    """
    total = sum(len(note.fulltext) for note in notes)
    share = max(1, total // max(1, workers * TASKS_PER_WORKER))
    ranges: list[range] = []
    start, size = 0, 0
    for i, note in enumerate(notes):
        size += len(note.fulltext)
        if size >= share or i + 1 - start >= TASK_NOTES:
            ranges.append(range(start, i + 1))
            start, size = i + 1, 0
    if start < len(notes):
        ranges.append(range(start, len(notes)))
    return ranges


_WORKER: tuple[Sequence[Note], Settings, Resolver] | None = None
"""What `_chunk_range` chunks: set once per worker process by `_chunk_worker_init`."""


def _chunk_worker_init(notes: Sequence[Note], settings: Settings, resolver: Resolver) -> None:
    global _WORKER
    _WORKER = (notes, settings, resolver)


def _chunk_range(indices: range) -> list[tuple[bytes, str | None]]:
    """The `_chunk_one` results of the notes at `indices`: a task names notes, it does not carry them."""
    assert _WORKER is not None
    notes, settings, resolver = _WORKER
    return [_chunk_one(notes[i], settings, resolver) for i in indices]


def _chunk_in_workers(
    notes: list[Note], settings: Settings, resolver: Resolver, workers: int
) -> Iterator[tuple[Note, bytes, str | None]]:
    """`_chunk_one` of every note in `workers` processes, yielded in note order as tasks finish.

    Forked where the platform can: a worker then inherits the notes, the resolver and the loaded
    models, so a task is two integers out and the rendered bytes back, and nothing is loaded twice.
    Elsewhere (spawn) the initializer's arguments are pickled once per worker.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_chunk_worker_init,
                             initargs=(notes, settings, resolver)) as pool:
        futures = [pool.submit(_chunk_range, indices) for indices in note_ranges(notes, workers)]
        done = 0
        for future in futures:
            for lines, error in future.result():
                yield notes[done], lines, error
                done += 1


GRAPH_VIEWS = ("neighbors", "references", "backlinks", "unresolved")
MAX_GRAPH_DEPTH = 3
"""Hops a graph walk may take: at three hops a well-linked vault already returns most of itself."""


def linked_notes(
    edges: Iterable[Edge], note_id: str, view: str, notes: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The notes one hop from `note_id`: what it links to, what links to it, or both.

    Args:
        edges: at least the note's own edges and the backlinks whose source is the note.
        note_id: the note.
        view: `references`, `backlinks`, `neighbors` (both), or `unresolved` (links to no note yet).
        notes: `note_id` -> `{path, title}` of every known note, for display.
    """
    from .graph import STRUCTURAL_KINDS

    if view not in GRAPH_VIEWS:
        raise MindnetError(f"unknown graph view {view!r}; one of {', '.join(GRAPH_VIEWS)}")
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in edges:
        if e.kind == "backlink" and e.source_id == note_id and view in ("neighbors", "backlinks"):
            key = (e.target_id, "backlink", "in")
        elif e.note_id == note_id and e.kind not in STRUCTURAL_KINDS and e.kind != "backlink" and view != "backlinks":
            if e.target_id == note_id or (view == "unresolved" and e.status != "unresolved"):
                continue
            key = (e.target_id, e.kind, "out")
        else:
            continue
        target, kind, direction = key
        info = notes.get(target, {})
        rows.setdefault(
            key,
            {
                "note_id": target,
                "path": info.get("path"),
                "title": info.get("title", target),
                "kind": kind,
                "status": e.status if direction == "out" else "resolved",
                "direction": direction,
            },
        )
    return sorted(rows.values(), key=lambda r: (r["direction"], r["kind"], r["title"].casefold()))


def note_from_text(text: str | bytes, settings: Settings, path: str = "<stdin>") -> Note:
    """A note that exists only as text (stdin of `mindnet-chunk`), checked as a file's bytes would be.

    Text is taken back to bytes first (the lone surrogates a lenient stdin decoder leaves become the
    bytes they stand for), so bad input gets the same one-line report as a file with those bytes (R3).

    Raises:
        NoteError: empty input, or bytes a note file could not hold.
    """
    check_settings(settings)
    raw = _as_bytes(text)
    decoded = decode_note(raw, path, settings.max_file_bytes)
    if not decoded.strip():
        raise NoteError(path, "empty input", 1)
    return parse_note(decoded.removeprefix("\ufeff"), path, settings)


def _as_bytes(text: str | bytes) -> bytes:
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")  # U+DC80..U+DCFF: the undecodable bytes themselves
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")  # other lone surrogates: invalid UTF-8 as well
