"""The CLI's HTTP client reads what a server sends: lengths, chunks, errors (issue 16)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindnet import MindnetError
from mindnet.client import _parse_response


def test_a_response_with_a_length_is_read_whole() -> None:
    raw = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"a": 1}'
    assert _parse_response(raw, "u") == (200, b'{"a": 1}')


def test_a_chunked_response_is_joined() -> None:
    raw = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n4;x=y\r\n: 1}\r\n0\r\n\r\n"
    assert _parse_response(raw, "u") == (404, b'{"a": 1}')


@pytest.mark.parametrize("raw", [b"", b"garbage", b"NOT-HTTP\r\n\r\n"])
def test_no_answer_is_one_clear_error(raw: bytes) -> None:
    with pytest.raises(MindnetError, match="the server at u"):
        _parse_response(raw, "u")


@given(st.binary(max_size=60))
def test_any_chunked_body_is_read_or_one_clear_error(body: bytes) -> None:
    """A malformed chunk size (from whatever listens at server.json's address) was a ValueError traceback."""
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    try:
        status, _ = _parse_response(raw, "u")
    except MindnetError as exc:
        assert str(exc) == "the server at u sent a malformed chunked answer"
    else:
        assert status == 200
