"""Where the resident server of a store listens: an address file and a Unix socket in the store folder.

`mindnet serve` writes `server.json` once its sockets are bound and removes it on a clean exit.
Every other command reads it first: a live server answers in milliseconds, while opening the
store takes a second and is impossible anyway while the server holds it (Qdrant Edge is
single-process). A server killed with `kill -9` leaves the file behind: it is recognised as stale
(the socket refuses, the pid is gone) and removed.

Only the standard library is used, so a CLI call pays nothing for the check.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ADDRESS_FILE = "server.json"
SOCKET_FILE = "server.sock"
_SOCKET_PATH_MAX = 100
"""A Unix socket path must fit in `sockaddr_un` (108 bytes on Linux, 104 on macOS)."""


@dataclass(frozen=True, slots=True)
class ServerAddress:
    """How to reach a running server: its TCP URL (for browsers and HTTP clients) and its socket."""

    url: str
    socket: str | None
    """The Unix socket path, or None where the platform or the path length does not allow one."""
    pid: int
    host: str
    started: float
    vault: str


def socket_path(folder: Path) -> Path | None:
    """The socket a server of this store folder listens on, or None where none can be made."""
    if not hasattr(socket, "AF_UNIX"):
        return None
    path = folder.resolve() / SOCKET_FILE
    return path if len(os.fsencode(path)) < _SOCKET_PATH_MAX else None


def write_address(folder: Path, address: ServerAddress) -> None:
    """Publish the address atomically, so a reader never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{ADDRESS_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(asdict(address)), encoding="utf-8")
    os.replace(tmp, folder / ADDRESS_FILE)


def remove_address(folder: Path, pid: int | None = None) -> None:
    """Remove the address file (only this process's own, when `pid` is given) and the socket."""
    current = read_address(folder)
    if pid is not None and current is not None and current.pid != pid:
        return
    for name in (ADDRESS_FILE, SOCKET_FILE):
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()


def read_address(folder: Path) -> ServerAddress | None:
    try:
        raw = json.loads((folder / ADDRESS_FILE).read_text(encoding="utf-8"))
        return ServerAddress(**raw)
    except (OSError, ValueError, TypeError):
        return None


def find_server(folder: Path, timeout: float = 0.5) -> ServerAddress | None:
    """The live server of this store folder, or None; a stale address file is removed on the way."""
    address = read_address(folder)
    if address is None:
        return None
    if _answers(address, timeout):
        return address
    if not _pid_alive(address.pid) or time.time() - address.started > 30:
        remove_address(folder, address.pid)  # killed: nobody will clean up after it
    return None


def _answers(address: ServerAddress, timeout: float) -> bool:
    """Whether something accepts connections at the address (the socket first, else the TCP port)."""
    try:
        if address.socket:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(timeout)
                probe.connect(address.socket)
                return True
        host, port = _host_port(address.url)
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _host_port(url: str) -> tuple[str, int]:
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = rest.rpartition(":")
    return host.strip("[]"), int(port)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
