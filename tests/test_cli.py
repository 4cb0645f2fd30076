"""The commands as a user runs them: exit codes, stdout, stderr and store state (STYLE §9).

`import` here runs the real default model and the real embedded store: this is the `make run` path.
"""

from __future__ import annotations

import io
import itertools
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mindnet import cli, launch
from mindnet.quality_tier import e5_available

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vault"


def invoke(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], entry: Callable[[], None], *args: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["mindnet", *args])
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = 0
    try:
        entry()
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text(
        "---\ntitle: Alpha\nid: alpha\ntype: concept\nstatus: draft\ncreated: 2025-01-01\ntags: [x]\n---\n"
        "# Alpha\n\n## Idee\n\nAlpha verweist auf [[Beta]] und erklärt Rangfusion.\n",
        encoding="utf-8",
    )
    (root / "b.md").write_text("# Beta\n\nBeta is about reciprocal rank fusion of result lists.\n", encoding="utf-8")
    return root


def chunks_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_chunk_stdin_prints_ndjson(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    note = "# T\n\n## A\n\nEins. Zwei.\n\n## B\n\nDrei.\n"
    code, out, err = invoke(monkeypatch, capsys, launch.chunk_main, "-", stdin=note)
    assert (code, err) == (0, "")
    rows = chunks_of(out)
    assert [r["section_path"] for r in rows] == ["/A", "/B"]
    assert rows[0]["text"] == "# T\n\n## A\n\nEins. Zwei."
    assert rows[0]["path"] == "<stdin>" and rows[1]["chunk_id"].endswith("#c02")


def test_chunk_folder_resolves_links_within_the_vault(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, out, _ = invoke(monkeypatch, capsys, launch.chunk_main, str(vault))
    assert code == 0
    rows = chunks_of(out)
    assert {r["path"] for r in rows} == {"a.md", "b.md"}
    idee = next(r for r in rows if r["section_title"] == "Idee")
    assert idee["wikilinks"] == ["b"]
    assert idee["references"] == [{"target_id": "b", "kind": "wikilink", "status": "resolved"}]


def test_chunk_file_with_vault_and_recursive_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    body = "# Long\n\n## One\n\n" + "Ein Satz mit genau sieben Wörtern hier. " * 3 + "\n\n## Two\n\nKurz.\n"
    (vault / "long.md").write_text(body, encoding="utf-8")
    args = (str(vault / "long.md"), "--vault", str(vault), "--strategy", "recursive", "--max-chunk-size", "10",
            "--separators", '["\\n## "]')
    code, out, _ = invoke(monkeypatch, capsys, launch.chunk_main, *args)
    assert code == 0
    rows = chunks_of(out)
    assert [r["path"] for r in rows] == ["long.md"] * len(rows)
    assert [r["section_path"] for r in rows] == ["/", "/One", "/One", "/One", "/Two"]
    assert rows[0]["char_start"] == 0 and rows[-1]["char_end"] == len(body)
    assert all(a["char_end"] == b["char_start"] for a, b in itertools.pairwise(rows))


def test_chunk_bad_note_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    (vault / "bad.md").write_bytes(b"---\ntitle: [\n---\nbody\n")
    code, out, err = invoke(monkeypatch, capsys, launch.chunk_main, str(vault))
    assert code == 1
    message = "bad.md:3: error: malformed YAML frontmatter: did not find expected node content"
    assert err.strip().splitlines() == [message]
    assert {r["path"] for r in chunks_of(out)} == {"a.md", "b.md"}


def test_chunk_with_worker_processes_prints_the_same_bytes_in_the_same_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    shutil.copytree(SAMPLE, vault / "sample")
    (vault / "bad.md").write_bytes(b"---\ntitle: [\n---\nbody\n")
    one = invoke(monkeypatch, capsys, launch.chunk_main, str(vault), "--jobs", "1")
    three = invoke(monkeypatch, capsys, launch.chunk_main, str(vault), "-j", "3")
    assert one == three
    code, out, err = three
    assert code == 1 and err.strip().splitlines() == [
        "bad.md:3: error: malformed YAML frontmatter: did not find expected node content"
    ]
    from mindnet import Vault

    notes = [note.path for note in Vault(vault).notes]
    assert len(notes) > 10 and list(dict.fromkeys(r["path"] for r in chunks_of(out))) == notes


def test_chunk_jobs_are_one_for_small_inputs_and_as_asked_otherwise() -> None:
    from mindnet import Vault, chunk_jobs

    notes = Vault(SAMPLE).notes
    assert chunk_jobs(notes) == 1  # far below PARALLEL_MIN_CHARS, whatever the load
    assert chunk_jobs(notes, 2) == 2
    assert chunk_jobs(notes[:1], 4) == 1  # never more workers than notes


def test_bad_recursive_settings_exit_2_with_elasticsearch_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, out, err = invoke(monkeypatch, capsys, launch.chunk_main, str(vault), "--strategy", "recursive",
                            "--max-chunk-size", "5")
    assert code == 2 and out == ""
    assert "[max_chunk_size] must be greater than or equal to [10.0]" in err
    assert len(err.strip().splitlines()) == 1


def test_import_status_graph_with_the_real_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "import", str(vault), "--json")
    assert code == 0
    summary = json.loads(out)
    for key in ("notes_new", "notes_changed", "notes_unchanged", "notes_deleted", "notes_failed",
                "chunks_embedded", "chunks_reused", "edges", "seconds"):
        assert key in summary
    assert (summary["notes_new"], summary["notes_failed"]) == (2, 0)
    assert summary["chunks_embedded"] == 2

    code, out, _ = invoke(monkeypatch, capsys, cli.main, "status", "--vault", str(vault), "--json")
    status = json.loads(out)
    assert code == 0
    assert (status["notes"], status["model"], status["dim"]) == (2, "use-multilingual-v3@0.2.1", 512)
    assert status["chunks"] == summary["chunks_embedded"]
    if e5_available():  # the tier's measured gain, per direction, so a user can weigh its fill time
        assert "cross-lingual +" in status["quality_gain"] and "same language +" in status["quality_gain"]
    else:
        assert status["quality_gain"] == ""

    code, out, _ = invoke(monkeypatch, capsys, cli.main, "graph", "b", "--vault", str(vault), "--json")
    assert code == 0
    assert json.loads(out) == [
        {"note_id": "alpha", "path": "a.md", "title": "Alpha", "kind": "backlink", "status": "resolved",
         "direction": "in"}
    ]
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "import", str(vault))
    assert code == 0
    assert out.startswith("imported: notes 0 new, 0 changed, 2 unchanged, 0 deleted, 0 failed; chunks 0 embedded")


def test_graph_without_store_reads_the_vault(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "v"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "graph", "concepts/rrf.md", "--vault", str(root),
                          "--backlinks", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {r["path"] for r in rows} >= {"concepts/embeddings.md", "projects/mindnet.md"}
    assert all(r["kind"] == "backlink" and r["direction"] == "in" for r in rows)
    assert not (root / ".mindnet").exists()


def test_bad_config_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    (vault / "mindnet.toml").write_text("strategy = 'semantic'\n", encoding="utf-8")
    code, out, err = invoke(monkeypatch, capsys, cli.main, "import", str(vault))
    assert code == 2 and out == ""
    message = "strategy must be 'structure' or 'recursive', not 'semantic'"
    assert err.strip() == f"error: {vault / 'mindnet.toml'}: {message}"


def test_search_context_and_eval_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, _, err = invoke(monkeypatch, capsys, cli.main, "search", "fusion", "--vault", str(vault))
    assert code == 2 and "is not imported yet: run `mindnet import" in err
    assert invoke(monkeypatch, capsys, cli.main, "import", str(vault))[0] == 0

    code, out, _ = invoke(monkeypatch, capsys, cli.main, "search", "Wie kombiniert man Ranglisten?", "--vault",
                          str(vault), "--json", "--k", "2")
    assert code == 0
    hits = json.loads(out)
    required = {"rank", "score", "note_id", "path", "title", "chunk_id", "section_path", "text", "char_start",
                "char_end", "line_start", "line_end"}
    assert [h["rank"] for h in hits] == [1, 2]
    assert all(required <= h.keys() for h in hits)
    body = (vault / hits[0]["path"]).read_text(encoding="utf-8")
    assert hits[0]["text"].split("\n")[0] in body

    code, out, _ = invoke(monkeypatch, capsys, cli.main, "search", "fusion", "--vault", str(vault), "--json",
                          "--type", "concept")
    assert code == 0 and {h["note_id"] for h in json.loads(out)} == {"alpha"}

    code, out, _ = invoke(monkeypatch, capsys, cli.main, "context", "rank fusion", "--vault", str(vault), "--budget",
                          "60", "--json")
    assert code == 0
    ctx = json.loads(out)
    assert 0 < ctx["tokens"] <= 60 and ctx["citations"]

    queries = vault.parent / "queries.jsonl"
    queries.write_text(
        json.dumps({"query": "reciprocal rank fusion of result lists", "relevant": ["b.md"], "category": "kw"}) + "\n",
        encoding="utf-8",
    )
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "eval", "--vault", str(vault), "--queries", str(queries),
                          "--json")
    assert code == 0
    reports = json.loads(out)
    assert {r["run"] for r in reports} >= {"dense", "hybrid (default)", "lexical (bm25)"}
    assert all(r["overall"]["ndcg_10"] == 1.0 for r in reports if r["run"] in ("dense", "hybrid (default)"))


def test_import_of_a_missing_folder_creates_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-vault"
    code, out, err = invoke(monkeypatch, capsys, cli.main, "import", str(missing))
    assert code == 2 and out == ""
    assert err.strip() == f"error: vault not found: {missing}"
    assert not missing.exists()


def test_index_keeps_store_and_model_warm_between_imports(vault: Path) -> None:
    """A long-lived Index (API, watch mode) loads the model once; a second concurrent import is still refused."""
    from mindnet.api import Index
    from mindnet.errors import StoreError

    with Index(vault) as index:
        first = index.import_vault()
        model = index.embedder.inner
        (vault / "b.md").write_text("# Beta\n\nBeta is about rank fusion, now edited.\n", encoding="utf-8")
        second = index.import_vault()
        assert index.embedder.inner is model
        assert (first.notes_new, second.notes_changed, second.chunks_embedded) == (2, 1, 1)
        assert [h.note_id for h in index.search("rank fusion edited", k=1)] == ["b"]
        with pytest.raises(StoreError), Index(vault, index.settings) as second_index:
            second_index.import_vault()


def test_embed_fills_the_quality_tier_even_when_imports_leave_it_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    """`mindnet embed` asks for the tier by name; `quality_tier = false` only governs imports."""
    from fakes import FakeEmbedder
    from mindnet import api

    monkeypatch.setattr(api, "e5_available", lambda: True)
    real = api.make_embedder

    def make(name: str, threads: int = 0, cache_dir: str | None = None) -> Any:
        return FakeEmbedder(dim=16, model_id="fake-e5@1") if name == "e5" else real(name, threads, cache_dir)

    monkeypatch.setattr(api, "make_embedder", make)
    assert invoke(monkeypatch, capsys, cli.main, "import", str(vault))[0] == 0
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "embed", "--vault", str(vault), "--json")
    assert code == 0
    assert json.loads(out) == {"chunks_embedded_e5": 2}
    code, out, _ = invoke(monkeypatch, capsys, cli.main, "status", "--vault", str(vault), "--json")
    assert json.loads(out)["quality_tier"] == "fake-e5@1: 2 of 2 chunks"
