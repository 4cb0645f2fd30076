"""Server stores (issue 13, finding 6): an import lease in the server, dry runs that create nothing,
and every server error as one `StoreError` line naming the URL and the operation.

qdrant-client's in-process engine (`:memory:`) stands in for a server; the same checks run against
a real one in `test_store.py` when MINDNET_TEST_QDRANT_URL is set.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fakes import FakeEmbedder
from mindnet import cli
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.errors import StoreError
from mindnet.store import ClientStore, ImportLease, StoreSchema, VectorSpec

SCHEMA = StoreSchema(vectors=(VectorSpec("use", "fake@1", 32),), chunking_hash="c1")


class Clock:
    """A settable clock: lease expiry without waiting."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


SERVER_URL = os.environ.get("MINDNET_TEST_QDRANT_URL")


@pytest.fixture(params=["memory", "server"])
def server(request: pytest.FixtureRequest) -> Iterator[ClientStore]:
    """qdrant-client's in-process engine, and a real server when MINDNET_TEST_QDRANT_URL names one."""
    if request.param == "server" and not SERVER_URL:
        pytest.skip("set MINDNET_TEST_QDRANT_URL to a Qdrant server (see docs/development.md) to run the lease "
                    "contract against it")
    url = ":memory:" if request.param == "memory" else str(SERVER_URL)
    store = ClientStore(url, prefix=f"t{uuid.uuid4().hex[:10]}", api_key=os.environ.get("MINDNET_TEST_QDRANT_API_KEY"))
    store.lease()  # creates the meta collection the leases below share
    yield store
    store._client.delete_collection(store._meta_name())
    for name in ("notes", "chunks", "edges"):
        if store._exists(name):
            store._drop(name)
    store.close()


def _lease(store: ClientStore, clock: Clock, holder: str, ttl: float = 60.0) -> ImportLease:
    return ImportLease(store._client, store._meta_name(), store.url, ttl=ttl, holder=holder, clock=clock)


def test_a_second_importer_is_refused_and_told_who_holds_the_lease(server: ClientStore) -> None:
    clock = Clock()
    with _lease(server, clock, "laptop import"):
        other = _lease(server, clock, "desktop import")
        with pytest.raises(StoreError, match=r"another import is running on .+: laptop import \(pid \d+ on "):
            other.take()
    with _lease(server, clock, "desktop import") as taken:  # released on exit: the next one gets it
        assert taken.read().holder == "desktop import"  # type: ignore[union-attr]
    assert _lease(server, clock, "x").read() is None


def test_a_stale_lease_expires_and_its_holder_hears_it_lost(server: ClientStore) -> None:
    clock = Clock()
    crashed = _lease(server, clock, "crashed import", ttl=60)
    crashed.take()
    clock.now += 30
    with pytest.raises(StoreError, match="expires in 30 s"):
        _lease(server, clock, "early").take()
    clock.now += 31
    successor = _lease(server, clock, "next import")
    successor.take()
    assert successor.read().holder == "next import"  # type: ignore[union-attr]
    assert crashed.renew() is False
    assert crashed.lost is not None and crashed.lost.holder == "next import"
    crashed.release()  # releases only its own record: the successor keeps the lease
    assert successor.read().holder == "next import"  # type: ignore[union-attr]


def test_renewal_extends_only_our_own_lease(server: ClientStore) -> None:
    clock = Clock()
    lease = _lease(server, clock, "long import", ttl=60)
    lease.take()
    clock.now += 50
    assert lease.renew() is True
    assert lease.read().expires_at == clock.now + 60  # type: ignore[union-attr]
    clock.now += 59  # 109 s after taking it, still held thanks to the renewal
    with pytest.raises(StoreError):
        _lease(server, clock, "other").take()


def test_the_lease_is_renewed_in_the_background_while_held(server: ClientStore) -> None:
    lease = server.lease(ttl=60)
    with lease:
        assert lease._thread is not None and lease._thread.is_alive()
    assert not lease._thread.is_alive()
    assert lease.read() is None


def test_losing_the_lease_mid_import_fails_the_import(server: ClientStore) -> None:
    clock = Clock()
    lease = _lease(server, clock, "slow import", ttl=60)
    with pytest.raises(StoreError, match=r"lease on .+ was lost to fast import"), lease:
        clock.now += 61
        _lease(server, clock, "fast import").take()
        assert lease.renew() is False


def test_a_full_reimport_keeps_its_lease(server: ClientStore) -> None:
    server.ensure(SCHEMA)
    with server.lease() as lease:
        server.reset(SCHEMA)  # `--full` drops the schema record, not the lease beside it
        assert lease.renew() is True
    assert server.meta() == SCHEMA


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha links [[b]].\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta text.\n", encoding="utf-8")
    return root


def test_index_takes_the_servers_lease_where_it_takes_the_import_lock(tmp_path: Path) -> None:
    settings = Settings(qdrant_url=":memory:", store_path=str(tmp_path / "caches"))
    with Index(_vault(tmp_path), settings, embedder=FakeEmbedder()) as index:
        store = index.store()
        assert isinstance(store, ClientStore)
        elsewhere = store.lease()
        elsewhere.holder = "mindnet import on the other machine"
        with elsewhere, pytest.raises(StoreError, match="another import is running on :memory:: mindnet import on"):
            index.import_vault()
        assert index.import_vault().notes_new == 2
        assert elsewhere.read() is None  # released after the import


def test_dry_run_against_a_server_creates_no_collection(tmp_path: Path) -> None:
    settings = Settings(qdrant_url=":memory:", store_path=str(tmp_path / "caches"))
    with Index(_vault(tmp_path), settings, embedder=FakeEmbedder()) as index:
        summary = index.import_vault(dry_run=True)
        assert summary.notes_new == 2
        assert index.store()._client.get_collections().collections == []  # type: ignore[attr-defined]


# --- server errors ------------------------------------------------------------------------------------


def test_an_unreachable_server_is_a_store_error_naming_url_and_operation() -> None:
    store = ClientStore("http://127.0.0.1:9", prefix="t", timeout=5)
    with pytest.raises(StoreError, match=r"^Qdrant at http://127\.0\.0\.1:9: cannot read the schema record: "):
        store.meta()
    with pytest.raises(StoreError, match=r"^Qdrant at http://127\.0\.0\.1:9: cannot create the meta collection: "):
        store.lease()


class _Failing(BaseHTTPRequestHandler):
    """A loopback stand-in for a server that answers every request with Qdrant's error shape."""

    def _fail(self) -> None:
        body = json.dumps({"status": {"error": "Wrong input: Collection `t_notes` is broken"}, "time": 0}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _fail

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def failing_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_server_error_names_status_and_message(failing_url: str) -> None:
    store = ClientStore(failing_url, prefix="t", timeout=5)
    with pytest.raises(StoreError) as caught:
        store.count("notes")  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"Qdrant at {failing_url}: cannot ")
    assert "HTTP 500: Wrong input: Collection `t_notes` is broken" in message


def test_the_cli_reports_a_server_error_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = _vault(tmp_path)
    monkeypatch.setenv("MINDNET_QDRANT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("MINDNET_DEBUG", raising=False)
    with pytest.raises(SystemExit) as done:
        cli.main(["status", "--vault", str(vault)])
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: Qdrant at http://127.0.0.1:9: cannot read the schema record: ")
