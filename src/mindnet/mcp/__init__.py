"""`mindnet mcp`: the vault's index as an MCP server for LLM agents (stdio, and `/mcp` on `mindnet serve`).

Five read-only tools (`search`, `read`, `related`, `context`, `status`) over a backend: a running
`mindnet serve` for the store when there is one (the store is single-process), else a `Resident`
of this process that watches the vault. The handshake and the tool list come before anything
heavy: the resident starts, imports and warms up on a thread from the start, and a tool call that
comes before it is warm waits for it.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import MindnetError, Settings, find_server, last_overview, store_dir
from .backend import Backend, LocalBackend, RemoteBackend

if TYPE_CHECKING:
    from .. import Resident

log = logging.getLogger("mindnet.mcp")

__all__ = ["http_app", "run_stdio"]


def run_stdio(vault: Path, settings: Settings, *, e5: bool = True) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin (or SIGTERM); logs go to stderr.

    Without a `mindnet serve`, the index opens, imports and warms up on a thread once the SDK is
    loaded, while the handshake is answered; the instructions come from the overview the last import
    left in the store folder (`last_overview`), so the handshake needs neither the store nor a model
    (issue 26).
    """
    import anyio

    folder = store_dir(vault, settings)
    address = find_server(folder)
    backend: Backend
    if address is not None:
        from ..client import Remote

        log.info("using mindnet serve at %s", address.url)
        backend = RemoteBackend(Remote(address))
        overview = None
    else:
        def make() -> Resident:
            from .. import preload_models

            # The models load beside the index stack's imports (onnxruntime builds its sessions mostly outside
            # Python's lock); started only now, after the SDK's import, they would slow the handshake.
            loading = preload_models(settings, vault=vault)
            from .. import Resident  # the index stack (store, models' code), only for a local index

            return Resident(vault, settings, watch=True, e5=e5, loading=loading)

        backend = LocalBackend.starting(make)
        overview = last_overview(folder)
    from .tools import MindnetMCP, instructions  # the SDK first: the handshake needs it and nothing else

    if isinstance(backend, LocalBackend):
        backend.start()  # the index's imports and loads would only slow the SDK's own
    try:
        if overview is None:
            overview = backend.overview()
    except MindnetError as exc:
        log.warning("no overview of the vault: %s", exc)
        overview = {"vault": vault.resolve().name}
    server = MindnetMCP(backend, instructions(overview))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        backend.close()


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def http_app(resident: Resident) -> tuple[Any, Callable[[], AbstractAsyncContextManager[None]]]:
    """The Streamable HTTP app at `/mcp` over a running resident, and the context it needs to run in.

    Stateless, JSON answers: every request stands alone, so nothing is kept between an agent's
    calls and the server's `Guard` (Host, Origin, API key) checks each one. The SDK's own
    DNS-rebinding check is off because the `Guard` in front of it already does that job.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from .tools import MindnetMCP, instructions

    backend = LocalBackend(resident, owned=False)
    server = MindnetMCP(backend, instructions(backend.overview()))
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return app, server.session_manager.run
