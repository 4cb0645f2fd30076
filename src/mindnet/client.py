"""The CLI's side of a running `mindnet serve`: JSON requests over the store's Unix socket (or its URL).

Only a socket and `json`, so a `mindnet search` that a server answers costs a Python start, the
CLI's imports and one request — no Qdrant, no model. The answers have the shapes of `--json`.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any
from urllib.parse import urlencode, urlsplit

from . import MindnetError, NotFoundError, ServerAddress

TIMEOUT = 3600.0
"""Seconds to wait for an answer: an import through the server may take minutes on a large vault."""


class Remote:
    """Requests to one server; errors come back as the `MindnetError` the server reported."""

    def __init__(self, address: ServerAddress, api_key: str | None = None, timeout: float = TIMEOUT) -> None:
        self.address = address
        self.api_key = api_key if api_key is not None else os.environ.get("MINDNET_API_KEY")
        self.timeout = timeout

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        query = urlencode({k: v for k, v in (params or {}).items() if v is not None}, doseq=True)
        return self._request("GET", f"{path}?{query}" if query else path, None)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, json.dumps(body).encode())

    def _request(self, method: str, target: str, body: bytes | None) -> Any:
        status, raw = self._exchange(method, target, body)
        try:
            data = json.loads(raw or b"null")
        except ValueError:
            raise MindnetError(f"the server at {self.address.url} sent no JSON (HTTP {status})") from None
        if status == 404 and isinstance(data, dict):
            raise NotFoundError(str(data.get("error", "not found")), data.get("suggestions"))
        if status >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise MindnetError(f"server: {message or f'HTTP {status}'}")
        return data

    def _exchange(self, method: str, target: str, body: bytes | None) -> tuple[int, bytes]:
        """One HTTP/1.1 request on a fresh connection, read to its end (`Connection: close`).

        Written on a plain socket rather than `http.client`, whose import pulls in `ssl`: a CLI
        call through the server should cost little more than Python's start.
        """
        lines = [f"{method} {target} HTTP/1.1", "Host: localhost", "Accept: application/json", "Connection: close"]
        if self.api_key and not self.address.socket:
            lines.append(f"Authorization: Bearer {self.api_key}")
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        try:
            with self._connect() as sock:
                sock.sendall(request)
                chunks = []
                while data := sock.recv(65536):
                    chunks.append(data)
        except OSError as exc:
            raise MindnetError(f"the server at {self.address.url} did not answer: {exc}") from None
        return _parse_response(b"".join(chunks), self.address.url)

    def _connect(self) -> socket.socket:
        if self.address.socket:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            sock.connect(self.address.socket)
            return sock
        parts = urlsplit(self.address.url)
        return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=self.timeout)


def _parse_response(raw: bytes, url: str) -> tuple[int, bytes]:
    """Status and body of an HTTP/1.1 response (Content-Length or chunked, as uvicorn sends)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise MindnetError(f"the server at {url} closed the connection without an answer")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(status_line.split(" ", 2)[1])
    except (IndexError, ValueError):
        raise MindnetError(f"the server at {url} sent no HTTP answer") from None
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        try:
            body = _dechunk(body)
        except ValueError:  # whatever listens at server.json's address may not be mindnet
            raise MindnetError(f"the server at {url} sent a malformed chunked answer") from None
    return status, body


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)
