"""The `mindnet` and `mindnet-chunk` commands: parse options, call the library API, render.

No logic lives here (STYLE §9): every command builds settings once, calls one `Vault`/`Index`
method and prints its result. Library errors become one stderr line and a meaningful exit code:
0 ok, 1 some notes were skipped (R3), 2 the command could not run (bad config, locked store…).
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from . import MindnetError, Settings, __version__
from . import cli_queries as queries
from .cli_core import DEBUG_FLAG, debug_requested, home, long_running_settings, report, run_chunk, settings_for
from .cli_core import mcp as run_mcp
from .cli_core import say as _say

# The library modules (Qdrant, the model, numpy) are imported inside the commands that need
# them: `mindnet lint` runs as a pre-commit hook and must start in a fraction of a second. The
# console script is `launch.main`, which answers plain search/context/graph/status command lines
# (and --version) without importing this module at all.

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
err = Console(stderr=True, highlight=False)


_home = home

VaultArg = Annotated[Path, typer.Argument(help="The vault folder.", show_default=False, callback=_home)]
VaultOpt = Annotated[Path, typer.Option("--vault", help="The vault folder.", callback=_home)]
StoreOpt = Annotated[Path | None, typer.Option("--store", help="Store folder (default VAULT/.mindnet).",
                                               callback=_home)]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="A mindnet.toml instead of the vault's.",
                                                callback=_home)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]
StrategyOpt = Annotated[str | None, typer.Option("--strategy", help="structure (default) or recursive.")]
MaxSizeOpt = Annotated[int | None, typer.Option("--max-chunk-size", help="recursive: max words per chunk.")]
GroupOpt = Annotated[str | None, typer.Option("--separator-group", help="recursive: plaintext or markdown.")]
SepsOpt = Annotated[str | None, typer.Option("--separators", help='recursive: JSON list of regexes.')]


def _version(shown: bool) -> None:
    if shown:
        sys.stdout.write(f"mindnet {__version__}\n")
        raise typer.Exit(0)


@app.callback(epilog="Exit codes: 0 ok, 1 notes skipped or lint findings, 2 the command could not run. "
              "Add --debug (or set MINDNET_DEBUG=1) to see the traceback of an error.")
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", help="Print the version and exit.", is_eager=True,
                                          callback=_version)] = False,
) -> None:
    """mindnet: your Markdown vault as a searchable knowledge network."""


_remote = queries.remote


def _index(vault: Path, settings: Settings) -> Any:
    """The vault's `Index` for a command that writes (import, embed, migrate)."""
    from . import Index

    return Index(vault, settings)


_long_running = long_running_settings


_needs_local_store = queries.needs_local_store
_print_json = queries.print_json


_progress_bars = queries.progress_bars


@app.command("import")
def import_(
    vault: VaultArg,
    store: StoreOpt = None,
    config: ConfigOpt = None,
    full: Annotated[
        bool, typer.Option("--full", help="Drop the store and rebuild it (the embedding cache is kept).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; write nothing.")] = False,
    strict: Annotated[
        bool | None, typer.Option("--strict/--no-strict", help="Missing required fields are errors (or not).")
    ] = None,
    strategy: StrategyOpt = None,
    max_chunk_size: MaxSizeOpt = None,
    separator_group: GroupOpt = None,
    separators: SepsOpt = None,
    quality_tier: Annotated[
        bool | None,
        typer.Option("--quality-tier/--no-quality-tier", help="Run the slow e5 phase after the import."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import a vault into its store; only what changed is chunked, embedded and written."""
    code = queries.import_vault(vault, store=store, config=config, full=full, dry_run=dry_run, strict=strict,
                                strategy=strategy, max_chunk_size=max_chunk_size, separator_group=separator_group,
                                separators=separators, quality_tier=quality_tier, as_json=as_json)
    if code:
        raise typer.Exit(code)


_summary_line = queries.summary_line


@app.command()
def embed(
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Finish the e5 quality tier: embed the chunks that lack its vector (resumable)."""
    settings = settings_for(vault, config, store=store)
    remote = _remote(vault, settings)
    if remote is not None:
        e5 = remote.get("/api/status")["resident"]["e5"]
        sys.stdout.write(f"mindnet serve fills the e5 tier in the background ({remote.address.url}): "
                         f"{e5['done']} of {e5['total']} chunks this round\n")
        return
    with _index(vault, settings) as index, _progress_bars(queries.stderr_is_terminal() and not as_json) as progress:
        count = index.fill_e5(progress=progress)
    if as_json:
        _print_json({"chunks_embedded_e5": count})
    else:
        sys.stdout.write(f"e5: {count} chunks embedded\n")


@app.command()
def status(
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counts of notes, chunks and edges in the store, and the model that made its vectors."""
    queries.status(vault=vault, store=store, config=config, as_json=as_json)


@app.command()
def graph(
    note: Annotated[str, typer.Argument(help="A note id, vault-relative path or title.", show_default=False)],
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    backlinks: Annotated[bool, typer.Option("--backlinks", help="Only notes that link here.")] = False,
    references: Annotated[bool, typer.Option("--references", help="Only notes this one links to.")] = False,
    unresolved: Annotated[bool, typer.Option("--unresolved", help="Only links to notes that do not exist.")] = False,
    depth: Annotated[int, typer.Option("--depth", help="Hops to walk (1-3); deeper rows say where from.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """The notes linked from and to a note: from the store, or the vault when not imported.

    Without a view option both directions are shown.
    """
    queries.graph(note, vault=vault, store=store, config=config, backlinks=backlinks, references=references,
                  unresolved=unresolved, depth=depth, as_json=as_json)


ModeOpt = Annotated[str, typer.Option("--mode", help="hybrid, dense or lexical.")]


TypeOpt = Annotated[list[str] | None, typer.Option("--type", help="Only notes of this type (repeatable).")]
TagOpt = Annotated[list[str] | None, typer.Option(
    "--tag", help="Only notes with this tag or one nested in it (repeatable: all).")]
AreaOpt = Annotated[str | None, typer.Option("--area", help="Only notes of this area.")]
ProjectOpt = Annotated[str | None, typer.Option("--project", help="Only notes of this project.")]
LangOpt = Annotated[str | None, typer.Option("--lang", help="Only chunks in this language (de, en).")]
PathOpt = Annotated[str | None, typer.Option("--path", help="Only notes under this path prefix.")]
NoteOpt = Annotated[list[str] | None, typer.Option("--note", help="Only this note id (repeatable).")]
FromOpt = Annotated[str | None, typer.Option("--from", help="Created on or after (2025-09-03, 2025-09-03T10:00).")]
ToOpt = Annotated[str | None, typer.Option("--to", help="Created on or before (a date: that whole day).")]


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in any language.", show_default=False)],
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many results.")] = 10,
    mode: ModeOpt = "hybrid",
    expand: Annotated[bool, typer.Option("--expand/--no-expand", help="Add neighbour and linked chunks.")] = False,
    by_note: Annotated[bool, typer.Option("--by-note", help="One result per note.")] = False,
    types: TypeOpt = None, tags: TagOpt = None, area: AreaOpt = None, project: ProjectOpt = None,
    lang: LangOpt = None, path: PathOpt = None, note: NoteOpt = None, date_from: FromOpt = None,
    date_to: ToOpt = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Under each hit, each list's rank and share of its score (dense, lexical, note…).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the imported vault: dense, lexical or hybrid, with filters and graph expansion."""
    queries.search(query, vault=vault, store=store, config=config, k=k, mode=mode, expand=expand, by_note=by_note,
                   types=types, tags=tags, area=area, project=project, lang=lang, path=path, note=note,
                   date_from=date_from, date_to=date_to, explain=explain, as_json=as_json)


@app.command()
def context(
    query: Annotated[str, typer.Argument(help="The question the context is for.", show_default=False)],
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    budget: Annotated[int, typer.Option("--budget", min=1, help="Token budget of the context.")] = 2000,
    k: Annotated[int, typer.Option("--k", "-k", help="Hits to draw from.")] = 12,
    mode: ModeOpt = "hybrid",
    expand: Annotated[
        bool, typer.Option("--expand/--no-expand", help="Add neighbour and linked chunks (--no-expand: hits only).")
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """A token-budgeted context for an LLM prompt, with citations."""
    queries.context(query, vault=vault, store=store, config=config, budget=budget, k=k, mode=mode, expand=expand,
                    as_json=as_json)


@app.command("eval")
def eval_(
    beir: Annotated[Path | None, typer.Option("--beir", help="BEIR folder (corpus, queries, qrels).")] = None,
    vault: Annotated[
        Path | None, typer.Option("--vault", help="A vault to evaluate with --queries.", callback=_home)
    ] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="JSONL: query, relevant, partial.")] = None,
    beir_queries: Annotated[
        Path | None, typer.Option("--beir-queries", help="Ask this BEIR folder's questions (cross-lingual).")
    ] = None,
    qrels: Annotated[str | None, typer.Option("--qrels", help="BEIR qrels file name (default qrels.tsv).")] = None,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="Store folder (default VAULT/.mindnet); with --beir a work folder, kept."),
    ] = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure search on judged questions: nDCG@5/10, Recall@10, MRR, Hit@1, latency per mode.

    --vault VAULT --queries FILE imports the vault, then asks the questions in FILE, one JSON a line:

    {"query": "…", "relevant": ["a.md"], "partial": ["b.md"], "category": "…"}

    Notes are paths or ids; partial and category are optional. --beir FOLDER evaluates a BEIR set.
    """
    from . import evaluate_beir, evaluate_vault, format_table, load_beir

    if (beir is None) == (vault is None) or (vault is not None and queries is None):
        raise MindnetError("give either --beir FOLDER, or --vault VAULT with --queries FILE")
    if beir is None and (qrels is not None or beir_queries is not None):
        raise MindnetError("--qrels and --beir-queries go with --beir")
    if beir is not None and queries is not None:
        raise MindnetError("--queries goes with --vault; a BEIR folder brings its own queries")
    if beir is not None:
        settings = settings_for(None, config)
        name = f"{beir_queries.name}->{beir.name}" if beir_queries else beir.name
        data = load_beir(beir, qrels_file=qrels or "qrels.tsv", queries_from=beir_queries)
        reports = evaluate_beir(data, settings, dataset=name, work_dir=store)
    else:
        settings = settings_for(vault, config, store=store)
        reports = evaluate_vault(vault, queries, settings, dataset=vault.name)  # type: ignore[arg-type]
    if as_json:
        _print_json([dataclasses.asdict(r) for r in reports])
    else:
        sys.stdout.write(format_table(reports) + "\n")


@app.command()
def migrate(
    to: Annotated[str, typer.Option("--to", help="Qdrant server URL, e.g. http://qdrant:6333.")],
    vault: VaultOpt = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="MINDNET_QDRANT_API_KEY")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the embedded store to a Qdrant server or cluster (vectors included, no re-embedding)."""
    settings = settings_for(vault, config, store=store)
    _needs_local_store(vault, settings, "mindnet migrate")
    with _progress_bars(queries.stderr_is_terminal() and not as_json) as progress, _index(vault, settings) as index:
        copied = index.migrate(to, api_key=api_key, progress=progress)
    if as_json:
        _print_json(copied)
    else:
        sys.stdout.write(", ".join(f"{n} {c}" for n, c in copied.items()) + f" copied to {to}\n")

@app.command()
def serve(
    vault: VaultArg = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; not loopback needs MINDNET_API_KEY.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (0: any free one).")] = 7341,
    watch: Annotated[bool, typer.Option("--watch/--no-watch", help="Re-import notes when files change.")] = True,
    e5: Annotated[bool, typer.Option("--e5/--no-e5", help="Fill the e5 tier in the background.")] = True,
) -> None:
    """Keep the vault's index open: an HTTP API (and the page), watch mode, the e5 tier in the background.

    Other mindnet commands on the same store talk to it; Ctrl-C or SIGTERM finishes the write in
    flight and closes the store.
    """
    import os

    from .server import serve as run_server

    settings = _long_running(vault, config, store)
    run_server(vault, settings, host=host, port=port, api_key=os.environ.get("MINDNET_API_KEY") or None,
               watch=watch, e5=e5)


@app.command("mcp")
def mcp_(
    vault: VaultArg = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    e5: Annotated[bool, typer.Option("--e5/--no-e5", help="Fill the e5 tier in the background.")] = True,
) -> None:
    """An MCP server on stdin/stdout for LLM agents: search, read, related, context, status.

    Talks to the `mindnet serve` of the store when one runs; otherwise it keeps the index open
    itself and watches the vault. Only the protocol goes to stdout; logs go to stderr.
    """
    run_mcp(vault, store=store, config=config, e5=e5)


@app.command("watch")
def watch_(
    vault: VaultArg = Path("."),
    store: StoreOpt = None,
    config: ConfigOpt = None,
    e5: Annotated[bool, typer.Option("--e5/--no-e5", help="Fill the e5 tier in the background.")] = False,
) -> None:
    """Re-import notes as they change, without a server (Ctrl-C stops)."""
    import signal
    import threading

    from . import Resident

    settings = _long_running(vault, config, store)
    _needs_local_store(vault, settings, "mindnet watch")
    resident = Resident(vault, settings, watch=True, e5=e5)
    stopped = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        resident.index.store()
        summary = resident.start().result()
        sys.stdout.write(_summary_line(summary.as_dict()) + "\n")
        sys.stderr.write(f"watching {vault} (Ctrl-C stops)\n")
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        resident.stop()


@app.command()
def summary(vault: VaultArg, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Read a vault without importing it: notes, types, languages, lint's warnings, problems."""
    from . import Vault, run_lint

    settings = settings_for(vault, config)
    reader = Vault(vault, settings)
    for problem in reader.problems:
        _say(problem.one_line())
    notes = reader.notes
    # `warnings` is lint's count, by lint itself: a count of the reader's per-field warnings (six per
    # note without frontmatter) read as a second, larger number for the same thing (issue 28).
    lint_warnings = Counter(
        f.code for f in run_lint([vault], None, lambda _: settings, use_cache=False).findings if f.severity == "warning"
    )
    info = {
        "vault": str(reader.root),
        "notes": len(notes),
        "failed": reader.result.failed,
        "types": dict(Counter(n.type for n in notes).most_common()),
        "languages": dict(Counter(n.lang for n in notes).most_common()),
        "warnings": lint_warnings.total(),
        "warning_codes": dict(lint_warnings.most_common()),
        "attachments": len(reader.result.attachments),
    }
    if as_json:
        _print_json(info)
    else:
        codes = ", ".join(f"{k} {v}" for k, v in info.pop("warning_codes").items())
        info["warnings"] = f"{info['warnings']} (as `mindnet lint` counts them{': ' + codes if codes else ''})"
        for key, value in info.items():  # one line each, never wrapped: `grep languages` finds them all
            shown = ", ".join(f"{k} {v}" for k, v in value.items()) if isinstance(value, dict) else value
            sys.stdout.write(f"{key:<12} {shown}\n")
    if reader.result.failed:
        raise typer.Exit(1)


@app.command()
def lint(
    paths: Annotated[list[Path] | None, typer.Argument(help="A vault folder, or note files of one vault.")] = None,
    vault: Annotated[
        Path | None,
        typer.Option("--vault", help="Vault of file arguments (default: nearest mindnet.toml/.obsidian/.mindnet).",
                     callback=_home),
    ] = None,
    config: ConfigOpt = None,
    strict: Annotated[
        bool | None, typer.Option("--strict/--no-strict", help="Missing fields are errors; any finding fails.")
    ] = None,
    output_format: Annotated[str, typer.Option("--format", help="text, json or github.")] = "text",
    select: Annotated[list[str] | None, typer.Option("--select", help="Only these codes or prefixes.")] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Skip these codes/prefixes.")] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Fill id/title/created, normalise tags.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="No lint-index.json in the store folder.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for programs (--format json).")] = False,
) -> None:
    """Check vault hygiene: required fields, YAML, links, duplicate ids, id and tag schemes."""
    from . import LINT_FORMATS, format_findings, lint_summary_line, parse_codes, run_lint

    if as_json:  # every other command that a program reads takes --json
        if output_format not in ("text", "json"):
            raise MindnetError(f"--json and --format {output_format} contradict each other: give one")
        output_format = "json"
    if output_format not in LINT_FORMATS:
        raise MindnetError(f"--format must be one of {', '.join(LINT_FORMATS)}, not {output_format!r}")
    run = run_lint(
        paths or [], vault, lambda root: settings_for(root, config, strict=strict),
        parse_codes(select), parse_codes(ignore), fix=fix, use_cache=not no_cache,
    )
    for summary in run.fixes:
        _say(summary.one_line())
        for line in summary.skipped:
            _say(f"  not fixed: {line}")
    findings = run.findings
    sys.stdout.write(format_findings(findings, output_format))
    if output_format == "text":
        _say(lint_summary_line(findings, run.files))
    raise typer.Exit(run.exit_code)


def main(argv: list[str] | None = None) -> None:
    """`mindnet` through typer; `argv` (without the program name) for tests and embedding programs.

    The console script is `launch.main`, which comes here for every command line it does not answer
    itself (`launch.fast_args`).
    """
    _run(app, "mindnet", argv)


# --- mindnet-chunk (R24) -------------------------------------------------------------------------

chunk_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", min=0, help="Worker processes; 0: from cores and load, 1 for small inputs.")
]


@chunk_app.command()
def chunk(
    paths: Annotated[list[str] | None, typer.Argument(help="Files or folders; none or - reads stdin.")] = None,
    vault: Annotated[Path | None, typer.Option("--vault", help="Vault that file arguments belong to.")] = None,
    config: ConfigOpt = None,
    strategy: StrategyOpt = None,
    max_chunk_size: MaxSizeOpt = None,
    separator_group: GroupOpt = None,
    separators: SepsOpt = None,
    jobs: JobsOpt = 0,
) -> None:
    """Chunk notes and print NDJSON, one chunk per line."""
    flags = {
        "strategy": strategy, "max_chunk_size": max_chunk_size,
        "separator_group": separator_group, "separators": separators,
    }
    code = run_chunk(paths, vault, config, flags, jobs)
    if code:
        raise typer.Exit(code)


def typer_chunk_main(argv: list[str] | None = None) -> None:
    """`mindnet-chunk` through typer: the command lines `launch.chunk_main` leaves to it (help, errors)."""
    _run(chunk_app, "mindnet-chunk", argv)


def _run(application: typer.Typer, prog: str, argv: list[str] | None = None) -> None:
    """Run a command; whatever goes wrong ends as one stderr line and exit code 2 (1 is the command's own).

    `--debug` anywhere on the line (or MINDNET_DEBUG=1) adds the traceback above that line.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    args = [a for a in args if a != DEBUG_FLAG]
    try:
        code = application(args=args, prog_name=prog, standalone_mode=False)
    except SystemExit:
        raise
    except BaseException as exc:  # the one place where every error becomes a line
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `mindnet`: the help is the answer
            exc.show()  # type: ignore[attr-defined]
            sys.exit(2)
        sys.exit(report(exc, debug))
    sys.exit(code if isinstance(code, int) else 0)
