"""What the CLI tests share: run `mindnet` in-process, and a one-note vault free of the user's environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindnet import launch


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`mindnet ARGS` in this process, through the console script's entry point: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        launch.main(list(args))
    captured = capsys.readouterr()
    return int(done.value.code or 0), captured.out, captured.err


def one_note_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A vault holding `a.md`, with the MINDNET_* variables that would change a run unset."""
    for name in ("MINDNET_STRICT", "MINDNET_STORE", "MINDNET_QDRANT_URL", "MINDNET_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    return root
