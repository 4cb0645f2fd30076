"""A fresh clone has no `../shared/corpora`: its suite must skip (or under CI fail) corpus tests, never go red.

Issue 13, finding 4: seventeen corpus tests reached for the folder themselves and failed on a clone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _pytest.outcomes import Failed, Skipped

import conftest

TESTS = Path(__file__).resolve().parent


def test_missing_corpus_skips_with_the_folder_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "CORPORA", tmp_path / "absent")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(Skipped, match=re.escape(str(tmp_path / "absent" / "foam-docs" / "vault"))):
        conftest.corpus("foam-docs/vault")


def test_missing_corpus_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "CORPORA", tmp_path / "absent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="CI=true"):
        conftest.corpus("xquad/vault")


def test_present_corpus_is_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "xquad" / "vault").mkdir(parents=True)
    monkeypatch.setattr(conftest, "CORPORA", tmp_path)
    monkeypatch.setenv("CI", "true")
    assert conftest.corpus("xquad/vault") == tmp_path / "xquad" / "vault"


def test_no_test_module_reaches_for_the_corpora_itself() -> None:
    """Every corpus path goes through `conftest.corpus`, the one place that skips or fails."""
    reaching = re.compile(r"""["']shared["']|/work/shared""")
    exempt = {"conftest.py", Path(__file__).name}
    offenders = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in exempt and reaching.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
