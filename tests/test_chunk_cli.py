"""`mindnet-chunk`'s own start-up path (issue 18): its small parser, its workers, what it loads.

The command line a script types runs without typer; everything else goes to the typer command.
These tests pin that the two agree on every command line, that worker processes print the
bytes one process prints whatever the notes, and that a chunk run loads no store, model or typer.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet import Note, Vault, cli, cli_core, launch
from mindnet.reading import TASK_NOTES, note_ranges

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vault"


def _run(entry: object, args: list[str], stdin: str = "") -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one entry point on `args` (stdout through its byte buffer)."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    saved = sys.stdout, sys.stderr, sys.stdin
    sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO(stdin)
    code = 0
    try:
        entry(args)  # type: ignore[operator]
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
    out.flush()
    return code, out.buffer.getvalue().decode("utf-8"), err.getvalue()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chunkcli") / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\n## Idee\n\nAlpha verweist auf [[b]] und erklärt Rangfusion.\n",
                               encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta is about reciprocal rank fusion.\n\n## More\n\n" + "Words. " * 80,
                               encoding="utf-8")
    (root / "bad.md").write_bytes(b"---\ntitle: [\n---\nbody\n")
    return root


_VALUES = ["0", "1", "2", "-1", "x", "", "10", "5", "structure", "recursive", "markdown", '["\\n## "]', "-", "1.5"]
_OPTIONS = ["--jobs", "-j", "--strategy", "--max-chunk-size", "--separator-group", "--separators", "--vault",
            "--config", "--help", "--no-such", "--", "-x"]


@st.composite
def command_lines(draw: st.DrawFn, root: Path) -> list[str]:
    """Command lines of plain and odd tokens: options with and without values, `=` and `-jN` forms."""
    tokens: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["path", "option", "option=", "short", "value"]))
        if kind == "path":
            tokens.append(draw(st.sampled_from([str(root), str(root / "a.md"), str(root / "missing"), "-"])))
        elif kind == "option":
            tokens.append(draw(st.sampled_from(_OPTIONS)))
            if draw(st.booleans()):
                tokens.append(draw(st.sampled_from(_VALUES)))
        elif kind == "option=":
            tokens.append(f"{draw(st.sampled_from(_OPTIONS))}={draw(st.sampled_from(_VALUES))}")
        elif kind == "short":
            tokens.append(f"-j{draw(st.sampled_from(_VALUES))}")
        else:
            tokens.append(draw(st.sampled_from(_VALUES)))
    return tokens


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_fast_path_answers_every_command_line_as_typer_does(vault: Path, data: st.DataObject) -> None:
    args = data.draw(command_lines(vault))
    stdin = "---\ncreated: 2025-01-01\n---\n# T\n\n## A\n\nEins. Zwei.\n"  # not now: both runs print the same
    assert _run(launch.chunk_main, args, stdin) == _run(cli.typer_chunk_main, args, stdin)


@pytest.mark.parametrize(
    ("args", "plain"),
    [
        (["notes"], True),
        (["-j3", "notes", "--strategy=recursive", "--max-chunk-size", "40"], True),
        (["--jobs", "2", "-"], True),
        (["--help"], False),
        (["-j=3", "notes"], False),  # click reads `=3` as the value: an error, typer's to report
        (["--jobs", "-1", "notes"], False),
        (["--strategy"], False),
        (["--strategy", "--jobs", "1"], False),
        (["--", "notes"], False),
        (["-h"], False),
    ],
)
def test_plain_command_lines_skip_typer_and_the_rest_do_not(args: list[str], plain: bool) -> None:
    assert (cli_core.fast_chunk_args(args) is not None) is plain


def test_a_chunk_run_loads_no_typer_store_or_encoder(vault: Path) -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in ('typer', 'rich', 'pydantic', 'qdrant_edge', "
        "'mindnet.store', 'mindnet.sync', 'mindnet.embedding', 'mindnet.search', 'mindnet.api') "
        "if m in sys.modules), file=sys.stderr))\n"
        "from mindnet.launch import chunk_main\n"
        f"chunk_main(['-j', '1', {str(vault / 'a.md')!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode().splitlines()[-1] == "[]"
    assert b'"path": "a.md"' in done.stdout


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 5000), max_size=400), workers=st.integers(1, 8))
def test_note_ranges_cover_every_note_once_in_order(sizes: list[int], workers: int) -> None:
    notes = [_Sized("x" * size) for size in sizes]
    ranges = note_ranges(notes, workers)  # type: ignore[arg-type]
    assert [i for r in ranges for i in r] == list(range(len(notes)))
    assert all(0 < len(r) <= TASK_NOTES for r in ranges)


class _Sized:
    """What `note_ranges` reads of a note: its text."""

    def __init__(self, fulltext: str) -> None:
        self.fulltext = fulltext


_WORDS = st.sampled_from(["Alpha", "beta", "Rangfusion", "über", "the", "Straße", "[[n1]]", "[[n2|zwei]]",
                          "`code`", "https://x.y/z", "Ünïcödé", "text."])
_LINE = st.lists(_WORDS, min_size=1, max_size=30).map(" ".join)
_BLOCK = st.one_of(
    _LINE,
    _LINE.map(lambda line: f"## {line[:30]}"),
    _LINE.map(lambda line: f"- {line}\n- {line}"),
    _LINE.map(lambda line: f"```\n{line}\n```"),
    _LINE.map(lambda line: f"| a | b |\n|---|---|\n| {line[:20]} | x |"),
)
_NOTE = st.lists(_BLOCK, min_size=0, max_size=12).map(lambda blocks: "\n\n".join(blocks) + "\n")


@settings(max_examples=12, deadline=None)
@given(bodies=st.lists(st.one_of(_NOTE, st.just("---\ntitle: [\n---\nbad\n"), st.just("")), min_size=1, max_size=9),
       jobs=st.integers(2, 4))
def test_workers_yield_what_one_process_yields_for_any_set_of_notes(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[str], jobs: int
) -> None:
    root = tmp_path_factory.mktemp("notes")
    for i, body in enumerate(bodies):
        (root / f"n{i}.md").write_text(body, encoding="utf-8")
    reader = Vault(root)
    one = [(note.path, lines, error) for note, lines, error in reader.chunk_lines(jobs=1)]
    many = [(note.path, lines, error) for note, lines, error in reader.chunk_lines(jobs=jobs)]
    assert many == one
    assert [path for path, _, _ in one] == [note.path for note in reader.notes]
    assert all(isinstance(note, Note) for note in reader.notes)
