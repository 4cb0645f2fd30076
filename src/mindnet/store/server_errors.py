"""Server errors as `StoreError`s: one line naming the URL, the operation and the server's reason.

qdrant-client raises httpx, gRPC, pydantic and its own `UnexpectedResponse` errors, and the
in-process engine plain `ValueError`s; none of them should reach a user as a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..errors import StoreError

_Method = TypeVar("_Method", bound=Callable[..., Any])


def server_call(operation: str) -> Callable[[_Method], _Method]:
    """Turn whatever a server store's method raises into a `StoreError` naming `self.url`, the operation
    and, for a collection primitive (its first argument), the collection."""

    def wrap(method: _Method) -> _Method:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except StoreError:
                raise
            except Exception as exc:
                what = f"{operation} {args[0]!r}" if operation.endswith("collection") and args else operation
                raise StoreError(f"Qdrant at {self.url}: cannot {what}: {server_reason(exc)}") from exc

        return cast(_Method, call)

    return wrap


def server_reason(exc: Exception) -> str:
    """The useful part of a client error: the HTTP status and the server's message, else the text."""
    status = getattr(exc, "status_code", None)
    if status is not None:
        content = getattr(exc, "content", None)
        detail = content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content or "")
        with contextlib.suppress(ValueError, KeyError, TypeError):  # Qdrant's {"status": {"error": …}}
            detail = str(json.loads(detail)["status"]["error"])
        return f"HTTP {status}: {' '.join(detail.split())[:300]}"
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]
