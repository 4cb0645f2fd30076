"""The HTTP API of `mindnet serve`: routes that call `Resident`/`Index` and return the CLI's `--json` shapes.

No logic of its own: every route validates its arguments, calls one method of the resident index
and serialises what comes back. Security lives in one ASGI middleware (`Guard`): the Host and
Origin checks against DNS rebinding, the bearer key, and the request size limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .. import (
    GRAPH_VIEWS,
    MAX_GRAPH_DEPTH,
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    MAX_REF_CHARS,
    MODES,
    MindnetError,
    NotFoundError,
    Resident,
    SearchFilters,
    StoreError,
    __version__,
    mib,
    printable,
)
from ..web import web_routes

log = logging.getLogger("mindnet.http")

MAX_K = 100
MAX_BUDGET = 32_000
MAX_SECTIONS = 10
"""Most sections shown per note by `/api/notes`."""
MAX_BODY_BYTES = 1 << 20
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def search_filters(
    type: Annotated[list[str] | None, Query()] = None,
    tag: Annotated[list[str] | None, Query()] = None,
    lang: str | None = None,
    path: str | None = None,
    area: str | None = None,
    project: str | None = None,
    note: Annotated[list[str] | None, Query()] = None,
    date_from: Annotated[str | None, Query(alias="from")] = None,
    date_to: Annotated[str | None, Query(alias="to")] = None,
) -> SearchFilters:
    """The search filters of `/api/search` and `/api/notes`, as query parameters (one place for both)."""
    return SearchFilters(
        type=tuple(type or ()), tags=tuple(tag or ()), area=area, project=project, lang=lang,
        path_prefix=path, note_id=tuple(note or ()), created_from=date_from, created_to=date_to,
    )


def create_app(resident: Resident, *, info: dict[str, Any] | None = None) -> FastAPI:
    """The API over one resident index; `info` (url, pid) is added to `/api/status`."""
    app = FastAPI(title="mindnet", version=__version__, docs_url=None, redoc_url=None,
                  description="Search, read and walk a Markdown vault indexed by mindnet.")
    extra = info or {}
    index = resident.index

    @app.get("/api/health", summary="The server answers: `starting` while it warms up, then `ok`")
    def health() -> dict[str, Any]:
        return {"status": "ok" if resident.state.ready else "starting", "version": __version__}

    @app.get("/api/status", summary="Counts, models, e5 progress and watch state")
    def status() -> dict[str, Any]:
        return resident.status() | {"server": extra}

    @app.get("/api/search", summary="Hybrid, dense or lexical search (the shape of `mindnet search --json`)")
    def search(
        q: Annotated[list[str], Query(min_length=1, max_length=MAX_QUERIES,
                                      description="The query; several are fused by rank.")],
        filters: Annotated[SearchFilters, Depends(search_filters)],
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
        mode: Annotated[str, Query(pattern="^(" + "|".join(MODES) + ")$")] = "hybrid",
        by_note: bool = False,
        expand: bool = False,
        explain: Annotated[bool, Query(description="Each hit's parts: every list's rank and share of the "
                                                   "score (one query only).")] = False,
    ) -> list[dict[str, Any]]:
        hits = index.search_many(q, k=k, mode=mode, filters=filters, expand=expand, by_note=by_note, explain=explain)
        return [h.as_dict() for h in hits]

    @app.get("/api/notes", summary="Notes for a query, each once with its best sections (the page's results)")
    def notes(
        q: Annotated[list[str], Query(min_length=1, max_length=MAX_QUERIES,
                                      description="The query; several are fused by rank.")],
        filters: Annotated[SearchFilters, Depends(search_filters)],
        k: Annotated[int, Query(ge=1, le=MAX_K)] = 10,
        sections: Annotated[int, Query(ge=1, le=MAX_SECTIONS)] = 3,
        mode: Annotated[str, Query(pattern="^(" + "|".join(MODES) + ")$")] = "hybrid",
        explain: bool = False,
    ) -> list[dict[str, Any]]:
        found = index.search_notes(q, k=k, sections=sections, mode=mode, filters=filters, explain=explain)
        return [n.as_dict() for n in found]

    @app.post("/api/context", summary="A token-budgeted context with citations (`mindnet context --json`)")
    def context(
        query: Annotated[str, Body(min_length=1, max_length=MAX_QUERY_CHARS)],
        budget: Annotated[int, Body(ge=50, le=MAX_BUDGET)] = 2000,
        k: Annotated[int, Body(ge=1, le=MAX_K)] = 12,
        mode: Annotated[str, Body(pattern="^(" + "|".join(MODES) + ")$")] = "hybrid",
        expand: Annotated[bool, Body()] = True,
    ) -> dict[str, Any]:
        return dataclasses.asdict(index.context(query, budget=budget, k=k, mode=mode, expand=expand))

    @app.get("/api/note", summary="A note by id, vault-relative path or title: payload, text, sections, chunks")
    def note(ref: Annotated[str, Query(min_length=1, max_length=MAX_REF_CHARS)]) -> dict[str, Any]:
        return index.note(ref)

    @app.get("/api/read", summary="A note's text: whole, one section or a line range, with its file lines")
    def read(
        ref: Annotated[str, Query(min_length=1, max_length=MAX_REF_CHARS)],
        section: Annotated[str | None, Query(max_length=MAX_REF_CHARS)] = None,
        start: Annotated[int | None, Query(ge=1)] = None,
        end: Annotated[int | None, Query(ge=1)] = None,
        max_chars: Annotated[int | None, Query(ge=1, description="Whole lines within this many characters.")] = None,
    ) -> dict[str, Any]:
        if (start is None) != (end is None):
            raise MindnetError("start and end: give both or neither")
        lines = (start, end) if start is not None and end is not None else None
        return index.read(ref, section=section, lines=lines, max_chars=max_chars)

    @app.get("/api/overview", summary="What the vault holds: counts, languages, types, top tags")
    def overview() -> dict[str, Any]:
        return index.overview()

    @app.get("/api/graph", summary="Links, backlinks or unresolved links of a note, up to a depth")
    def graph(
        ref: Annotated[str, Query(min_length=1, max_length=MAX_REF_CHARS)],
        view: Annotated[str, Query(pattern="^(" + "|".join(GRAPH_VIEWS) + ")$")] = "neighbors",
        depth: Annotated[int, Query(ge=1, le=MAX_GRAPH_DEPTH)] = 1,
    ) -> list[dict[str, Any]]:
        return index.graph(ref, view, depth)

    @app.post("/api/import", summary="Import now (what changed); waits for the result (`mindnet import --json`)")
    async def import_now(full: Annotated[bool, Body(embed=True)] = False) -> dict[str, Any]:
        # Awaited on the event loop, not `.result()` on a request thread: 40 clients waiting for an
        # import held every thread of the pool, and /api/health itself waited 8 s.
        return (await asyncio.wrap_future(resident.request_import(full=full))).as_dict()

    app.include_router(web_routes(resident))
    _errors(app)
    return app


def _errors(app: FastAPI) -> None:
    """Every error is one JSON object with a message a person can act on, never a traceback."""

    @app.exception_handler(NotFoundError)
    async def not_found(_request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"error": str(exc), "suggestions": exc.suggestions}, status_code=404)

    @app.exception_handler(StoreError)
    async def store_error(_request: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(MindnetError)
    async def bad_request(_request: Request, exc: MindnetError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        """Routing's 404/405 and FastAPI's own 400 for a body it cannot parse, in the shape of every other error."""
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "body"))
            parts.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
        return JSONResponse({"error": "; ".join(parts)}, status_code=422)

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error: %r", exc, exc_info=exc)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500)


class Routed:
    """The API, with other ASGI apps answering their own paths (the MCP endpoint at `/mcp`).

    A plain dispatch on the path rather than a Starlette `Mount`, which would answer `/mcp`
    (the address MCP clients are given) with a redirect to `/mcp/`.
    """

    def __init__(self, app: ASGIApp, mounts: dict[str, ASGIApp]) -> None:
        self.app = app
        self.mounts = mounts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        for prefix, mounted in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                await mounted(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Guard:
    """Host/Origin checks, the bearer key, a body size limit and one log line per request.

    Args:
        app: the API.
        allowed_hosts: host names a request may address (`Host`), beside the loopback names (DNS
            rebinding); a request from a browser page of any origin but this server's own (a hostile
            site, another port, a sandboxed frame's `null`) is refused.
        api_key: required as `Authorization: Bearer KEY` unless `trusted` (the Unix socket, whose
            file permissions already admit only its owner).
        any_host: bound to a wildcard address (0.0.0.0, ::), where the key is required: a request
            with the key may name any Host. The server cannot know every name and address it is
            reached by (each was refused with 421, so the mode was unusable), and a rebinding page
            has no key to send. On a named address the Host check stays, key or not.
    """

    def __init__(self, app: ASGIApp, *, allowed_hosts: frozenset[str], api_key: str | None,
                 trusted: bool = False, any_host: bool = False) -> None:
        self.app = app
        self.hosts = LOOPBACK | {h.lower() for h in allowed_hosts}
        self.api_key = api_key
        self.trusted = trusted
        self.any_host = any_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int] = []

        async def logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        refusal = self._refusal(scope)
        if refusal is None and any(k.lower() == b"transfer-encoding" for k, _ in scope.get("headers", ())):
            receive, refusal = await _buffered(receive, MAX_BODY_BYTES)
        if refusal is not None:
            code, text = refusal
            await JSONResponse({"error": text}, status_code=code)(scope, receive, logged)
        else:
            await self.app(scope, receive, logged)
        # printable: the path is percent-decoded, so `%0a` in a URL would forge a line of the log
        log.info("%s %s %s %.1fms", scope["method"], printable(scope["path"]), status[0] if status else "-",
                 (time.perf_counter() - started) * 1000)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        keyed = bool(self.api_key) and not self.trusted
        authorised = keyed and hmac.compare_digest(headers.get("authorization", "").encode(),
                                                   f"Bearer {self.api_key}".encode())
        host = _hostname(headers.get("host", ""))
        if host not in self.hosts and not (self.any_host and authorised):
            return 421, f"host {host or '(none)'!r} is not served here (allowed: {', '.join(sorted(self.hosts))})"
        foreign = _foreign_origin(scope, headers.get("host", ""))
        if foreign is not None:
            return 403, f"cross-origin request from {printable(foreign)} refused"
        size = headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY_BYTES):
            return 413, f"request body over {mib(MAX_BODY_BYTES)}"
        if keyed and not authorised and scope["path"] != "/api/health":
            return 401, "missing or wrong API key (send Authorization: Bearer $MINDNET_API_KEY)"
        return None


def _foreign_origin(scope: Scope, host: str) -> str | None:
    """The first `Origin` of the request that is not this server's own (`http(s)://` + its Host), if any.

    Only the page served here may send one. Comparing host names alone let in a page of another
    port of this machine (`http://localhost:3000`) and `null`, the origin of a sandboxed frame and
    of a cross-site redirect: such a page cannot read the answers, but a simple POST (`text/plain`)
    from it did start an import. Every `Origin` header counts, not just the last one. No URL parser:
    `urlsplit` raised on `http://[::1` (a 500 with a traceback, from the guard itself).
    """
    own = host.strip().lower()
    for key, value in scope.get("headers", ()):
        origin = value.decode("latin-1")
        if key.lower() == b"origin" and origin.strip().lower().removesuffix("/") not in (f"http://{own}",
                                                                                       f"https://{own}"):
            return origin
    return None


def _hostname(netloc: str) -> str:
    """`example.org:8080` → `example.org`, `[::1]:80` → `::1`."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


async def _buffered(receive: Receive, limit: int) -> tuple[Receive, tuple[int, str] | None]:
    """A chunked body (no Content-Length to check) read here whole, or refused once it passes `limit`.

    Failing the app's `receive` instead, as before, left the answer to whoever was parsing: FastAPI
    said 400 'error parsing the body', the MCP endpoint a bare 500 with a traceback in the log.
    Read here, an oversized body is one 413 like a too-long Content-Length, and the app receives
    at most `limit` bytes, as one message.
    """
    parts: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: the app hears it as it would have
            return _replayed(message, receive), None
        parts.append(bytes(message.get("body", b"")))
        seen += len(parts[-1])
        if seen > limit:
            return receive, (413, f"request body over {mib(limit)}")
        if not message.get("more_body", False):
            return _replayed({"type": "http.request", "body": b"".join(parts), "more_body": False}, receive), None


def _replayed(first: Message, receive: Receive) -> Receive:
    """`receive` that returns `first` once, then what the connection sends (a disconnect)."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
