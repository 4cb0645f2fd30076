"""Shared test setup: `tests/fakes.py` importable as `fakes`, and the one way to reach the shared corpora.

The corpora live beside the repository (`../shared/corpora`), so a fresh clone has none. `corpus()` is
the single gate: a test that needs a corpus folder asks for it here and is skipped, with the folder named,
when it is absent; under `CI=true` the same absence is a failure, so CI can never go green by skipping.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
"""`../shared/corpora` next to the repository, the layout the issues and bench scripts use."""


def corpus(relative: str = "") -> Path:
    """The corpus folder `relative` below CORPORA; skip (or fail under CI=true) when it is not there."""
    path = CORPORA / relative
    if path.is_dir():
        return path
    reason = f"corpus folder not found: {path} (clone the shared corpora next to the repository)"
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; CI=true runs every corpus test", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _user_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never write to the user's `~/.cache`: the unpacked language model goes to one folder
    of this session's temp tree (shared by all tests, so it is unpacked once)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "user-cache"))
