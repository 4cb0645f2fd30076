"""Every option does what its help says (issue 13, finding 8).

The commands are run in-process with the library call they make replaced by a recorder: these tests
are about what the CLI passes on, not about search or import themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import mindnet
from cli_run import one_note_vault, run
from mindnet import ImportSummary, cli
from mindnet.api import Index


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return one_note_vault(tmp_path, monkeypatch)


def record(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, result: Callable[[], Any]) -> list[dict[str, Any]]:
    """Replace `target.name` by a function that remembers its keyword arguments (and `self.settings`)."""
    calls: list[dict[str, Any]] = []

    def fake(*args: Any, **kwargs: Any) -> Any:
        settings = getattr(args[0], "settings", None) if args else None
        calls.append({**kwargs, "args": args[1:], "settings": settings})
        return result()

    monkeypatch.setattr(target, name, fake)
    return calls


@dataclass
class _Context:
    text: str = "ctx"


@pytest.mark.parametrize(("flags", "expand"), [([], True), (["--expand"], True), (["--no-expand"], False)])
def test_context_expand_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, flags: list[str], expand: bool
) -> None:
    calls = record(monkeypatch, Index, "context", _Context)
    code, out, _ = run(capsys, "context", "q", "--vault", str(vault), *flags)
    assert (code, out) == (0, "ctx\n")
    assert calls[0]["expand"] is expand


@pytest.mark.parametrize(("flags", "expand"), [([], False), (["--expand"], True), (["--no-expand"], False)])
def test_search_expand_both_ways(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, flags: list[str], expand: bool
) -> None:
    calls = record(monkeypatch, Index, "search", list)
    assert run(capsys, "search", "q", "--vault", str(vault), *flags)[:2] == (0, "no results\n")
    assert calls[0]["expand"] is expand


@pytest.mark.parametrize(
    ("flags", "view"),
    [([], "neighbors"), (["--backlinks"], "backlinks"), (["--references"], "references")],
)
def test_graph_views(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, flags: list[str], view: str
) -> None:
    calls = record(monkeypatch, Index, "graph", list)
    assert run(capsys, "graph", "a", "--vault", str(vault), "--json", *flags)[:2] == (0, "[]\n")
    assert calls[0]["args"][:2] == ("a", view)


def test_graph_neighbors_flag_that_changed_nothing_is_gone(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    code, _, err = run(capsys, "graph", "a", "--vault", str(vault), "--neighbors")
    assert code == 2 and err.startswith("error: No such option: --neighbors")


@pytest.mark.parametrize(("flags", "strict"), [([], True), (["--strict"], True), (["--no-strict"], False)])
def test_import_strict_flag_can_turn_the_files_strict_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, flags: list[str], strict: bool
) -> None:
    (vault / "mindnet.toml").write_text("strict = true\n", encoding="utf-8")
    calls = record(monkeypatch, Index, "import_vault", ImportSummary)
    assert run(capsys, "import", str(vault), *flags)[0] == 0
    assert calls[0]["settings"].strict is strict


def test_lint_no_strict_beats_the_file(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       vault: Path) -> None:
    (vault / "mindnet.toml").write_text("strict = true\n", encoding="utf-8")
    seen: list[bool] = []
    real = cli.settings_for

    def spy(*args: Any, **kwargs: Any) -> Any:
        settings = real(*args, **kwargs)
        seen.append(settings.strict)
        return settings

    monkeypatch.setattr(cli, "settings_for", spy)
    run(capsys, "lint", str(vault), "--no-strict", "--no-cache")
    run(capsys, "lint", str(vault), "--no-cache")
    assert seen == [False, True]


def test_eval_store_is_the_beir_work_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    calls = record(monkeypatch, mindnet, "evaluate_beir", list)
    monkeypatch.setattr(mindnet, "load_beir", lambda *a, **k: "loaded")
    beir = tmp_path / "beir"
    beir.mkdir()
    code, _, _ = run(capsys, "eval", "--beir", str(beir), "--store", str(tmp_path / "work"), "--json")
    assert code == 0
    assert calls[0]["work_dir"] == tmp_path / "work"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--qrels", "x.tsv"], "error: --qrels and --beir-queries go with --beir"),
        (["--beir-queries", "b"], "error: --qrels and --beir-queries go with --beir"),
    ],
)
def test_eval_options_that_would_be_ignored_are_refused(
    capsys: pytest.CaptureFixture[str], vault: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "x", "relevant": "a.md"}\n', encoding="utf-8")
    code, out, err = run(capsys, "eval", "--vault", str(vault), "--queries", str(queries), *extra)
    assert (code, out, err.splitlines()) == (2, "", [message])


def test_eval_queries_with_beir_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "eval", "--beir", str(tmp_path), "--queries", str(tmp_path / "q.jsonl"))
    assert code == 2
    assert err.splitlines() == ["error: --queries goes with --vault; a BEIR folder brings its own queries"]
