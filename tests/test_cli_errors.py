"""One error path for every command (issue 13, findings 2 and 3): one stderr line, a documented exit code.

`path:line: error: reason` for a bad user file, `error: reason` otherwise; 1 means notes skipped or
lint findings, 2 that the command could not run. `--debug` / MINDNET_DEBUG=1 add the traceback.
A vault path with a typo is "vault not found: PATH" and creates nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mindnet import cli, launch
from mindnet.config import load_settings
from mindnet.errors import ConfigError, InputError
from mindnet.evaluation import load_beir, load_vault_queries


def run(capsys: pytest.CaptureFixture[str], entry: Callable[[list[str]], None], *args: str) -> tuple[int, str, str]:
    """Run an entry point in-process as a shell would: the exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as done:
        entry(list(args))
    captured = capsys.readouterr()
    return int(done.value.code or 0), captured.out, captured.err


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINDNET_DEBUG", raising=False)
    for name in ("MINDNET_STORE", "MINDNET_QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha links [[b]].\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta text.\n", encoding="utf-8")
    return root


def test_eval_with_a_missing_queries_file_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], vault: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, err = run(capsys, cli.main, "eval", "--vault", str(vault), "--queries", str(missing))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"{missing}: error: queries file not found"]
    assert not (vault / ".mindnet").exists()


def _beir(folder: Path, corpus: str, queries: str, qrels: str) -> Path:
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (folder / "queries.jsonl").write_text(queries, encoding="utf-8")
    (folder / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return folder


GOOD_CORPUS = '{"_id": "d1", "text": "x"}\n'
GOOD_QUERIES = '{"_id": "q1", "text": "x?"}\n'
GOOD_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "file", "line", "reason"),
    [
        ('{"_id": "d1"}\n{"_id": \n', GOOD_QUERIES, GOOD_QRELS, "corpus.jsonl", 2, "invalid JSON"),
        ('{"title": "no id"}\n', GOOD_QUERIES, GOOD_QRELS, "corpus.jsonl", 1, "missing '_id'"),
        ("[1, 2]\n", GOOD_QUERIES, GOOD_QRELS, "corpus.jsonl", 1, "need a JSON object"),
        (GOOD_CORPUS, '\n{"_id": "q1"}\n', GOOD_QRELS, "queries.jsonl", 2, "missing 'text'"),
        (GOOD_CORPUS, GOOD_QUERIES, "query-id\tcorpus-id\tscore\nq1\td1\n", "qrels.tsv", 2, "need 'query-id"),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t1\nq1\td1\tvery\n", "qrels.tsv", 2, "need 'query-id"),
    ],
)
def test_bad_beir_lines_name_file_and_line(
    tmp_path: Path, corpus: str, queries: str, qrels: str, file: str, line: int, reason: str
) -> None:
    folder = _beir(tmp_path / "beir", corpus, queries, qrels)
    with pytest.raises(InputError) as caught:
        load_beir(folder)
    assert (caught.value.path, caught.value.line) == (str(folder / file), line)
    assert reason in caught.value.reason


def test_bad_beir_file_through_the_cli_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = _beir(tmp_path / "beir", GOOD_CORPUS + "{oops\n", GOOD_QUERIES, GOOD_QRELS)
    code, out, err = run(capsys, cli.main, "eval", "--beir", str(folder))
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"{folder / 'corpus.jsonl'}:2: error: invalid JSON")


def test_invalid_utf8_in_a_queries_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes(b'{"query": "a", "relevant": "a.md"}\n{"query": "\xff"}\n')
    with pytest.raises(InputError, match=r"q\.jsonl:2: invalid UTF-8 \(byte 0xff\)"):
        load_vault_queries(path)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("profiles = 3\n", "'profiles'"),
        ("types = 3\n", "'types'"),
        ('recursive = "x"\n', "'recursive'"),
        ("[profiles]\nthought = 3\n", "'profiles.thought'"),
        ("[types]\nsource = 3\n", "'types.source'"),
        ("[types.source]\nrecursive = 3\n", "'types.source.recursive'"),
        ("[types.source]\nstrategy = 5\n", "types.source.strategy"),
    ],
)
def test_config_values_of_the_wrong_shape_name_the_key(tmp_path: Path, toml: str, key: str) -> None:
    (tmp_path / "mindnet.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=key):
        load_settings(tmp_path, env={})


def test_bad_config_through_the_cli_is_one_line(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    (vault / "mindnet.toml").write_text("profiles = 3\n", encoding="utf-8")
    code, out, err = run(capsys, cli.main, "summary", str(vault))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: {vault / 'mindnet.toml'}: 'profiles' must be a table ([profiles]), not 3"]


def _boom(*_: object, **__: object) -> None:
    raise RuntimeError("boom\nsecond line")


def test_an_unexpected_exception_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, vault: Path
) -> None:
    from mindnet import api

    monkeypatch.setattr(api.Vault, "notes", property(_boom))
    code, out, err = run(capsys, cli.main, "summary", str(vault))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: internal error: RuntimeError: boom second line; run again with --debug for the traceback"
    ]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback_then_the_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, vault: Path, how: str
) -> None:
    from mindnet import api

    monkeypatch.setattr(api.Vault, "notes", property(_boom))
    args = ["summary", str(vault)]
    if how == "flag":
        args.insert(1, "--debug")
    else:
        monkeypatch.setenv("MINDNET_DEBUG", "1")
    code, _, err = run(capsys, cli.main, *args)
    assert code == 2
    assert err.startswith("Traceback (most recent call last):")
    assert "RuntimeError: boom" in err
    assert err.splitlines()[-1] == "error: internal error: RuntimeError: boom second line"


def test_usage_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    code, out, err = run(capsys, cli.main, "status", "--vault", str(vault), "--no-such-option")
    assert (code, out) == (2, "")
    assert err.splitlines() == ["error: No such option: --no-such-option (see `mindnet status --help`)"]
    code, _, err = run(capsys, launch.chunk_main, "--strategy")
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ")


def test_skipped_notes_still_exit_1(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    (vault / "bad.md").write_bytes(b"---\ntitle: [\n---\nbody\n")
    code, out, err = run(capsys, cli.main, "summary", str(vault), "--json")
    assert code == 1 and json.loads(out)["notes"] == 2
    assert err.splitlines() == ["bad.md:3: error: malformed YAML frontmatter: did not find expected node content"]


# --- finding 3: a typo creates folders ----------------------------------------------------------------


COMMANDS: dict[str, list[str]] = {
    "import": ["import", "{v}"],
    "embed": ["embed", "--vault", "{v}"],
    "status": ["status", "--vault", "{v}"],
    "graph": ["graph", "x", "--vault", "{v}"],
    "search": ["search", "x", "--vault", "{v}"],
    "context": ["context", "x", "--vault", "{v}"],
    "eval": ["eval", "--vault", "{v}", "--queries", "{q}"],
    "migrate": ["migrate", "--to", ":memory:", "--vault", "{v}"],
    "summary": ["summary", "{v}"],
    "lint": ["lint", "{v}"],
    "serve": ["serve", "{v}", "--port", "0", "--no-watch", "--no-e5"],
    "watch": ["watch", "{v}"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_missing_vault_is_named_and_nothing_is_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    typo = tmp_path / "typo"
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "x", "relevant": "a.md"}\n', encoding="utf-8")
    args = [a.format(v=typo, q=queries) for a in COMMANDS[command]]
    code, out, err = run(capsys, cli.main, *args)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: vault not found: {typo}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl"]


def test_chunk_with_a_missing_vault_creates_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    note = tmp_path / "n.md"
    note.write_text("# N\n\ntext\n", encoding="utf-8")
    code, out, err = run(capsys, launch.chunk_main, str(note), "--vault", str(tmp_path / "typo"))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: vault not found: {tmp_path / 'typo'}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]


def test_reading_a_store_that_was_never_written_creates_no_folder(tmp_path: Path) -> None:
    """`status` of a vault that exists but was never imported answers from nothing and writes nothing."""
    from mindnet.api import Index

    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    with Index(tmp_path) as index:
        assert index.status().notes == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]


def test_entry_points_read_sys_argv_when_called_without_arguments(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "argv", ["mindnet", "status", "--vault", str(tmp_path / "typo")])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"error: vault not found: {tmp_path / 'typo'}"]
