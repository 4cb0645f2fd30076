"""The commands of a vault's store (search, context, graph, status, import), without typer or rich.

A running `mindnet serve` answers them over its socket; otherwise the vault's `Index` does. Both
parsers call these functions: `launch` (the console script's own parser for plain command lines)
and `cli` (typer, for everything else), so what is printed cannot differ between them. When a
server answers, nothing beyond the standard library and the client is imported (issue 26): the
`Index` and the search stage load only on the local path, and printing uses no rich (an import's
progress bars on a terminal do).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import MindnetError, Settings
from .cli_core import say, settings_for

SNIPPET_CHARS = 300
"""How much of a hit's text `mindnet search` shows; `--json` has all of it."""


@dataclass(slots=True)
class Screen:
    """Where the commands print, and whether it is a terminal (wrapped, styled) or a pipe (neither)."""

    file: TextIO
    terminal: bool
    width: int
    color: bool

    def write(self, text: str) -> None:
        self.file.write(text)

    def styled(self, text: str, sgr: str) -> str:
        """`text` in the SGR style `sgr` (1 bold, 2 dim) where colour is on."""
        return f"\x1b[{sgr}m{text}\x1b[0m" if self.color and text else text


def stdout_screen() -> Screen:
    """sys.stdout as the user sees it: a terminal's width, colour unless NO_COLOR or TERM=dumb says no."""
    stream = sys.stdout
    try:
        terminal = bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        terminal = False
    width = shutil.get_terminal_size((80, 24)).columns if terminal else 80
    color = terminal and not os.environ.get("NO_COLOR") and os.environ.get("TERM", "") != "dumb"
    return Screen(stream, terminal, max(width, 20), color)


screen = stdout_screen
"""The screen the commands print to (tests replace it to see what a terminal would show)."""


def remote(vault: Path, settings: Settings) -> Any:
    """A client of the `mindnet serve` that owns this vault's store, or None when none runs."""
    from . import find_server, store_dir

    address = find_server(store_dir(vault, settings))
    if address is None:
        return None
    from .client import Remote

    return Remote(address)


def index(vault: Path, settings: Settings, ends_by_exit: bool = False) -> Any:
    """The vault's `Index` for one command (imported only here: a command a server answers never loads
    the store); `short_lived`, so a search never waits for the e5 tier's model to be built.

    `ends_by_exit`: the process ends with `os._exit` once the command returns (the console script), so a
    store the command wrote nothing to leaves its shards to the exit instead of closing them
    (`Index(ends_by_exit=True)`). Every command here takes it, False unless the console script says so."""
    from . import Index

    return Index(vault, settings, short_lived=True, ends_by_exit=ends_by_exit)


def preloading(settings: Settings, query: str, vault: Path, *, tokenizer: bool = False) -> Any:
    """Start loading a query's models on their own threads (`preload_models`) before the index stack is
    imported: most of that load leaves Python's lock free for the imports and the store."""
    from . import preload_models

    # A one-off search fuses e5 only where the settings ask for the tier (`api.Index(short_lived=True)`).
    return preload_models(settings, query, tokenizer=tokenizer, vault=vault, e5=settings.quality_tier)


def ready_to_search(opened: Any, loading: Any) -> None:
    """Open the store's collections while the models load, then wait for them (an unimported vault
    skips the store: its search reports that)."""
    if opened.has_store():
        opened.prepare_search()
    loading.wait()


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def check_query(query: str) -> None:
    """An empty query is a slip (an unset shell variable), not a search that found nothing.

    It answered "no results" with exit 0; the API's `search_many` and the server refuse it too.
    """
    if not query.strip():
        raise MindnetError("the query is empty: give the words to search for")


def search(
    query: str, *, vault: Path, store: Path | None, config: Path | None, k: int, mode: str, expand: bool,
    by_note: bool, types: Sequence[str] | None, tags: Sequence[str] | None, area: str | None,
    project: str | None, lang: str | None, path: str | None, note: Sequence[str] | None, date_from: str | None,
    date_to: str | None, as_json: bool, explain: bool = False, ends_by_exit: bool = False,
) -> None:
    """`mindnet search`: hits from the server or the index, as JSON or a head line and snippet each (and with
    `explain`, a line of what each list added)."""
    check_query(query)
    if date_from is not None or date_to is not None:  # before a store or server is opened
        from . import check_date  # the search stage: only for a command that filters by date

        for flag, value in (("--from", date_from), ("--to", date_to)):
            check_date(flag, value)
    settings = settings_for(vault, config, store=store)
    server = remote(vault, settings)
    if server is not None:
        params = {"q": query, "k": k, "mode": mode, "expand": expand, "by_note": by_note, "type": types,
                  "tag": tags, "area": area, "project": project, "lang": lang, "path": path, "note": note,
                  "from": date_from, "to": date_to, "explain": explain}
        hits: list[dict[str, Any]] = server.get("/api/search", params)
    else:
        loading = preloading(settings, query, vault)
        from . import SearchFilters

        flt = SearchFilters(type=tuple(types or ()), tags=tuple(tags or ()), area=area, project=project, lang=lang,
                            path_prefix=path, note_id=tuple(note or ()), created_from=date_from, created_to=date_to)
        try:
            with index(vault, settings, ends_by_exit) as opened:
                ready_to_search(opened, loading)
                found = opened.search(query, k=k, mode=mode, filters=flt, expand=expand, by_note=by_note,
                                      explain=explain)
        finally:
            loading.finish()
        hits = [h.as_dict() for h in found]
    if as_json:
        print_json(hits)
        return
    if not hits:
        sys.stdout.write("no results\n")
        return
    out = screen()
    for hit in hits:
        print_hit(out, hit)
        if explain and hit.get("explain"):
            out.write(f"   {explanation_line(hit['explain'], str(hit.get('lang') or ''))}\n")


EXPLAINED = {"dense": "dense", "e5": "e5", "lexical": "bm25", "feedback": "feedback", "title": "title",
             "note": "note", "note_lexical": "note bm25", "slots": "language slot", "exact": "exact word",
             "note_sum": "other chunks"}
"""How `--explain` names each list and adjustment of a hit's score (`mindnet.search.fusion.LISTS`, `ADJUSTMENTS`)."""


def explanation_line(parts: Sequence[dict[str, Any]], lang: str) -> str:
    """One line: each list's rank and share of the score, then what moved it (`Hit.explain`), e.g.
    `why: dense #3 +0.08 · bm25 #1 +0.11 · language slot (rank 2 is en in dense) -0.01` (three decimals)."""
    words = []
    for p in parts:
        name = EXPLAINED.get(str(p["list"]), str(p["list"]))
        if p["list"] == "slots":
            name = f"{name} (rank {p['rank']} is {lang or '?'} in dense)"
        elif p.get("rank") is not None:
            name = f"{name} #{p['rank']}"
        words.append(f"{name} {float(p['score']):+.3f}")
    return "why: " + " · ".join(words)


def print_hit(out: Screen, hit: dict[str, Any]) -> None:
    """A hit as a head line and an indented snippet.

    Only a terminal gets wrapping (with the snippet's indent kept) and bold: in a pipe or a file
    each part stays one line, so `grep` finds a path whole and no line ends in padding. Titles
    and text are printed as they are, never read as markup: a note called "Plan [/b]" is a title.
    """
    where = f"{hit['path']}:{hit['line_start']}-{hit['line_end']}"
    meta = f"{hit['section_path']}  {where}  {hit['score']:.3f}"
    flat_text = " ".join(str(hit["text"]).split())
    snippet = flat_text[:SNIPPET_CHARS] + ("…" if len(flat_text) > SNIPPET_CHARS else "")
    head = f"{hit['rank']}. {hit['title']}"
    if not out.terminal:
        out.write(f"{head}  {meta}\n   {snippet}\n")
        return
    if len(head) + 2 + len(meta) <= out.width:
        out.write(out.styled(head, "1") + out.styled(f"  {meta}", "2") + "\n")
    else:  # a long title: the meta goes on lines of its own rather than cut through the middle
        for line in textwrap.wrap(head, out.width, break_on_hyphens=False) or [""]:
            out.write(out.styled(line, "1") + "\n")
        for line in textwrap.wrap(meta, out.width, break_on_hyphens=False):
            out.write(out.styled(line, "2") + "\n")
    for line in textwrap.wrap(snippet, out.width - 3, break_on_hyphens=False) or [""]:
        out.write(f"   {line}\n")


def context(
    query: str, *, vault: Path, store: Path | None, config: Path | None, budget: int, k: int, mode: str,
    expand: bool, as_json: bool, ends_by_exit: bool = False,
) -> None:
    """`mindnet context`: a token-budgeted context with citations, as JSON or its text."""
    check_query(query)
    settings = settings_for(vault, config, store=store)
    server = remote(vault, settings)
    if server is not None:
        ctx = server.post("/api/context", {"query": query, "budget": budget, "k": k, "mode": mode, "expand": expand})
    else:
        loading = preloading(settings, query, vault, tokenizer=True)
        try:
            with index(vault, settings, ends_by_exit) as opened:
                ready_to_search(opened, loading)
                ctx = dataclasses.asdict(opened.context(query, budget=budget, k=k, mode=mode, expand=expand))
        finally:
            loading.finish()
    if as_json:
        print_json(ctx)
        return
    sys.stdout.write(ctx["text"].rstrip("\n") + "\n")


GRAPH_EMPTY = {"neighbors": "links or backlinks", "backlinks": "backlinks", "references": "links",
               "unresolved": "unresolved links"}
"""What an empty answer of each view lacks: an empty table looked like an error."""


def graph(
    note: str, *, vault: Path, store: Path | None, config: Path | None, backlinks: bool, references: bool,
    unresolved: bool, depth: int, as_json: bool, ends_by_exit: bool = False,
) -> None:
    """`mindnet graph`: the notes linked from and to a note, one line each (or JSON)."""
    chosen = [name for name, on in (("backlinks", backlinks), ("references", references),
                                    ("unresolved", unresolved)) if on]
    if len(chosen) > 1:
        raise MindnetError(f"choose one of --{', --'.join(chosen)} (none shows both directions)")
    view = chosen[0] if chosen else "neighbors"
    settings = settings_for(vault, config, store=store)
    server = remote(vault, settings)
    if server is not None:
        rows = server.get("/api/graph", {"ref": note, "view": view, "depth": depth})
    else:
        with index(vault, settings, ends_by_exit) as opened:
            rows = opened.graph(note, view, depth)
    if as_json:
        print_json(rows)
        return
    if not rows:
        sys.stdout.write(f"no {GRAPH_EMPTY[view]} for {note}\n")
        return
    for row in rows:
        sys.stdout.write(graph_line(row) + "\n")


def graph_line(row: dict[str, Any]) -> str:
    """One linked note a line: direction, kind, path (what an editor opens), title, and for a deeper
    hop where it was reached from.

    A table cut paths to `sources/cormack-2009-r…` at 80 columns and wrapped titles over several
    lines; a line keeps the path whole and `grep` finds it.
    """
    arrow = "→" if row["direction"] == "out" else "←"
    where = row["path"] or "(unresolved)"
    hop = f"  (hop {row['depth']} via {row['via']})" if int(row.get("depth", 1)) > 1 else ""
    return f"{arrow} {row['kind']:<10} {where}  {row['title']}{hop}"


def status(
    *, vault: Path, store: Path | None, config: Path | None, as_json: bool, ends_by_exit: bool = False,
) -> None:
    """`mindnet status`: counts, models and the server's state, as a two-column table (or JSON)."""
    settings = settings_for(vault, config, store=store)
    server = remote(vault, settings)
    if server is not None:
        info = server.get("/api/status")
    else:
        with index(vault, settings, ends_by_exit) as opened:
            info = opened.status().as_dict()
    if info.get("written_elsewhere"):
        say(f"warning: this store was last written on {info['written_by']}, not on this machine; a store synced "
            "between machines can be corrupted by two writers (keep it outside the synced folder: --store)")
    if as_json:  # a program reads `"model": null`; the hint below is for a person
        print_json(info)
        return
    if info.get("model") is None:
        say(f"{vault} is not imported yet: run `mindnet import {vault}`")
    screen().write(status_table(info))


def status_table(info: dict[str, Any]) -> str:
    """The status as a boxed two-column table of plain text; a value the store does not have yet is "-".

    Values are never wrapped: a store path stays whole on its line, in a pipe and on a terminal.
    """
    rows = [(key, info.get(key)) for key in ("notes", "chunks", "edges", "model", "dim", "quality_tier", "store",
                                             "written_by")]
    if info.get("quality_gain"):
        rows.append(("quality_gain", info["quality_gain"]))
    if "server" in info:
        resident = info["resident"]
        rows.append(("server", f"{info['server']['url']} (pid {info['server']['pid']})"))
        rows.append(("watching", f"{resident['watching']}; last change: {resident['last_event'] or '-'}"))
    cells = [(key, " ".join(("-" if value is None else str(value)).split())) for key, value in rows]
    left = max(len(key) for key, _ in cells)
    right = max(len(value) for _, value in cells)
    title = "mindnet status"
    lines = [title.center(left + right + 7).rstrip(), f"┌{'─' * (left + 2)}┬{'─' * (right + 2)}┐"]
    lines += [f"│ {key.ljust(left)} │ {value.ljust(right)} │" for key, value in cells]
    lines.append(f"└{'─' * (left + 2)}┴{'─' * (right + 2)}┘")
    return "\n".join(lines) + "\n"


def needs_local_store(vault: Path, settings: Settings, what: str) -> None:
    """Refuse what only the store's owner can do while a server owns it (Qdrant Edge is single-process)."""
    server = remote(vault, settings)
    if server is not None:
        raise MindnetError(f"{what} needs the store, which mindnet serve holds ({server.address.url}, "
                           f"pid {server.address.pid}): stop it first")


def import_vault(
    vault: Path, *, store: Path | None, config: Path | None, full: bool, dry_run: bool, strict: bool | None,
    strategy: str | None, max_chunk_size: int | None, separator_group: str | None, separators: str | None,
    quality_tier: bool | None, as_json: bool, ends_by_exit: bool = False,
) -> int:
    """`mindnet import`: the import's summary line (or JSON); the exit code, 1 when notes failed."""
    settings = settings_for(
        vault, config, store=store, strategy=strategy, max_chunk_size=max_chunk_size,
        separator_group=separator_group, separators=separators, strict=strict, quality_tier=quality_tier,
    )
    server = remote(vault, settings)
    if server is not None:
        local_only = {"--dry-run": dry_run, "--strict": strict, "--strategy": strategy,
                      "--max-chunk-size": max_chunk_size, "--separator-group": separator_group,
                      "--separators": separators, "--quality-tier": quality_tier}
        given = [flag for flag, value in local_only.items() if value]
        if given:
            raise MindnetError(f"mindnet serve imports this vault with its own settings ({server.address.url}); "
                               f"{', '.join(given)} would be ignored: stop the server to use them")
        result: dict[str, Any] = server.post("/api/import", {"full": full})
    else:
        from . import Index

        with Index(vault, settings, ends_by_exit=ends_by_exit) as opened, \
                progress_bars(stderr_is_terminal() and not as_json, lines=not as_json) as progress:
            result = opened.import_vault(full=full, dry_run=dry_run, progress=progress).as_dict()
    for line in result["problems"]:
        say(line)
    if as_json:
        print_json(result)
    else:
        sys.stdout.write(summary_line(result) + "\n")
    return 1 if result["notes_failed"] else 0


def summary_line(s: dict[str, Any]) -> str:
    """An import's summary in one line."""
    verb = "would import" if s["dry_run"] else "imported"
    e5 = f", {s['chunks_embedded_e5']} e5" if s["chunks_embedded_e5"] else ""
    threads = s.get("encoder_threads") or 0
    on = f" on {threads} thread{'s' if threads > 1 else ''}" if threads and s["chunks_embedded"] else ""
    windows = f", {s['windows_embedded']} note windows embedded" if s.get("windows_embedded") else ""
    return (
        f"{verb}: notes {s['notes_new']} new, {s['notes_changed']} changed, {s['notes_unchanged']} unchanged, "
        f"{s['notes_deleted']} deleted, {s['notes_failed']} failed; chunks {s['chunks_embedded']} embedded{on}{e5}, "
        f"{s['chunks_reused']} reused{windows}; edges {s['edges']} (+{s['edges_added']} −{s['edges_deleted']}); "
        f"{s['seconds']:.2f} s"
    )


class ProgressLines:
    """Progress where no bar can be drawn (a pipe, a log file), as plain lines on stderr (issue 27: a
    long import in a pipe said nothing until it ended): a stage still running `EVERY` seconds after
    the first call says its counts and the time left, again every `EVERY` seconds, and once more
    when it ends. A short import stays silent.

    The time left is the stage's own rate since its first call, over the work done since then: a stage that
    reports in batches first calls with a batch already done, and an estimate from that one call was
    "about 0s left" with nine tenths of the work ahead. Until the stage has run `MEASURED` seconds, its line
    says the counts alone."""

    EVERY = 10.0
    MEASURED = 1.0

    def __init__(self, stream: Any, clock: Any = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self._began: float | None = None
        self._started: dict[str, tuple[float, int]] = {}
        """Stage → (when it first called, its count then)."""
        self._said: dict[str, float] = {}
        """Stage → when it last said a line (absent: never; infinite: its last line is said)."""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if self._began is None:
            self._began = now
        started, done_then = self._started.setdefault(stage, (now, done))
        said = self._said.get(stage)
        if said == float("inf"):
            return
        finished = total > 0 and done >= total
        due = now - (said if said is not None else self._began) >= self.EVERY
        if not (due or (finished and said is not None)):
            return
        self._said[stage] = float("inf") if finished else now
        elapsed = now - started
        line = f"{stage}: {done}/{total}"
        if finished or elapsed >= self.MEASURED:
            line += f" in {_duration(elapsed)}"
        if not finished and elapsed >= self.MEASURED and done > done_then:
            line += f", about {_duration(elapsed / (done - done_then) * (total - done))} left"
        self.stream.write(line + "\n")
        self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def stderr_is_terminal() -> bool:
    """Whether progress bars can be drawn: stderr is a terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):
        return False


@contextmanager
def progress_bars(enabled: bool, lines: bool = False) -> Iterator[Any]:
    """A rich progress bar per import stage, drawn only on a terminal (rich loads only then); with
    `lines` and no terminal, a plain line on stderr now and then (`ProgressLines`)."""
    if not enabled:
        yield ProgressLines(sys.stderr) if lines else None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description:<9}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True, highlight=False), transient=False) as bars:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(stage, total=total)
            bars.update(tasks[stage], completed=done, total=total)

        yield update
