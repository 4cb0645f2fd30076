"""What a new user reads: the CLI's text output in a pipe and on a terminal, and its one-line errors.

Found by walking through the README as a new user: hits wrapped at 80 columns in a pipe (a path
broken at its space), a note title with brackets crashing `mindnet search` as rich markup, graph
paths cut to `sources/cormack-2009-r…`, `--from yesterday` as an internal error, a missed note
without the closest names the server gives. The library calls are replaced by recorders where the
test is about rendering (as in test_cli_options.py); the store's date parsing is checked for real.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_run import one_note_vault, run
from mindnet import Hit, MindnetError, NotFoundError, VaultNotFoundError, check_date, cli_queries, launch
from mindnet.api import Index
from mindnet.cli_core import error_line
from mindnet.search.filters import ISO_DATE, SearchFilters


@pytest.fixture
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return one_note_vault(tmp_path, monkeypatch)


def returning(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, result: Callable[[], Any]) -> list[Any]:
    """Replace `target.name` by a function that returns `result()` and remembers its arguments."""
    calls: list[Any] = []

    def fake(*args: Any, **kwargs: Any) -> Any:
        calls.append((args[1:], kwargs))
        return result()

    monkeypatch.setattr(target, name, fake)
    return calls


def hit(rank: int, title: str, path: str, text: str) -> Hit:
    return Hit(rank=rank, score=0.5, note_id=f"n{rank}", path=path, title=title, chunk_id=f"n{rank}#c01",
               section_path="/Überblick", section_title="Überblick", text=text, char_start=0, char_end=len(text),
               line_start=3, line_end=9, lang="de", via="dense")


LONG = "Rückverweise verbinden Notizen in beide Richtungen. " * 12
HITS = [hit(1, "Plan [/b] [draft]", "gedanken/Über Rückverweise.md", LONG), hit(2, "Kurz", "b.md", "Ein Satz.")]


def test_search_in_a_pipe_is_two_unwrapped_lines_a_hit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    returning(monkeypatch, Index, "search", lambda: HITS)
    code, out, err = run(capsys, "search", "q", "--vault", str(vault))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 4  # head + snippet per hit, however long: a pipe never wraps
    assert lines[0] == "1. Plan [/b] [draft]  /Überblick  gedanken/Über Rückverweise.md:3-9  0.500"
    assert lines[1].startswith("   Rückverweise verbinden") and lines[1].endswith("…")
    assert len(lines[1]) == 3 + cli_queries.SNIPPET_CHARS + 1
    assert lines[3] == "   Ein Satz."
    assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("as_json", [False, True])
def test_explain_prints_each_lists_rank_and_share_under_its_hit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, as_json: bool
) -> None:
    from mindnet import Explanation
    from mindnet.search import Part

    why = Explanation((Part("dense", 0.0769, 3), Part("lexical", 0.1136, 1), Part("note", 0.0417, 2),
                       Part("slots", -0.004, 2), Part("exact", 0.01, None)))
    explained = [dataclasses.replace(HITS[0], explain=why), HITS[1]]
    calls = returning(monkeypatch, Index, "search", lambda: explained)
    extra = ["--json"] if as_json else []
    code, out, _ = run(capsys, "search", "q", "--vault", str(vault), "--explain", *extra)
    assert code == 0 and calls[0][1]["explain"] is True
    if as_json:  # --json: the parts as data, absent on a hit without them
        data = json.loads(out)
        assert data[0]["explain"][1] == {"list": "lexical", "rank": 1, "score": 0.1136} and "explain" not in data[1]
        return
    lines = out.splitlines()
    assert lines[2] == ("   why: dense #3 +0.077 · bm25 #1 +0.114 · note #2 +0.042 · "
                        "language slot (rank 2 is de in dense) -0.004 · exact word +0.010")
    assert len(lines) == 5  # only the explained hit gets a line
    code, out, _ = run(capsys, "search", "q", "--vault", str(vault))
    assert calls[-1][1]["explain"] is False


def test_search_on_a_terminal_wraps_with_the_snippet_indent_and_takes_titles_literally(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(cli_queries, "screen", lambda: cli_queries.Screen(screen, terminal=True, width=60, color=False))
    returning(monkeypatch, Index, "search", lambda: HITS[:1])
    code, _, err = run(capsys, "search", "q", "--vault", str(vault))
    assert (code, err) == (0, "")
    lines = screen.getvalue().splitlines()
    assert lines[0].startswith("1. Plan [/b] [draft]")  # was: MarkupError, an internal error
    snippet = [line for line in lines if "Rückverweise verbinden" in line or line.startswith("   ")]
    assert len(snippet) > 3 and all(line.startswith("   ") and len(line) <= 60 for line in snippet)


def graph_row(path: str | None, title: str, depth: int = 1, via: str = "a") -> dict[str, Any]:
    row = {"note_id": title.lower(), "path": path, "title": title, "kind": "backlink" if path else "references",
           "status": "resolved" if path else "unresolved", "direction": "in" if path else "out"}
    return row | ({"depth": depth, "via": via} if depth > 1 else {})


def test_graph_lines_keep_long_paths_whole_and_say_where_a_deeper_hop_came_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    deep = "sources/" + "a-very-long-folder-name/" * 4 + "cormack-2009-rrf.md"
    rows = [graph_row("b.md", "Beta [x]"), graph_row(deep, "Cormack", depth=2, via="beta"),
            graph_row(None, "Missing Note")]
    returning(monkeypatch, Index, "graph", lambda: rows)
    code, out, err = run(capsys, "graph", "a", "--vault", str(vault), "--depth", "2")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "← backlink   b.md  Beta [x]",
        f"← backlink   {deep}  Cormack  (hop 2 via beta)",
        "→ references (unresolved)  Missing Note",
    ]


@pytest.mark.parametrize(("flags", "said"), [([], "no links or backlinks for a"),
                                             (["--backlinks"], "no backlinks for a"),
                                             (["--unresolved"], "no unresolved links for a")])
def test_graph_without_rows_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, flags: list[str], said: str
) -> None:
    returning(monkeypatch, Index, "graph", list)
    assert run(capsys, "graph", "a", "--vault", str(vault), *flags) == (0, said + "\n", "")


def test_status_of_a_vault_not_imported_says_so_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, out, err = run(capsys, "status", "--vault", str(vault))
    assert code == 0
    assert err == f"{vault} is not imported yet: run `mindnet import {vault}`\n"
    model = next(line for line in out.splitlines() if " model " in line)
    assert "None" not in out and re.search(r"model\s+│\s+-\s", model)
    assert not (vault / ".mindnet").exists()
    code, out, err = run(capsys, "status", "--vault", str(vault), "--json")
    assert (code, err, json.loads(out)["model"]) == (0, "", None)


def test_summary_lines_are_never_wrapped(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    for i in range(12):
        (vault / f"n{i}.md").write_text(f"---\ntype: kind-number-{i}\n---\n# N\n\ntext\n", encoding="utf-8")
    code, out, _ = run(capsys, "summary", str(vault))
    assert code == 0
    types = next(line for line in out.splitlines() if line.startswith("types"))
    assert len(types) > 80 and all(f"kind-number-{i} 1" in types for i in range(12))
    assert [line.split()[0] for line in out.splitlines()] == ["vault", "notes", "failed", "types", "languages",
                                                                "warnings", "attachments"]


def test_summary_counts_warnings_as_lint_does(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    """Issue 28: `summary` said 514 warnings where `lint` said 112 (foam-docs): it counted the reader's
    per-field warnings (six for a note without frontmatter), lint one MN001 per note plus links."""
    (vault / "bare.md").write_text("# Bare\n\nSee [[nowhere]] and [[a]].\n", encoding="utf-8")
    (vault / "bom.md").write_bytes("\ufeff---\ntitle: B\nid: b\ntype: note\nstatus: draft\n"
                                   "created: 2024-01-01\ntags: []\nnote: a: b\n---\nText.\n".encode())
    code, out, _ = run(capsys, "lint", str(vault), "--format", "json", "--no-cache")
    warnings = [f for f in json.loads(out) if f["severity"] == "warning"]
    assert code == 0 and len(warnings) >= 4
    code, out, _ = run(capsys, "summary", str(vault), "--json")
    info = json.loads(out)
    assert code == 0 and info["warnings"] == len(warnings)
    assert info["warning_codes"] == dict(Counter(f["code"] for f in warnings))
    code, out, _ = run(capsys, "summary", str(vault))
    line = next(line for line in out.splitlines() if line.startswith("warnings"))
    assert line.startswith(f"warnings     {len(warnings)} (as `mindnet lint` counts them: ")


def test_lint_json_is_format_json_and_the_counts_read_as_english(
    capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    code, as_format, err = run(capsys, "lint", str(vault), "--format", "json", "--no-cache")
    assert code == 0 and err == ""
    assert run(capsys, "lint", str(vault), "--json", "--no-cache") == (0, as_format, "")
    assert json.loads(as_format)[0]["code"] == "MN001"
    code, _, err = run(capsys, "lint", str(vault), "--no-cache")
    assert err == "1 finding (0 errors, 1 warning) in 1 file; 1 fixable with --fix\n"
    code, out, err = run(capsys, "lint", str(vault), "--json", "--format", "github")
    assert (code, out) == (2, "") and err == "error: --json and --format github contradict each other: give one\n"


@pytest.mark.parametrize("value", ["yesterday", "2025-9-3", "2025-13-01", "2025-09-03T10", "2025-09-03T10:00Z",
                                   "2025-09-03T25:00", "03.09.2025", ""])
def test_a_date_the_store_cannot_read_is_one_line_before_anything_opens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, value: str
) -> None:
    calls = returning(monkeypatch, Index, "search", list)
    code, out, err = run(capsys, "search", "q", "--vault", str(vault), "--to", value)
    assert (code, out, calls) == (2, "", [])
    assert err == f"error: --to needs an ISO date such as 2025-09-03 or 2025-09-03T10:00, not {value!r}\n"


def date_shapes(moment: datetime.datetime) -> list[str]:
    """The ways of writing `moment` that the store reads (see `ISO_DATE`)."""
    day = moment.date().isoformat()
    return [day, f"{day}T{moment:%H:%M}", f"{day} {moment:%H:%M:%S}", f"{day}T{moment:%H:%M:%S}.{moment:%f}Z",
            f"{day}T{moment:%H:%M:%S}+02:00", f"{day}T{moment:%H:%M:%S} -0130"]


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime.datetime(1000, 1, 1)))
def test_every_iso_shape_of_any_moment_is_accepted(moment: datetime.datetime) -> None:
    for value in date_shapes(moment):
        check_date("--from", value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_accepted_or_refused_with_the_flag_named(value: str) -> None:
    try:
        check_date("--from", value)
    except MindnetError as exc:
        assert str(exc).startswith("--from needs an ISO date")
    else:
        assert ISO_DATE.fullmatch(value)


def test_the_store_reads_every_accepted_shape(capsys: pytest.CaptureFixture[str], vault: Path) -> None:
    """The real store and model: what `check_date` lets through must not fail inside Qdrant."""
    assert run(capsys, "import", str(vault))[0] == 0
    for value in date_shapes(datetime.datetime(2025, 9, 3, 10, 5, 7, 250000)):
        code, out, err = run(capsys, "search", "text", "--vault", str(vault), "--from", value, "--to", value, "--json")
        assert (code, err) == (0, ""), value
        assert json.loads(out) == []  # a.md was created now, not in 2025


def test_a_missed_note_names_the_closest_notes_and_a_missed_section_does_not_repeat_them() -> None:
    miss = NotFoundError("no note 'rff' in the store", [{"note_id": "r", "title": "RRF", "path": "concepts/rrf.md"},
                                                        {"note_id": "q", "title": "Q", "path": "concepts/qdrant.md"}])
    assert error_line(miss) == "error: no note 'rff' in the store; closest: concepts/rrf.md, concepts/qdrant.md"
    section = NotFoundError("no section 'x' in 'A'; sections: /, /B", [{"section": "/B"}])
    assert error_line(section) == "error: no section 'x' in 'A'; sections: /, /B"
    assert error_line(NotFoundError("no note 'x'")) == "error: no note 'x'"


def test_a_file_given_as_the_vault_says_it_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = tmp_path / "note.md"
    note.write_text("# N\n", encoding="utf-8")
    said = f"error: vault not found: {note} (a file: give the vault's folder)"
    assert error_line(VaultNotFoundError(str(note))) == said
    assert error_line(VaultNotFoundError(str(tmp_path / "typo"))) == f"error: vault not found: {tmp_path / 'typo'}"
    assert run(capsys, "import", str(note)) == (2, "", said + "\n")


def test_context_budget_below_one_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    calls = returning(monkeypatch, Index, "context", list)
    code, out, err = run(capsys, "context", "q", "--vault", str(vault), "--budget", "0")
    assert (code, out, calls) == (2, "", [])
    assert err.startswith("error: Invalid value for '--budget'") and len(err.splitlines()) == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stdin", "hint"), [(_Terminal, True), (io.StringIO, False)])
def test_chunk_from_a_terminal_says_it_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: type[io.StringIO], hint: bool
) -> None:
    monkeypatch.setattr(sys, "stdin", stdin("# T\n\nEins.\n"))
    with pytest.raises(SystemExit) as done:
        launch.chunk_main([])
    captured = capsys.readouterr()
    assert done.value.code == 0
    assert [json.loads(line)["text"] for line in captured.out.splitlines()] == ["# T\n\nEins."]
    assert captured.err == ("mindnet-chunk: reading one note from stdin, Ctrl-D ends it (give files or folders to "
                            "chunk them)\n" if hint else "")


def test_help_speaks_to_users_not_to_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    """The command list showed "(R16)", "(R22)"…: requirement numbers of a spec the user never sees."""
    texts = [run(capsys, "--help")[1]]
    texts += [run(capsys, name, "--help")[1] for name in ("graph", "search", "context", "eval", "lint")]
    assert not [t for t in texts if re.search(r"\(R[0-9]+\)", t)]
    assert '"relevant": ["a.md"]' in texts[4]  # the queries file's format, where the user looks for it


def test_a_vault_under_tilde_is_found_as_a_shell_would_expand_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    """An MCP client's `args` reach mindnet without a shell: `~/notes` was 'vault not found: ~/notes'."""
    monkeypatch.setenv("HOME", str(vault.parent))
    code, out, _ = run(capsys, "summary", "~/vault", "--json")
    assert code == 0 and json.loads(out)["vault"] == str(vault)
    stores: list[str | None] = []
    monkeypatch.setattr(Index, "search", lambda self, *a, **k: stores.append(self.settings.store_path) or [])
    assert run(capsys, "search", "q", "--vault", "~/vault", "--store", "~/elsewhere")[:2] == (0, "no results\n")
    assert stores == [str(vault.parent / "elsewhere")]
    missing = f"error: vault not found: {vault.parent / 'typo'}\n"
    assert run(capsys, "search", "q", "--vault", "~/typo") == (2, "", missing)


def test_on_a_terminal_only_the_title_is_bold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path
) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(cli_queries, "screen", lambda: cli_queries.Screen(screen, terminal=True, width=200, color=True))
    returning(monkeypatch, Index, "search", lambda: HITS[1:])
    assert run(capsys, "search", "q", "--vault", str(vault))[0] == 0
    head = screen.getvalue().splitlines()[0]
    assert head == "\x1b[1m2. Kurz\x1b[0m\x1b[2m  /Überblick  b.md:3-9  0.500\x1b[0m"


@pytest.mark.parametrize("command", ["search", "context"])
def test_k_has_the_short_form_a_user_types_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, command: str
) -> None:
    """`--k` reads oddly as a long option, and `-k 3` was 'No such option: -k'."""
    calls = returning(monkeypatch, Index, command, lambda: [] if command == "search" else _Text())
    assert run(capsys, command, "q", "--vault", str(vault), "-k", "3")[0] == 0
    assert calls[0][1]["k"] == 3


@dataclasses.dataclass
class _Text:
    text: str = "ctx"


@pytest.mark.parametrize("command", ["search", "context"])
@pytest.mark.parametrize("query", ["", "  ", "\t\n"])
def test_an_empty_query_is_refused_not_answered_with_no_results(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vault: Path, command: str, query: str
) -> None:
    calls = returning(monkeypatch, Index, command, list)
    assert run(capsys, command, query, "--vault", str(vault)) == (
        2, "", "error: the query is empty: give the words to search for\n")
    assert calls == []


def test_the_api_refuses_the_same_dates_for_every_interface() -> None:
    """`SearchFilters` checks the dates, so the server and MCP answer one clear error (they built
    filters from `from=yesterday` and failed inside Qdrant), and the check is the CLI's."""
    with pytest.raises(MindnetError, match=r"^created_to needs an ISO date"):
        SearchFilters(created_to="yesterday")
    assert SearchFilters(created_from="2025-09-03", created_to="2025-09-03T10:00").to_filter() is not None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_in_a_pipe_is_silent_for_a_short_import_and_says_counts_and_time_left_for_a_long_one() -> None:
    """Issue 27: no terminal, no bars; a stage running for a while says where it is, at most every
    `EVERY` seconds, and once when it ends."""
    out, clock = io.StringIO(), _Clock()
    lines = cli_queries.ProgressLines(out, clock)
    for done in range(0, 101, 10):
        lines("read", done, 100)
    assert out.getvalue() == ""
    for done in range(0, 1001, 1):
        clock.now = 1.0 + done * 0.1  # 100 s for the stage
        lines("chunk", done, 1000)
    said = out.getvalue().splitlines()
    assert 9 <= len(said) <= 11
    assert said[0].startswith("chunk: 90/1000 in 9s, about 1m31s left")
    assert said[-1] == "chunk: 1000/1000 in 1m40s"
    lines("chunk", 1000, 1000)
    assert len(out.getvalue().splitlines()) == len(said)


def test_a_stage_that_starts_late_says_its_time_left_only_once_its_rate_is_known() -> None:
    """A stage that reports in batches first calls with a batch done: that one call says the counts alone,
    not "about 0s left", and the estimate that follows is its own rate since then."""
    out, clock = io.StringIO(), _Clock()
    lines = cli_queries.ProgressLines(out, clock)
    lines("read", 1, 10)
    clock.now = 30.0
    lines("link", 256, 2560)  # the import has run for a while: a new stage says where it is at once
    assert out.getvalue().splitlines() == ["link: 256/2560"]
    clock.now = 40.0
    lines("link", 512, 2560)  # 256 in 10 s since its first call: 2048 more take 80 s
    assert out.getvalue().splitlines()[-1] == "link: 512/2560 in 10s, about 1m20s left"
    clock.now = 45.0
    lines("link", 2560, 2560)
    assert out.getvalue().splitlines()[-1] == "link: 2560/2560 in 15s"
