"""`mindnet serve`: one resident process that owns a vault's index and answers over HTTP.

It listens on a loopback TCP port (the page, HTTP clients) and on a Unix socket in the store
folder (the CLI); `server.json` beside the socket says where. Everything it answers comes from
`Resident` and `Index`; this package only binds sockets, checks requests and shuts down cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import (
    MindnetError,
    Resident,
    ServerAddress,
    Settings,
    find_server,
    prepare_store_dir,
    remove_address,
    socket_path,
    store_dir,
    write_address,
)

DEFAULT_PORT = 7341
WILDCARDS = ("0.0.0.0", "::")
"""Addresses that listen on every interface: the server cannot list the names it is reached by."""
REQUEST_SECONDS = 20.0
"""How long a client may take to send a request, head and body (from connecting, or from the last answer)."""
log = logging.getLogger("mindnet.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, api_key: str | None) -> None:
    """Refuse a non-loopback address without an API key: anyone on the network could read the vault.

    A key that an HTTP header cannot carry as it is (non-ASCII: the guard compares UTF-8, clients
    send Latin-1; spaces at the ends: clients strip them) could never be matched; it is refused here.
    """
    if api_key is not None and not (api_key.isascii() and api_key.isprintable() and api_key.strip() == api_key):
        raise MindnetError("MINDNET_API_KEY must be printable ASCII without spaces at either end (it travels "
                           "in an HTTP header, which carries nothing else faithfully)")
    if not is_loopback(host) and not api_key:
        raise MindnetError(
            f"--host {host} exposes the vault beyond this machine: set MINDNET_API_KEY (clients send it as "
            "'Authorization: Bearer KEY'), or keep the default 127.0.0.1"
        )


def already_running(folder: Path) -> None:
    """A second server on one store says where the first one runs (the store is single-process)."""
    running = find_server(folder)
    if running is not None:
        raise MindnetError(f"mindnet serve already runs for {folder} at {running.url} (pid {running.pid})")


def serve(
    vault: Path,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    api_key: str | None = None,
    watch: bool = True,
    e5: bool = True,
    resident: Resident | None = None,
    ready: Any = None,
) -> None:
    """Run until SIGINT/SIGTERM; then finish the write in flight and close the store.

    Args:
        port: TCP port; 0 picks a free one (tests), and `server.json` tells which.
        resident: an unstarted resident to serve (tests inject models this way).
        ready: called with the `ServerAddress` once the server is warm (`Resident.warm_up`): both
            sockets listened from the start (health answered "starting"), now a search is fast.

    Raises:
        MindnetError: a server already runs for the store, or the binding would be unsafe.
    """
    import uvicorn

    from ..mcp import http_app
    from .app import Guard, Routed, create_app

    check_binding(host, api_key)
    folder = store_dir(vault, settings)
    already_running(folder)
    resident = resident or Resident(vault, settings, watch=watch, e5=e5)
    resident.index.store()  # fails now, not in a thread, when another process holds the store
    prepare_store_dir(folder)  # the socket and the address file go there; opening a store creates nothing
    tcp = _tcp_socket(host, port)
    url = f"http://{_url_host(host)}:{tcp.getsockname()[1]}"
    uds_path = socket_path(folder)
    uds = _unix_socket(uds_path) if uds_path is not None else None
    address = ServerAddress(url=url, socket=str(uds_path) if uds else None, pid=os.getpid(), host=host,
                            started=time.time(), vault=str(vault))
    resident.begin_warm_up()
    resident.start()
    mcp_app, mcp_running = http_app(resident)
    app = Routed(create_app(resident, info={"url": url, "pid": os.getpid(), "socket": address.socket}),
                 {"/mcp": mcp_app})
    wildcard = host in WILDCARDS
    extra_hosts = frozenset() if is_loopback(host) or wildcard else frozenset({host})
    protocol = deadline_protocol()
    servers = [(_QuietServer(uvicorn.Config(Guard(app, allowed_hosts=extra_hosts, api_key=api_key, any_host=wildcard),
                                            http=protocol,
                                            log_config=None, access_log=False, lifespan="off")), tcp)]
    if uds is not None:
        servers.append((_QuietServer(uvicorn.Config(Guard(app, allowed_hosts=extra_hosts, api_key=api_key,
                                                          trusted=True), http=protocol,
                                                    log_config=None, access_log=False, lifespan="off")), uds))
    try:
        with _stop_on_signals([s for s, _ in servers]):
            asyncio.run(_serve_all(servers, lambda: _published(folder, address, resident, ready), mcp_running))
    finally:
        log.info("shutting down: finishing the write in flight")
        resident.stop()
        remove_address(folder, os.getpid())
        for _, sock in servers:
            sock.close()


def _published(folder: Path, address: ServerAddress, resident: Resident, ready: Any) -> None:
    """Publish the address at once (a command finds the server, and its request waits for what it
    needs), then warm up on a thread and say ready: the line on stderr, `/api/health` "ok"."""
    write_address(folder, address)

    def announce() -> None:
        sys.stderr.write(f"mindnet serve: {address.url} (vault {address.vault}; Ctrl-C stops)\n")
        if ready is not None:
            ready(address)

    threading.Thread(target=resident.warm_up, args=(announce,), name="mindnet-warm-up", daemon=True).start()


async def _serve_all(servers: list[tuple[Any, socket.socket]], on_ready: Any,
                     running: Callable[[], contextlib.AbstractAsyncContextManager[None]]) -> None:
    """Every socket's server inside `running` (the MCP endpoint's session manager)."""
    once = _OncePerProcess()
    logging.getLogger("uvicorn.error").addFilter(once)
    try:
        async with running():
            tasks = [asyncio.create_task(server.serve(sockets=[sock]), context=_socket_context(i > 0))
                     for i, (server, sock) in enumerate(servers)]
            while not all(server.started for server, _ in servers):
                if any(t.done() for t in tasks):
                    break
                await asyncio.sleep(0.01)
            else:
                on_ready()
            await asyncio.gather(*tasks)
    finally:
        logging.getLogger("uvicorn.error").removeFilter(once)


_ANOTHER_SOCKET: contextvars.ContextVar[bool] = contextvars.ContextVar("mindnet_another_socket", default=False)
"""True inside the uvicorn server of every socket but the first (see `_OncePerProcess`)."""


def _socket_context(another: bool) -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(_ANOTHER_SOCKET.set, another)
    return context


class _OncePerProcess(logging.Filter):
    """uvicorn's lifecycle lines ("Started server process", "Shutting down", "Finished server
    process") once per process, not once per socket.

    Why: serve runs one uvicorn server per socket (TCP for the page, the Unix socket for the CLI,
    each behind its own guard), and each logged the same lines to the one `uvicorn.error` logger,
    so every line came twice (issue 28). The other sockets' warnings and errors still pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO or not _ANOTHER_SOCKET.get()


def deadline_protocol(seconds: float = REQUEST_SECONDS) -> type[Any]:
    """uvicorn's h11 protocol closing a connection whose client has not sent a whole request in `seconds`.

    uvicorn bounds only the idle time between requests: a client that sends half a request head
    and then a byte now and then (slowloris) held its connection for good, and 400 of them held
    400 descriptors; enough would leave the process none to open its store with. The clock starts
    when a connection opens and again after each answer; a request that has arrived whole is
    never cut, however long it runs (an import).
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class RequestDeadline(H11Protocol):  # type: ignore[misc]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._late)

        def _late(self) -> None:
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                self.transport.close()

    return RequestDeadline


class _QuietServer:
    """uvicorn's server without its own signal handling: `serve()` stops every socket on one signal."""

    def __new__(cls, config: Any) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

        return Server(config)


@contextlib.contextmanager
def _stop_on_signals(servers: list[Any]) -> Iterator[None]:
    def stop(_signum: int, _frame: Any) -> None:
        for server in servers:
            server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _tcp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise MindnetError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (try --port)") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _unix_socket(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a stale socket of a killed server (the address check said nobody answers)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # owner only: the socket needs no API key
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _url_host(host: str) -> str:
    if host in WILDCARDS:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
