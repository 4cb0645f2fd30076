"""The resident owner of one vault's index: a writer thread, a file watcher, the e5 tier in the background.

`mindnet serve`, `mindnet watch` and `mindnet mcp` all run one `Resident`. It holds one `Index`
(opened `shared`, so searches from request threads interleave with the writer at store-call
granularity) and a single worker thread that does every write, in this order of priority:

1. imports: requested by the watcher (a save, a rename, a `git checkout` of 500 files) or by a
   client; requests that arrive while an import runs are coalesced into one follow-up import;
2. the e5 tier, one committed batch at a time, asking between batches whether an import waits.

Nothing here computes a search result or a payload: every answer comes from `Index`. A kill at any
moment is repaired by the import journal on the next start, exactly as for a killed `mindnet import`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api import Index
from .config import Settings, store_dir
from .embedding import Embedder
from .errors import printable
from .store import limit_arenas, map_large_blocks
from .sync import ImportSummary
from .vault import EXCLUDED_DIRS, IGNORE_FILE, ignore_spec
from .vault_changes import vault_relative

log = logging.getLogger("mindnet.serve")

E5_BATCH_SECONDS = 0.1
"""How long one e5 batch of the background fill should take: a saved note's import waits for the
batch in flight, and a save should be searchable within a second (issue 26)."""
IDLE_RELEASE_SECONDS = 2.0
"""Seconds without a search or a write after which a resident lets go of the store's pages (issue 27): a
warm 30,000-note store held ~1 GB of them, most read once on opening; the next search maps what it needs
again, a few ms more on its first round (docs/decisions/large-vaults.md)."""
AFTER_READY_GRACE = 0.3
"""Seconds a resident leaves to the first requests once it says ready before its own background work
(the catch-up import, the writer's models) starts: both hold Python's lock, and a client that waited for
ready (an agent's first tool call) asks at once. A save in that spell is imported after it."""

WALK_EVERY_SECONDS = 300.0
"""Longest time between two imports that walk the whole vault; the saves in between read only the files the
watcher named (`vault_changes`). A walk finds what a watcher can miss (a change before its watches were set, an
overflowed event queue) at ~0.35 s of a save at 30,000 notes."""
EDITOR_TEMP_SUFFIXES = (".swp", ".swx", ".swo", ".tmp", ".temp", ".bak", "~", ".crswap", ".part", ".kate-swp")
"""Files editors write beside a note while saving (vim, Kate, Chrome, rsync); never a note change."""
EDITOR_TEMP_NAMES = frozenset({"4913", ".DS_Store"})
"""vim probes a folder's writability with a file named 4913; macOS writes .DS_Store."""


@dataclass(slots=True)
class ResidentState:
    """What the status endpoint and the console line report; written by the worker and the watcher."""

    started: float = field(default_factory=time.time)
    ready: bool = True
    """False while `Resident.warm_up` loads what a first search needs (`/api/health` says "starting")."""
    warmed: bool = True
    """False until the whole warm-up is over: after ready, the writer's models and what `Index.keep_resident`
    loads (a bench reads a server's settled memory after it)."""
    watching: bool = False
    last_event: str | None = None
    """The last change the watcher saw, e.g. `modified concepts/rrf.md (+2 more)`."""
    last_event_at: float | None = None
    importing: bool = False
    imports: int = 0
    last_import: dict[str, Any] | None = None
    last_error: str | None = None
    e5_enabled: bool = False
    e5_done: int = 0
    e5_total: int = 0
    e5_complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "started": self.started, "ready": self.ready, "warmed": self.warmed, "watching": self.watching,
            "last_event": self.last_event,
            "last_event_at": self.last_event_at, "importing": self.importing, "imports": self.imports,
            "last_import": self.last_import, "last_error": self.last_error,
            "e5": {"enabled": self.e5_enabled, "done": self.e5_done, "total": self.e5_total,
                   "complete": self.e5_complete},
        }


def change_filter(vault: Path, settings: Settings) -> Callable[[str], bool]:
    """Whether a changed path can change the index: not in `.obsidian/`, `.git/`, the store folder,
    `.mindnetignore`'s matches, nor an editor's temp file. `mindnet.toml` itself is ignored: new
    settings need a restart, as a server's configuration usually does."""
    root = vault.resolve()
    store = store_dir(vault, settings).resolve()
    spec = ignore_spec(vault)

    def relevant(path: str) -> bool:
        p = Path(path)
        try:
            rel = p.resolve().relative_to(root) if p.exists() else p.absolute().relative_to(root)
        except ValueError:
            return False
        if p.absolute().is_relative_to(store) or any(part in EXCLUDED_DIRS for part in rel.parts):
            return False
        name = rel.name
        if name in EDITOR_TEMP_NAMES or name.endswith(EDITOR_TEMP_SUFFIXES) or name.startswith((".#", "~$")):
            return False
        if name in ("mindnet.toml",):
            return False
        if name == IGNORE_FILE:
            return True  # what is ignored changed: the next import finds notes come and gone
        return spec is None or not spec.match_file(rel.as_posix())

    return relevant


class Resident:
    """One vault's index kept open, current and filling its e5 tier, for as long as it runs."""

    def __init__(
        self,
        vault: str | Path,
        settings: Settings,
        *,
        watch: bool = True,
        e5: bool = True,
        embedder: Embedder | None = None,
        e5_model: Embedder | None = None,
        step_ms: int = 100,
        debounce_ms: int = 1600,
        loading: Any = None,
    ) -> None:
        """Bind a vault; `start()` opens the index and starts the threads.

        Args:
            watch: re-import on file changes (watchfiles); off, imports happen only on request.
            e5: fill the e5 tier in the background where it is installed.
            embedder, e5_model: models to use instead of the packaged ones (tests).
            step_ms: quiet time after the last change before an import starts.
            debounce_ms: longest time changes are gathered into one import.
            loading: the models' preload (`preload_models(settings, vault=...)`) the caller started before
                it imported the index stack; the warm-up then waits for that one instead of starting its own.
        """
        limit_arenas()  # before this resident's threads start: they share two of glibc's heaps
        self.index = Index(vault, settings, embedder=embedder, e5=e5_model, shared=True)
        self.root = self.index.root
        self.settings = settings
        self.state = ResidentState(e5_enabled=e5)
        self._watch = watch
        if watch:  # its saves' imports compare the whole vault with the store: from the first import on, from memory
            self.index.keep_notes_slim()
            self.index.keep_stored_states()
            self.index.keep_resolver()
            self.index.keep_reads()
        self._step_ms = step_ms
        self._debounce_ms = debounce_ms
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._pending: list[Future[ImportSummary]] = []
        self._wanted = False
        self._full = False
        self._changes: set[str] | None = None
        """Vault-relative paths the watcher saw change since the last import began; None: walk the vault."""
        self._walked_at = -WALK_EVERY_SECONDS
        """`time.monotonic()` of the last import that walked the whole vault."""
        self._threads: list[threading.Thread] = []
        self._first: Future[ImportSummary] | None = None
        self._loading: Any = loading
        """The models' preload (`preload.ModelsLoading`), the caller's or the warm-up's, joined by `stop`."""
        self._warm = threading.Event()
        self._warm.set()  # nothing to wait for until a warm-up begins
        self._warmed = threading.Event()
        """Set when the whole warm-up is over, the writer's models included (`stop` waits for it)."""
        self._warmed.set()
        self._writes_allowed = threading.Event()
        """Cleared while a warm-up of an existing store runs: the writer starts after it."""
        self._writes_allowed.set()
        self._released_after = -1.0
        """`Index.store_used` when the resident last let go of the store's pages (`_release_when_idle`)."""
        self._problems: frozenset[str] = frozenset()
        """The previous import's problem lines: each is logged when it first appears, not on every save."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> Future[ImportSummary]:
        """Start the worker (which imports once at once) and the watcher; the future is that first import."""
        first = self._first = self.request_import()
        self._threads = [threading.Thread(target=self._work, name="mindnet-writer", daemon=True)]
        if self._watch:
            self._threads.append(threading.Thread(target=self._watch_files, name="mindnet-watch", daemon=True))
        for thread in self._threads:
            thread.start()
        return first

    def stop(self, timeout: float = 60.0) -> None:
        """Finish the write in flight (an import, or one e5 batch), then close the index.

        An import that does not finish within `timeout` is left to its journal: the next start
        repairs the store as after a kill.
        """
        self._stop.set()
        self._writes_allowed.set()
        with self._wake:
            self._wake.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        # A warm-up in flight reads the index and loads models: let it finish first (a process must
        # not exit inside a model's native load: the interpreter would stop it there, and that aborts).
        self._warmed.wait(timeout)
        if self._loading is not None:
            self._loading.finish()
        self.index.close()
        for waiting in self._take_pending():
            if not waiting.done():
                waiting.cancel()

    def begin_warm_up(self) -> None:
        """Say "starting" (`state.ready`, `wait_ready`) until `warm_up` has run; call it before its thread starts."""
        self.state.ready = self.state.warmed = False
        self._warm.clear()
        self._warmed.clear()
        self._writes_allowed.clear()

    def warm_up(self, on_ready: Callable[[], None] | None = None) -> None:
        """Load all that a first search needs, then say ready (issue 26), then warm the writer's models.

        A vault with no store yet waits for the first import, which makes it; a failure is reported
        in the state and the log, and the server is ready anyway (searches then load lazily).
        `on_ready` is called once ready; the catch-up import and the writer's models wait
        `AFTER_READY_GRACE` after it.
        """
        from .preload import preload_models

        try:
            if self._loading is None:
                self._loading = preload_models(self.settings, vault=self.root)  # models' files, beside what follows
            if not self.index.has_store() and self._first is not None:
                self._writes_allowed.set()  # the first import makes the store the warm-up needs
                self._first.exception()  # waits; an import error is the import's to report
            if not self._stop.is_set():
                self.index.warm_up()
        except Exception as exc:  # a warm-up is an optimisation: never the reason a server does not answer
            self.state.last_error = f"warm-up failed: {exc}"
            log.exception("warm-up failed")
        finally:
            self.state.ready = True
            self._warm.set()
        try:
            try:
                if on_ready is not None:
                    on_ready()
                self._stop.wait(AFTER_READY_GRACE)  # the first requests before the writer's work
            finally:
                self._writes_allowed.set()
            self._warm_writes()
        finally:
            self.state.warmed = True
            self._warmed.set()

    def _warm_writes(self) -> None:
        """After ready: what the writer will load, loaded now (the chunker and sentencepiece for a save, the
        e5 model for the fill), so that the first save and the first fill batch do not wait for it; and the
        default model made resident whole (`Index.keep_resident`), so that the server's memory does not creep
        up with every new word a save or a query brings (issue 27)."""
        try:
            if self._watch and not self._stop.is_set():
                self.index.prepare_import()
            if self.state.e5_enabled and not self._stop.is_set() and not self.index.e5_complete():
                tier = self.index.e5_embedder()
                if tier is not None:
                    tier.prepare()
            first = self._first
            while first is not None and not first.done() and not self._stop.wait(0.05):
                pass  # the catch-up import first: the two would only slow each other
            if not self._stop.is_set():
                self.index.keep_resident(sample=self._watch,  # new words would grow it bit by bit
                                         stop=lambda: self._yield_to_imports() or self.state.importing)
                self.index.release_memory()  # what reading the sample held
        except Exception:
            log.debug("warming the writer's models failed", exc_info=True)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Until a warm-up in progress has finished (at once when none runs); False on timeout."""
        return self._warm.wait(timeout)

    # -- requests ----------------------------------------------------------------------------------

    def request_import(self, full: bool = False, changed: Iterable[str] | None = None) -> Future[ImportSummary]:
        """Queue an import; requests that arrive before it starts share it (one import, one result).

        `changed`: the vault-relative paths the caller knows changed (the watcher's); the import then reads only
        these files where it can (`vault_changes`). Without it, or once any request comes without it, the
        import walks the whole vault."""
        future: Future[ImportSummary] = Future()
        with self._wake:
            self._pending.append(future)
            if changed is None or (self._wanted and self._changes is None):
                self._changes = None
            elif self._wanted and self._changes is not None:
                self._changes.update(changed)
            else:
                self._changes = set(changed)
            self._wanted = True
            self._full = self._full or full
            self._wake.notify_all()
        return future

    def status(self) -> dict[str, Any]:
        """The index's counts plus what this process is doing (the `status` endpoint's shape)."""
        info = self.index.status().as_dict()
        info["resident"] = self.state.as_dict()
        return info

    # -- the writer --------------------------------------------------------------------------------

    def _work(self) -> None:
        # A warm-up of a vault that has its store goes first: its search and the writer's first import
        # would only slow each other, and the import finds what changed just as well a moment later.
        while not self._writes_allowed.wait(0.5):
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            if self._next_import():
                continue
            if self._e5_step():
                continue
            wait = self._release_when_idle()
            with self._wake:
                if not self._wanted and not self._stop.is_set():
                    self._wake.wait(wait)

    def _release_when_idle(self) -> float:
        """Let go of the store's pages and freed memory (`Index.release_memory`) once the store has not been
        used for `IDLE_RELEASE_SECONDS` since it was last used; the seconds until the next look.

        On the writer's thread, so no import unmaps a range meanwhile; the store's lock keeps searches out."""
        used = self.index.store_used()
        if used == self._released_after:
            return IDLE_RELEASE_SECONDS
        idle = time.monotonic() - used
        if idle < IDLE_RELEASE_SECONDS:
            return IDLE_RELEASE_SECONDS - idle
        self.index.release_memory()
        self._released_after = used
        return IDLE_RELEASE_SECONDS

    def _next_import(self) -> bool:
        """Run the waiting import, if any; True when one ran."""
        with self._wake:
            if not self._wanted:
                return False
            self._wanted, full, changes = False, self._full, self._changes
            self._full, self._changes = False, None
            waiting = self._take_pending()
        try:
            summary = self._import(full, changes)
        except Exception as exc:  # one failed import must not end the server: report it and go on
            self.state.last_error = f"import failed: {exc}"
            log.exception("import failed")
            for future in waiting:
                future.set_exception(exc)
            return True
        self.state.imports += 1
        self.state.last_import = summary.as_dict() | {"problems": len(summary.problems), "finished": time.time()}
        self.state.e5_complete = False
        log.info("import notes_new=%d notes_changed=%d notes_deleted=%d chunks_embedded=%d seconds=%.2f",
                 summary.notes_new, summary.notes_changed, summary.notes_deleted, summary.chunks_embedded,
                 summary.seconds)
        self._log_new_problems(summary.problems)
        for future in waiting:
            future.set_result(summary)
        return True

    def _import(self, full: bool, changes: set[str] | None = None) -> ImportSummary:
        """One import; then what it freed goes back to the system (`Index.release_memory`), whether it
        succeeded or not: a long watch session otherwise kept the peak of the largest import it ran.

        After the first (the catch-up at start), glibc's mmap threshold is fixed (`store.map_large_blocks`), so
        that what the imports of later saves free leaves the process instead of fragmenting its heap; not
        before it: the models and the first search load faster under glibc's own rule (MCP's first search
        1.41–1.64 s against 1.77–2.09 s with the threshold fixed from the start; docs/decisions/large-vaults.md).

        `changes`: the files the watcher saw change, read alone (`Index.import_vault(changed=…)`) unless the last
        walk of the whole vault is older than `WALK_EVERY_SECONDS`."""
        self.state.importing = True
        now = time.monotonic()
        if changes is None or full or now - self._walked_at > WALK_EVERY_SECONDS:
            changes, self._walked_at = None, now
        try:
            return self.index.import_vault(full=full, e5=False, changed=changes)
        finally:
            self.state.importing = False
            self.index.release_memory()
            map_large_blocks()  # idempotent: the first call is the one that matters

    def _log_new_problems(self, problems: list[str]) -> None:
        """One warning per problem line (a note that failed to read, a skipped duplicate) new since the
        previous import: a bad save under watch mode said only `notes_new=0` before. Lines are already
        one printable line each (`NoteProblem.one_line`)."""
        for line in problems:
            if line not in self._problems:
                log.warning("%s", line)
        self._problems = frozenset(problems)

    def _e5_step(self) -> bool:
        """Fill the e5 tier until an import waits or it is complete; True when there was work."""
        if not self.state.e5_enabled or self.state.e5_complete:
            return False
        if self.index.e5_embedder() is None:
            self.state.e5_enabled = False
            return False
        if self.index.e5_complete():
            self.state.e5_complete = True
            return False
        try:
            self.index.fill_e5(progress=self._e5_progress, stop=self._yield_to_imports, batch_seconds=E5_BATCH_SECONDS)
        except Exception as exc:  # the tier is optional: a failure leaves search on the default tier
            self.state.last_error = f"e5 tier failed: {exc}"
            self.state.e5_enabled = False
            log.exception("e5 tier failed")
            return False
        self.state.e5_complete = self.index.e5_complete()
        return True

    def _yield_to_imports(self) -> bool:
        return self._stop.is_set() or self._wanted

    def _e5_progress(self, stage: str, done: int, total: int) -> None:
        self.state.e5_done, self.state.e5_total = done, total

    def _take_pending(self) -> list[Future[ImportSummary]]:
        waiting, self._pending = self._pending, []
        return waiting

    # -- the watcher -------------------------------------------------------------------------------

    def _watch_files(self) -> None:
        import watchfiles

        relevant = change_filter(self.root, self.settings)
        self.state.watching = True
        try:
            for changes in watchfiles.watch(
                self.root, watch_filter=lambda _change, path: relevant(path), stop_event=self._stop,
                step=self._step_ms, debounce=self._debounce_ms, rust_timeout=5000, yield_on_timeout=False,
                raise_interrupt=False,
            ):
                self._changed(changes)
        except Exception as exc:  # a vanished vault folder, too many inotify watches
            self.state.last_error = f"watcher stopped: {exc}"
            log.exception("watcher stopped")
        finally:
            self.state.watching = False

    def _changed(self, changes: Iterable[tuple[Any, str]]) -> None:
        seen = sorted(changes, key=lambda c: c[1])
        if not seen:
            return
        rels = [vault_relative(self.root, p) for _, p in seen]
        kind, path = seen[0]
        more = f" (+{len(seen) - 1} more)" if len(seen) > 1 else ""
        self.state.last_event = f"{getattr(kind, 'name', kind)} {rels[0] if rels[0] is not None else path}{more}"
        self.state.last_event_at = time.time()
        log.info("change %s", printable(self.state.last_event))  # a file name may hold a newline
        self.request_import(changed=None if None in rels else [r for r in rels if r is not None])
