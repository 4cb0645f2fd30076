"""The store folder inside a versioned or synced vault (issue 13, finding 10).

It writes its own `.gitignore` (`*`) so `git add .` never commits the live store, and it records the
host of its last writer so `mindnet status` can say when a synced copy was written elsewhere.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from fakes import FakeEmbedder
from mindnet import cli
from mindnet.api import Index
from mindnet.config import STORE_GITIGNORE, Settings, prepare_store_dir


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("MINDNET_STORE", "MINDNET_QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha links [[b]].\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta text.\n", encoding="utf-8")
    return root


def _import(vault: Path, settings: Settings | None = None) -> None:
    with Index(vault, settings or Settings(), embedder=FakeEmbedder()) as index:
        assert index.import_vault().notes_new == 2


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_git_add_of_an_imported_vault_commits_no_store_file(vault: Path) -> None:
    _git(vault, "init", "-q")
    _import(vault)
    assert (vault / ".mindnet" / ".gitignore").read_text(encoding="utf-8") == STORE_GITIGNORE
    _git(vault, "add", "-A")
    staged = _git(vault, "diff", "--cached", "--name-only").split()
    assert staged == ["a.md", "b.md"]


def test_lint_cache_folder_is_ignored_too(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["lint", str(vault)])
    capsys.readouterr()
    assert (vault / ".mindnet" / "lint-index.json").is_file()
    assert (vault / ".mindnet" / ".gitignore").read_text(encoding="utf-8") == STORE_GITIGNORE


def test_lint_keeps_its_index_in_a_store_folder_outside_the_vault(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "outside" / "store"
    monkeypatch.setenv("MINDNET_STORE", str(store))
    with pytest.raises(SystemExit):
        cli.main(["lint", str(vault)])
    capsys.readouterr()
    assert (store / "lint-index.json").is_file()
    assert (store / ".gitignore").read_text(encoding="utf-8") == STORE_GITIGNORE
    assert not (vault / ".mindnet").exists()  # a vault in a sync folder gets nothing from lint


def test_a_store_folder_mindnet_creates_elsewhere_gets_one(vault: Path, tmp_path: Path) -> None:
    store = tmp_path / "outside" / "store"
    _import(vault, Settings(store_path=str(store)))
    assert (store / ".gitignore").read_text(encoding="utf-8") == STORE_GITIGNORE
    assert not (vault / ".mindnet").exists()


def test_a_folder_the_user_already_filled_is_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x", encoding="utf-8")
    prepare_store_dir(mine)
    assert not (mine / ".gitignore").exists()
    default = tmp_path / "v" / ".mindnet"
    default.mkdir(parents=True)  # made by an older mindnet: still mindnet's own folder
    prepare_store_dir(default)
    assert (default / ".gitignore").is_file()


def test_status_names_the_last_writer_and_warns_when_it_was_another_host(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _import(vault)
    record = json.loads((vault / ".mindnet" / "writer.json").read_text(encoding="utf-8"))
    assert record["host"] == socket.gethostname()
    with Index(vault) as index:
        status = index.status()
    assert (status.written_by, status.written_elsewhere) == (socket.gethostname(), False)

    record["host"] = "other-laptop"
    (vault / ".mindnet" / "writer.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(SystemExit) as done:
        cli.main(["status", "--vault", str(vault), "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0
    info = json.loads(captured.out)
    assert (info["written_by"], info["written_elsewhere"]) == ("other-laptop", True)
    (warning,) = captured.err.splitlines()
    assert warning.startswith("warning: this store was last written on other-laptop, not on this machine")


def test_status_of_a_store_never_written_names_no_writer(vault: Path) -> None:
    with Index(vault) as index:
        status = index.status()
    assert (status.written_by, status.written_elsewhere) == (None, False)
