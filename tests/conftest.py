"""Shared test setup: make `tests/fakes.py` importable as `fakes` from every test module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


import pytest


@pytest.fixture(autouse=True)
def _user_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never write to the user's `~/.cache`: the unpacked language model goes to one folder
    of this session's temp tree (shared by all tests, so it is unpacked once)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "user-cache"))
