"""Where the MCP tools get their answers: the resident index in this process, or a running `mindnet serve`.

Both backends return the shapes of the CLI's `--json` (plain dicts), so the tools cannot tell
them apart. Neither computes anything: each method is one call of `Index`/`Resident`, or one
request to the server route that makes that call.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # at run time only the local backend loads the index stack, and only when built
    from .. import Resident
    from ..client import Remote

log = logging.getLogger("mindnet.mcp")

FILTER_PARAMS = {"type": "type", "tags": "tag", "lang": "lang", "path_prefix": "path", "created_from": "from",
                 "created_to": "to"}
"""`SearchFilters` field -> query parameter of `/api/search`."""


class Backend(Protocol):
    """What the tools need; each method answers one tool."""

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any]
               ) -> list[dict[str, Any]]: ...

    def read(self, ref: str, *, section: str | None, lines: tuple[int, int] | None, max_chars: int
             ) -> dict[str, Any]: ...

    def related(self, ref: str, *, view: str, depth: int) -> list[dict[str, Any]]: ...

    def context(self, query: str, *, budget: int, k: int, mode: str) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def overview(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class LocalBackend:
    """A `Resident` of this process, started on first need (not before the MCP handshake).

    Args:
        resident: the resident index; already running under `mindnet serve`.
        owned: this backend starts the resident (lazily) and stops it on `close`.
    """

    def __init__(self, resident: Resident, *, owned: bool) -> None:
        self.resident = resident
        self.index = resident.index
        self._owned = owned
        self._started = not owned
        self._first: Any = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the resident (import, watcher, e5 tier) once; safe from any thread."""
        with self._lock:
            if not self._started:
                self._started = True
                self._first = self.resident.start()
                log.info("resident index started for %s", self.resident.root)

    def _ready(self) -> None:
        """Started, and imported at least once when there was no store yet (a first session)."""
        self.start()
        if self._first is not None and not self.index.has_store():
            self._first.result()

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any]
               ) -> list[dict[str, Any]]:
        from .. import SearchFilters

        self._ready()
        hits = self.index.search_many(queries, k=k, mode=mode, by_note=by_note, filters=SearchFilters(**filters))
        return [h.as_dict() for h in hits]

    def read(self, ref: str, *, section: str | None, lines: tuple[int, int] | None, max_chars: int
             ) -> dict[str, Any]:
        self._ready()
        return self.index.read(ref, section=section, lines=lines, max_chars=max_chars)

    def related(self, ref: str, *, view: str, depth: int) -> list[dict[str, Any]]:
        self._ready()
        return self.index.graph(ref, view, depth)

    def context(self, query: str, *, budget: int, k: int, mode: str) -> dict[str, Any]:
        self._ready()
        return dataclasses.asdict(self.index.context(query, budget=budget, k=k, mode=mode, expand=True))

    def status(self) -> dict[str, Any]:
        self.start()
        return self.resident.status()

    def overview(self) -> dict[str, Any]:
        return self.index.overview()

    def close(self) -> None:
        if self._owned and self._started:
            self.resident.stop()
        elif self._owned:
            self.index.close()


class RemoteBackend:
    """A running `mindnet serve` for the same store, over its Unix socket or URL."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    def search(self, queries: list[str], *, k: int, mode: str, by_note: bool, filters: dict[str, Any]
               ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"q": queries, "k": k, "mode": mode, "by_note": str(by_note).lower()}
        params |= {FILTER_PARAMS[name]: value for name, value in filters.items() if value not in (None, ())}
        return list(self.remote.get("/api/search", params))

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
