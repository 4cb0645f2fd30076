"""Hostile input against what `mindnet serve`, the MCP tools and the page call: each test is a finding of the
campaign against the resident server (dates the store cannot parse, unbounded queries, oversized bodies,
foreign origins), kept so the fix stays.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet import MAX_QUERIES, MAX_QUERY_CHARS, Index, MindnetError, NotFoundError, SearchFilters
from mindnet.api import SUGGEST_CHARS
from mindnet.server.app import MAX_BODY_BYTES, Guard, create_app
from mindnet.service import ResidentState
from mindnet.store.embedded import _edge_filter

DATE_LIKE = st.from_regex(
    r"\A\d{4}-\d{1,2}-\d{1,2}([T t]\d{2}(:\d{2}(:\d{2}([.,]\d{1,9})?)?)?)?([Zz]|[+-]\d{2}(:?\d{2})?)?\Z")


# -- dates: the store's parser is the judge of what `check_date` lets through ----------------------------------


@given(st.one_of(DATE_LIKE, st.text(max_size=40)), st.booleans())
def test_a_date_bound_is_refused_in_words_or_parsed_by_the_store(value: str, upper: bool) -> None:
    """`from=yesterday` was a 500 (fixed on main by `check_date`); no other spelling may reach Edge's parser."""
    try:
        filters = SearchFilters(created_to=value) if upper else SearchFilters(created_from=value)
    except MindnetError as exc:
        assert "needs an ISO date" in str(exc) and repr(value) in str(exc)
        return
    flt = filters.to_filter()
    if flt is not None:
        _edge_filter(flt)  # Qdrant Edge's own parser: raised ValueError for `yesterday`, `20240101`, `2024-13-45`


# -- the API's own bounds: every interface (HTTP, MCP, CLI) gets them from `Index` -----------------------------


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("bounds") / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha links to [[b]] about rank fusion.\n\n## Part\n\nMore.\n",
                               encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta explains rank fusion and scores.\n", encoding="utf-8")
    (tmp_path_factory.getbasetemp() / "secret.md").write_text("# Secret\n\nOutside.\n", encoding="utf-8")
    long_lines = "".join(f"Line {i} of a long note about rank fusion.\n" for i in range(400))
    (root / "c.md").write_text(f"# Long\n\n{long_lines}", encoding="utf-8")
    with Index(root, embedder=FakeEmbedder()) as opened:
        opened.import_vault()
        yield opened


def test_a_query_over_the_bound_is_refused_by_every_entry_point(index: Index) -> None:
    """The MCP search tool had no bound: 200,000 characters were searched and echoed (400 KB back)."""
    too_long = "fusion " * (MAX_QUERY_CHARS // 7 + 1)
    for call in (lambda: index.search(too_long), lambda: index.search_many(["rank", too_long]),
                 lambda: index.context(too_long)):
        with pytest.raises(MindnetError, match=f"at most {MAX_QUERY_CHARS} characters"):
            call()
    with pytest.raises(MindnetError, match=f"at most {MAX_QUERIES} queries"):
        index.search_many(["rank"] * (MAX_QUERIES + 1))
    assert index.search("rank fusion " * (MAX_QUERY_CHARS // 12), k=1)  # at the bound it still searches


def test_a_section_name_over_the_bound_is_refused_not_echoed(index: Index) -> None:
    """A 500,000-character section came back inside the 'no section' message."""
    with pytest.raises(MindnetError, match="section name may have at most") as caught:
        index.read("a", section="x" * 500_000)
    assert len(str(caught.value)) < 200
    assert index.read("a", section="Part")["text"].endswith("More.")


@pytest.mark.parametrize("ref", ["../secret.md", "../secret", "/etc/passwd", "sub\\..\\..\\secret.md", "a\x00"])
def test_the_graph_refuses_a_ref_leaving_the_vault_as_note_and_read_do(index: Index, ref: str) -> None:
    """`graph` alone answered `../secret.md` with 'no note' and the vault's closest names."""
    for call in (index.graph, index.note, index.read):
        with pytest.raises(MindnetError) as caught:
            call(ref)
        assert not isinstance(caught.value, NotFoundError), call
    with pytest.raises(MindnetError, match="at most"):
        index.graph("x" * 1_001)


def test_the_mcp_schema_says_the_api_bound() -> None:
    from mindnet.mcp.tools import MAX_QUERIES as TOOL_QUERIES

    assert TOOL_QUERIES == MAX_QUERIES


def test_a_long_miss_compares_a_bounded_prefix(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1,000-character ref made the closest-name search cost 12 s per 10,000 notes (a step bound, no clock)."""
    import difflib  # mindnet.api imports it where a miss needs it: the module's attribute is what it calls

    compared: list[int] = []
    real = difflib.SequenceMatcher

    def counting(junk: object, a: str, b: str) -> difflib.SequenceMatcher[str]:
        compared.append(len(a) * len(b))
        return real(None, a, b)

    monkeypatch.setattr(difflib, "SequenceMatcher", counting)
    with pytest.raises(NotFoundError) as caught:
        index.note("alphx" * 200)
    assert compared and max(compared) <= SUGGEST_CHARS * max(len("a.md"), len("Alpha"), len("Beta"))
    assert caught.value.suggestions[0]["note_id"] == "a"  # the prefix still finds the likely note


# -- the HTTP guard and the error shape, driven in-process over ASGI (no socket) ---------------------------------


async def _asgi(app: Any, method: str, path: str, headers: dict[str, str], body: list[bytes]) -> tuple[int, Any]:
    """One request through an ASGI app: `body` as its chunks (more than one: sent as Transfer-Encoding: chunked)."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": raw,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 7341)}
    messages = [{"type": "http.request", "body": part, "more_body": i < len(body) - 1} for i, part in enumerate(body)]
    messages = messages or [{"type": "http.request", "body": b"", "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(data) if data else None


def request(app: Any, method: str, path: str, headers: dict[str, str] | None = None,
            body: list[bytes] | None = None) -> tuple[int, Any]:
    return asyncio.run(_asgi(app, method, path, {"host": "127.0.0.1:7341", **(headers or {})}, body or []))


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """An app that reads the whole body and says how long it was."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps({"size": size}).encode()})


def guarded(**options: Any) -> Guard:
    return Guard(_echo, allowed_hosts=frozenset(), api_key=options.get("api_key"),
                 any_host=options.get("any_host", False))


CHUNKED = {"transfer-encoding": "chunked", "content-type": "application/json"}


def test_an_oversized_chunked_body_is_a_413_before_the_app_reads_it() -> None:
    """Failing the app's receive made FastAPI answer 400 'error parsing the body' and /mcp a bare 500."""
    parts = [b" " * 65_536] * (MAX_BODY_BYTES // 65_536 + 2)
    status, body = request(guarded(), "POST", "/mcp", CHUNKED, parts)
    assert status == 413 and "request body over" in body["error"]
    status, body = request(guarded(), "POST", "/mcp", CHUNKED, [b"{", b"}"])
    assert (status, body) == (200, {"size": 2})  # a small chunked body reaches the app whole


def test_every_error_of_the_api_is_one_error_object(index: Index) -> None:
    """Routing's 404/405 and the 400 for an unparsable body said {"detail": ...}; the client reads "error"."""
    from mindnet import Resident

    resident = Resident(index.vault.root, index.settings, watch=False, e5=False, embedder=FakeEmbedder())
    resident.index = index  # the module's open index: a second one may not open the store
    app = create_app(resident)
    json_body = {"content-type": "application/json"}
    for method, path, headers, body, code in [
        ("GET", "/api/no-such-route", {}, [], 404),
        ("DELETE", "/api/search", {}, [], 405),
        ("POST", "/api/context", json_body, [b"[" * 100_000 + b"]" * 100_000], 400),  # deeper than JSON parsers go
        ("POST", "/api/context", json_body, [b'{"query": "\xff\xfe"}'], 400),  # not UTF-8
    ]:
        status, answer = request(app, method, path, headers, body)
        assert status == code and set(answer) == {"error"} and answer["error"], (path, answer)


OWN = "127.0.0.1:7341"


@given(st.one_of(st.text(st.characters(max_codepoint=255, exclude_characters="\r\n\x00"), max_size=40),
                 st.sampled_from(["null", "http://127.0.0.1:3000", "http://localhost:7341", "http://[::1", "file://",
                                  "http://127.0.0.1:7341.evil.io", f"http://{OWN}", f"HTTPS://{OWN}/"])))
def test_only_the_servers_own_origin_may_send_a_request(origin: str) -> None:
    """`null` (a sandboxed frame, a cross-site redirect) and other ports passed: a text/plain POST started an import."""
    status, body = request(guarded(), "POST", "/api/import", {"origin": origin, "content-type": "text/plain"}, [b"x"])
    own = origin.strip().lower().removesuffix("/") in (f"http://{OWN}", f"https://{OWN}")
    assert status == (200 if own else 403), body
    if not own:
        assert body["error"].startswith("cross-origin request from")


def test_the_own_origin_passes_and_a_second_origin_header_is_checked_too() -> None:
    assert request(guarded(), "GET", "/api/status", {"origin": f"http://{OWN}"})[0] == 200
    scope_headers = [(b"host", OWN.encode()), (b"origin", b"http://evil.example"), (b"origin", f"http://{OWN}".encode())]

    async def twice() -> int:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await guarded()({"type": "http", "method": "GET", "path": "/api/status", "headers": scope_headers},
                        receive, send)
        return int(sent[0]["status"])

    assert asyncio.run(twice()) == 403  # the last header alone decided before


# -- slowloris: a request that never finishes arriving -----------------------------------------------------------


async def _slow_app(scope: Any, receive: Any, send: Any) -> None:
    """Answers after a while longer than the test's deadline: a request that has arrived is never cut."""
    if scope["type"] != "http":
        return
    await asyncio.sleep(1.0 if scope["path"] == "/slow" else 0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def deadline_server() -> Iterator[tuple[str, int]]:
    import socket
    import threading

    import uvicorn

    from mindnet.server import deadline_protocol

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config(_slow_app, http=deadline_protocol(0.3), log_config=None, access_log=False,
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    for _ in range(600):  # a step bound: 60 s at most
        if server.started:
            break
        threading.Event().wait(0.1)
    yield sock.getsockname()
    server.should_exit = True
    thread.join(60)
    sock.close()


def _closed_by_server(conn: Any) -> bool:
    """Whether the server ends the connection (empty read) before the generous socket timeout."""

    conn.settimeout(60)
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_request_head_that_never_ends_is_cut_and_a_slow_answer_is_not(deadline_server: tuple[str, int]) -> None:
    """Half a head, a byte now and then, held a connection (and a descriptor) for good."""
    import socket

    with socket.create_connection(deadline_server, timeout=60) as half:
        half.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert _closed_by_server(half)
    with socket.create_connection(deadline_server, timeout=60) as body:
        body.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nonly part")
        assert _closed_by_server(body)
    with socket.create_connection(deadline_server, timeout=60) as slow:  # the app takes longer than the deadline
        slow.sendall(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := slow.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")


# -- the API key -----------------------------------------------------------------------------------------------


KEY = "k3y-0f-the-vault"


def test_bound_to_every_interface_the_key_admits_any_host() -> None:
    """Bound to 0.0.0.0 every request from another machine named the server's LAN address or name: 421."""
    wildcard = guarded(api_key=KEY, any_host=True)
    right = {"authorization": f"Bearer {KEY}"}
    for host in ("192.168.1.5:7341", "notes-box.local:7341", "127.0.0.1:7341"):
        assert request(wildcard, "GET", "/api/status", {"host": host, **right})[0] == 200, host
    assert request(wildcard, "GET", "/api/status", {"host": "192.168.1.5:7341"})[0] == 421
    assert request(wildcard, "GET", "/api/status", {"host": "evil.example", "authorization": "Bearer nope"})[0] == 421
    assert request(wildcard, "GET", "/api/status")[0] == 401
    assert request(wildcard, "GET", "/api/health")[0] == 200  # the one route without the key
    # On loopback or a named address the Host check stays, key or not: a rebinding page may not even guess keys.
    assert request(guarded(api_key=KEY), "GET", "/api/status", {"host": "192.168.1.5:7341", **right})[0] == 421


@given(st.text(st.characters(max_codepoint=255, exclude_characters="\r\n\x00"), max_size=30))
def test_only_the_exact_key_opens_the_api(given_header: str) -> None:
    status, body = request(guarded(api_key=KEY), "GET", "/api/status", {"authorization": given_header})
    assert status == (200 if given_header == f"Bearer {KEY}" else 401), body
    if status == 401:
        assert KEY not in body["error"]  # never echoed


@pytest.mark.parametrize("key", ["schlüssel", " k3y", "k3y\n", "k\x00y", ""])
def test_a_key_no_header_can_carry_is_refused_at_start(key: str) -> None:
    from mindnet.server import check_binding

    with pytest.raises(MindnetError, match="printable ASCII" if key else "MINDNET_API_KEY"):
        check_binding("0.0.0.0" if not key else "127.0.0.1", key or None)
    check_binding("127.0.0.1", KEY)


# -- read: an agent's answer stays bounded -------------------------------------------------------------------


@given(st.lists(st.text(st.characters(exclude_characters="\r\n"), max_size=30), min_size=1, max_size=20),
       st.sampled_from(["\n", "\r\n", "\r"]), st.integers(0, 19), st.integers(1, 120))
def test_a_clipped_read_is_whole_lines_within_the_bound(lines: list[str], eol: str, first: int, limit: int) -> None:
    from mindnet.api import _clipped, _lines
    from mindnet.text import line_starts

    text = eol.join(lines) + eol
    starts = line_starts(text)
    first = min(first, len(starts) - 1)
    last, clipped = _clipped(text, starts, first, limit)
    assert first <= last < len(starts) and len(clipped) <= limit
    whole = _lines(text, starts, first, last)
    assert clipped == whole or (last == first and whole.startswith(clipped))  # only a too-long first line is cut


def test_a_long_note_is_read_in_bounded_pieces_that_join_up(index: Index) -> None:
    """A 4 MB note came back whole through the MCP read tool, twice (text and structured): 8.8 MB."""
    whole = index.read("c")
    assert not whole["truncated"]
    pieces, start = [], whole["line_start"]
    for _ in range(100):  # a step bound
        part = index.read("c", lines=(start, whole["line_end"]), max_chars=1_000)
        assert len(part["text"]) <= 1_000
        pieces.append(part["text"])
        if not part["truncated"]:
            break
        start = part["line_end"] + 1
    assert "\n".join(pieces) == whole["text"]


@given(st.lists(st.tuples(st.text(max_size=50), st.text(max_size=50)), max_size=60), st.integers(1, 2_000))
def test_the_section_list_beside_a_bounded_text_is_bounded_too(names: list[tuple[str, str]], limit: int) -> None:
    """A note of 50,000 headings made the section list the bulk of a 40,000-character read answer."""
    from mindnet.api import _sections_within

    sections = [{"path": p, "title": t, "line": i, "end_line": i} for i, (p, t) in enumerate(names)]
    kept = _sections_within(sections, limit)
    assert kept == sections[:len(kept)]
    assert sum(len(s["path"]) + len(s["title"]) + 40 for s in kept) <= limit
    assert len(kept) == len(sections) or sum(len(s["path"]) + len(s["title"]) + 40
                                             for s in sections[:len(kept) + 1]) > limit


def test_the_mcp_read_tool_asks_for_a_bounded_text_and_says_where_to_go_on() -> None:
    from mindnet.mcp.tools import READ_CHARS, tool_functions

    asked: dict[str, Any] = {}

    class Backend:
        def read(self, ref: str, **options: Any) -> dict[str, Any]:
            asked.update(options)
            return {"note": {"title": "Long", "path": "c.md"}, "section": None, "line_start": 3, "line_end": 90,
                    "text": "x", "truncated": True, "sections": []}

    read = next(fn for fn in tool_functions(Backend()) if fn.__name__ == "read")  # type: ignore[arg-type]
    result = read(note="c")
    assert asked["max_chars"] == READ_CHARS <= 50_000
    assert "line_start=91" in result.content[0].text and result.structured_content["truncated"] is True


# -- waiting for an import holds no request thread ----------------------------------------------------------------


class _SlowImports:
    """A resident whose imports finish only when the test says so."""

    index = None
    state = ResidentState()  # warm: `/api/health` says "ok"

    def __init__(self) -> None:
        from concurrent.futures import Future

        self.future: Future[Any] = Future()

    def request_import(self, full: bool = False) -> Any:
        return self.future


def test_clients_waiting_for_an_import_leave_the_server_free() -> None:
    """60 concurrent POST /api/import held all 40 threads of the pool: /api/health waited 8 s (forever here)."""
    from types import SimpleNamespace

    resident = _SlowImports()
    app = create_app(resident)  # type: ignore[arg-type]

    async def scenario() -> tuple[int, list[int]]:
        host = {"host": "127.0.0.1:7341", "content-type": "application/json"}
        imports = [asyncio.create_task(_asgi(app, "POST", "/api/import", host, [b'{"full": true}']))
                   for _ in range(60)]
        await asyncio.sleep(0)
        health, _ = await asyncio.wait_for(_asgi(app, "GET", "/api/health", host, []), 60)
        assert not any(task.done() for task in imports)  # they still wait, and yet the server answered
        resident.future.set_result(SimpleNamespace(as_dict=lambda: {"notes_new": 0}))
        done = await asyncio.wait_for(asyncio.gather(*imports), 60)
        return health, [status for status, _ in done]

    health, statuses = asyncio.run(scenario())
    assert health == 200 and statuses == [200] * 60


@pytest.mark.parametrize("field", ["type", "tags", "note_id"])
def test_a_list_filter_has_a_bounded_number_of_values(field: str) -> None:
    """140,000 tags took 1.4 s within /mcp's 1 MB body; `mindnet mcp` on stdio has no body limit at all."""
    from mindnet.search.filters import MAX_FILTER_VALUES

    values = tuple(f"v{i}" for i in range(MAX_FILTER_VALUES + 1))
    with pytest.raises(MindnetError, match=f"{field}: at most {MAX_FILTER_VALUES} values"):
        SearchFilters(**{field: values})
    assert SearchFilters(**{field: values[:-1]}).to_filter() is not None


def test_a_note_that_fails_under_the_server_is_logged_once_by_name(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A save that broke a note said only `import notes_new=0 ...` in serve's log: the problem line is a
    warning now, once, when it first appears (not again on every later import)."""
    import logging

    from mindnet import Resident, Settings

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "ok.md").write_text("# Ok\n\nfine words\n", encoding="utf-8")
    resident = Resident(vault, Settings(), watch=False, e5=False, embedder=FakeEmbedder())
    caplog.set_level(logging.WARNING, logger="mindnet.serve")
    try:
        resident.start().result(timeout=120)
        (vault / "bad.md").write_bytes(b"# Bad\n\x00\n")
        resident.request_import().result(timeout=120)
        resident.request_import().result(timeout=120)
    finally:
        resident.stop()
    said = [r.getMessage() for r in caplog.records if "bad.md" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("bad.md:") and ": error: " in said[0], said
