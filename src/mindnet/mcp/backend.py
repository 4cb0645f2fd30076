"""Where the MCP tools get their answers: the resident index in this process, or a running `mindnet serve`.

Both backends return the shapes of the CLI's `--json` (plain dicts), so the tools cannot tell
them apart. Neither computes anything: each method is one call of `Index`/`Resident`, or one
request to the server route that makes that call.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import MindnetError

if TYPE_CHECKING:  # at run time only the local backend loads the index stack, and only when built
    from .. import Resident
    from ..client import Remote

log = logging.getLogger("mindnet.mcp")

FILTER_PARAMS = {"type": "type", "tags": "tag", "lang": "lang", "path_prefix": "path", "created_from": "from",
                 "created_to": "to"}
"""`SearchFilters` field -> query parameter of `/api/search`."""


class Backend(Protocol):
    """What the tools need; each method answers one tool."""

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any],
               explain: bool = False) -> list[dict[str, Any]]: ...

    def search_notes(self, queries: list[str], *, k: int, mode: str, filters: dict[str, Any],
                     explain: bool = False) -> list[dict[str, Any]]: ...

    def read(self, ref: str, *, section: str | None, lines: tuple[int, int] | None, max_chars: int
             ) -> dict[str, Any]: ...

    def related(self, ref: str, *, view: str, depth: int) -> list[dict[str, Any]]: ...

    def context(self, query: str, *, budget: int, k: int, mode: str) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def overview(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class LocalBackend:
    """A `Resident` of this process: `mindnet serve`'s own, or one this backend starts (`starting`).

    A backend that starts its resident does so on a thread at once: the MCP handshake answers while
    the index opens, the first import runs and the models warm up, and a tool call that comes before
    all that is done waits for it (issue 26).
    """

    def __init__(self, resident: Resident | None, *, owned: bool) -> None:
        """Args:
            resident: the resident index; `mindnet serve`'s (running), or None when `starting` makes one.
            owned: this backend starts the resident and stops it on `close`.
        """
        self._resident = resident
        self._owned = owned
        self._made = threading.Event()
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        if resident is not None:
            self._made.set()

    @classmethod
    def starting(cls, make: Callable[[], Resident]) -> LocalBackend:
        """A backend whose resident `make` builds, starts and warms up on a thread of its own (`start`)."""
        backend = cls(None, owned=True)
        backend._thread = threading.Thread(target=backend._start, args=(make,), name="mindnet-mcp-start", daemon=True)
        return backend

    def start(self) -> None:
        """Begin making the resident (a backend made by `starting`; once)."""
        if self._thread is not None and not self._thread.is_alive() and not self._made.is_set():
            self._thread.start()

    def _start(self, make: Callable[[], Resident]) -> None:
        try:
            resident = self._resident = make()
            resident.begin_warm_up()
            resident.start()
            log.info("resident index started for %s", resident.root)
        except BaseException as exc:  # reported by the tool calls that need the index
            self._failure = exc
            return
        finally:
            self._made.set()
        resident.warm_up()  # after the first import when the vault has no store yet

    @property
    def resident(self) -> Resident:
        """The resident, once warm: a call that comes early waits here."""
        resident = self._made_resident()
        resident.wait_ready()
        return resident

    def _made_resident(self) -> Resident:
        """The resident once made (started or not, warm or not)."""
        self._made.wait()
        if self._failure is not None or self._resident is None:
            raise MindnetError(f"the index could not be opened: {self._failure}")
        return self._resident

    @property
    def index(self) -> Any:
        return self.resident.index

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any],
               explain: bool = False) -> list[dict[str, Any]]:
        from .. import SearchFilters

        hits = self.index.search_many(queries, k=k, mode=mode, by_note=by_note, filters=SearchFilters(**filters),
                                      explain=explain)
        return [h.as_dict() for h in hits]

    def search_notes(self, queries: list[str], *, k: int, mode: str, filters: dict[str, Any],
                     explain: bool = False) -> list[dict[str, Any]]:
        from .. import SearchFilters

        notes = self.index.search_notes(queries, k=k, mode=mode, filters=SearchFilters(**filters), explain=explain)
        return [n.as_dict() for n in notes]

    def read(self, ref: str, *, section: str | None, lines: tuple[int, int] | None, max_chars: int
             ) -> dict[str, Any]:
        return self.index.read(ref, section=section, lines=lines, max_chars=max_chars)

    def related(self, ref: str, *, view: str, depth: int) -> list[dict[str, Any]]:
        return self.index.graph(ref, view, depth)

    def context(self, query: str, *, budget: int, k: int, mode: str) -> dict[str, Any]:
        return dataclasses.asdict(self.index.context(query, budget=budget, k=k, mode=mode, expand=True))

    def status(self) -> dict[str, Any]:
        return self.resident.status()

    def overview(self) -> dict[str, Any]:
        # Not behind the warm-up: `serve` asks for it while building `/mcp`, before it warms up.
        return self._made_resident().index.overview()

    def close(self) -> None:
        if not self._owned:
            return
        self.start()  # a client that left at once: the thread still makes (and now stops) the resident
        self._made.wait()
        if self._resident is not None:
            self._resident.stop()  # waits for a warm-up in flight, then closes the index


class RemoteBackend:
    """A running `mindnet serve` for the same store, over its Unix socket or URL."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any],
               explain: bool = False) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"q": queries, "k": k, "mode": mode, "by_note": str(by_note).lower(),
                                  "explain": str(explain).lower()}
        params |= {FILTER_PARAMS[name]: value for name, value in filters.items() if value not in (None, ())}
        return list(self.remote.get("/api/search", params))

    def search_notes(self, queries: list[str], *, k: int, mode: str, filters: dict[str, Any],
                     explain: bool = False) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"q": queries, "k": k, "mode": mode, "explain": str(explain).lower()}
        params |= {FILTER_PARAMS[name]: value for name, value in filters.items() if value not in (None, ())}
        return list(self.remote.get("/api/notes", params))

    def read(self, ref: str, *, section: str | None, lines: tuple[int, int] | None, max_chars: int
             ) -> dict[str, Any]:
        start, end = lines if lines is not None else (None, None)
        return dict(self.remote.get("/api/read", {"ref": ref, "section": section, "start": start, "end": end,
                                                  "max_chars": max_chars}))

    def related(self, ref: str, *, view: str, depth: int) -> list[dict[str, Any]]:
        return list(self.remote.get("/api/graph", {"ref": ref, "view": view, "depth": depth}))

    def context(self, query: str, *, budget: int, k: int, mode: str) -> dict[str, Any]:
        return dict(self.remote.post("/api/context", {"query": query, "budget": budget, "k": k, "mode": mode,
                                                      "expand": True}))

    def status(self) -> dict[str, Any]:
        return dict(self.remote.get("/api/status"))

    def overview(self) -> dict[str, Any]:
        return dict(self.remote.get("/api/overview"))

    def close(self) -> None:
        return None
