"""The CLI's side of a running `mindnet serve`: JSON requests over the store's Unix socket (or its URL).

Only the standard library, so a `mindnet search` that a server answers costs a Python start, the
CLI's imports and one request — no Qdrant, no model. The answers have the shapes of `--json`.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import Any
from urllib.parse import urlencode, urlsplit

from . import MindnetError, NotFoundError, ServerAddress

TIMEOUT = 3600.0
"""Seconds to wait for an answer: an import through the server may take minutes on a large vault."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


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

    def _connection(self) -> http.client.HTTPConnection:
        if self.address.socket:
            return _UnixConnection(self.address.socket, self.timeout)
        parts = urlsplit(self.address.url)
        return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=self.timeout)

    def _request(self, method: str, target: str, body: bytes | None) -> Any:
        headers = {"Accept": "application/json", "Host": "localhost"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key and not self.address.socket:
            headers["Authorization"] = f"Bearer {self.api_key}"
        conn = self._connection()
        try:
            conn.request(method, target, body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except OSError as exc:
            raise MindnetError(f"the server at {self.address.url} did not answer: {exc}") from None
        finally:
            conn.close()
        try:
            data = json.loads(raw or b"null")
        except ValueError:
            raise MindnetError(f"the server at {self.address.url} sent no JSON (HTTP {response.status})") from None
        if response.status == 404 and isinstance(data, dict):
            raise NotFoundError(str(data.get("error", "not found")), data.get("suggestions"))
        if response.status >= 400:
            message = data.get("error") if isinstance(data, dict) else None
            raise MindnetError(f"server: {message or f'HTTP {response.status}'}")
        return data
