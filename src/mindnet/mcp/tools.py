"""The MCP tools: parse and check the arguments, call one backend method, render a short summary.

Every tool is read-only and returns structured content (the output schema below) plus a few
lines of text for clients that show only text. Arguments are checked strictly: an unknown name
or a wrong value is an error naming the argument, never silently dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import MindnetError, NotFoundError, __version__
from .backend import Backend

MAX_K = 50
MAX_QUERIES = 8
MAX_BUDGET = 32_000
READ_CHARS = 40_000
"""Most characters of note text one `read` answers with (about 10,000 tokens); the rest is a call away."""
VIEWS = {"links": "references", "backlinks": "backlinks", "both": "neighbors", "unresolved": "unresolved"}
"""The tool's plain words for link directions -> `Index.graph` views."""

Mode = Literal["hybrid", "dense", "lexical"]
"""`mindnet.MODES` spelled out for the schema (a test keeps them equal): importing the search
stage here would load the store and numpy before the handshake, for nothing when a serve answers."""


class ExplainPart(BaseModel):
    list: str
    """dense, e5, lexical, feedback, title, note, note_lexical; or slots, exact, note_sum (adjustments)."""
    rank: int | None
    score: float


class SearchHit(BaseModel):
    """One cited passage: enough to quote it (snippet) and to open it (`read` with note and lines)."""

    rank: int
    score: float
    note_id: str
    path: str
    title: str
    section_path: str
    line_start: int
    line_end: int
    snippet: str
    chunk_id: str
    lang: str
    via: str = ""
    """The lists that found it, joined by `+` (dense, lexical, note, ...)."""
    explain: list[ExplainPart] | None = None
    """With `explain`: each list's rank and share of the score (they add up to it), then what moved it."""


class NoteResult(BaseModel):
    """A note once, with its best passages (`group="note"`)."""

    rank: int
    score: float
    note_id: str
    path: str
    title: str
    sections: list[SearchHit]


class SearchResult(BaseModel):
    queries: list[str]
    hits: list[SearchHit]
    """Passages (`group="chunk"`); with `group="note"` every passage of `notes`, note by note."""
    notes: list[NoteResult] = []
    """With `group="note"` (the default): each note once, best first, with its best passages."""


class Section(BaseModel):
    title: str
    level: int
    path: str
    line: int
    end_line: int


class ReadResult(BaseModel):
    note: dict[str, Any]
    section: str | None
    line_start: int
    line_end: int
    text: str
    truncated: bool = False
    """The text stops at `line_end`, short of what was asked for; read on from `line_end + 1`."""
    sections: list[Section]
    sections_truncated: bool = False
    """The note has more sections than fit beside the text; ask for one by name or by lines."""


class Link(BaseModel):
    note_id: str
    path: str | None
    title: str
    kind: str
    status: str
    direction: str
    depth: int = 1
    via: str | None = None


class RelatedResult(BaseModel):
    note: str
    direction: str
    links: list[Link]


class Citation(BaseModel):
    n: int
    note_id: str
    title: str
    path: str
    section_path: str
    line_start: int
    line_end: int
    truncated: bool


class ContextResult(BaseModel):
    text: str
    tokens: int
    citations: list[Citation]


class StatusResult(BaseModel):
    notes: int
    chunks: int
    edges: int
    model: str | None
    quality_tier: str
    store: str
    resident: dict[str, Any] | None = None


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

F = TypeVar("F", bound=Callable[..., Any])


def _reported(fn: F) -> F:
    """A `MindnetError` becomes a tool error with its message (and the closest names on a miss)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NotFoundError as exc:
            close = [s.get("path") or s.get("section") or s.get("title") for s in exc.suggestions]
            hint = f"; closest: {', '.join(str(c) for c in close)}" if close else ""
            raise ToolError(f"{exc}{hint}") from exc
        except MindnetError as exc:
            raise ToolError(str(exc)) from exc

    return call  # type: ignore[return-value]


def _result(summary: str, model: BaseModel) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)],
                          structured_content=model.model_dump(mode="json"))


def _hit(row: dict[str, Any], queries: list[str]) -> SearchHit:
    """A passage row (`Hit.as_dict()`) as the tool's `SearchHit`, its text cut to a snippet around the query."""
    from .. import snippet

    fields = {f: row[f] for f in SearchHit.model_fields if f not in ("snippet", "explain")}
    return SearchHit(**fields, snippet=snippet(str(row["text"]), queries), explain=row.get("explain"))


def tool_functions(backend: Backend) -> list[Callable[..., Any]]:
    """The five tools bound to a backend (named by their function names)."""

    def search(
        query: Annotated[str | list[str], Field(description="What to look for, in any language; several "
                                                "wordings of one question are fused by rank.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="Hits wanted.")] = 8,
        mode: Annotated[Mode, Field(description="hybrid (default), dense (meaning) or lexical (exact words).")]
        = "hybrid",
        group: Annotated[Literal["note", "chunk"], Field(
            description="note (default): each note once with its best passages; chunk: ranked passages.")] = "note",
        by_note: Annotated[bool, Field(description="With group=chunk: one passage per note.")] = False,
        explain: Annotated[bool, Field(description="Give each passage each list's rank and share of its score "
                                                   "(dense, lexical, note...), one query only.")] = False,
        type: Annotated[list[str] | None, Field(description="Note types (frontmatter `type`), any of.")] = None,
        tags: Annotated[list[str] | None,
                        Field(description="Tags the note must all carry (a tag also matches its nested tags).")] = None,
        path_prefix: Annotated[str | None, Field(description="Vault-relative folder or path prefix.")] = None,
        language: Annotated[str | None, Field(description="Passage language, ISO 639-1 (de, en).")] = None,
        date_from: Annotated[str | None, Field(description="Notes created on or after (ISO date).")] = None,
        date_to: Annotated[str | None, Field(description="Notes created on or before (ISO date).")] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the vault's notes: each note once (its best passages), or ranked passages, each with note
        id, path, title, section, file lines, score and snippet, so an answer can cite them. Open a hit
        with `read` (note and lines)."""
        queries = [query] if isinstance(query, str) else list(query)
        if not 1 <= len(queries) <= MAX_QUERIES or not all(q.strip() for q in queries):
            raise ToolError(f"argument 'query': give 1 to {MAX_QUERIES} non-empty queries")
        filters = {"type": tuple(type or ()), "tags": tuple(tags or ()), "lang": language,
                   "path_prefix": path_prefix, "created_from": date_from, "created_to": date_to}
        if group == "note":
            notes = [NoteResult(**{**{f: n[f] for f in ("rank", "score", "note_id", "path", "title")},
                                   "sections": [_hit(row, queries) for row in n["sections"]]})
                     for n in backend.search_notes(queries, k=k, mode=mode, filters=filters, explain=explain)]
            lines = [f"{len(notes)} note{'' if len(notes) == 1 else 's'} for {' | '.join(queries)!r}"]
            for n in notes:
                lines.append(f"{n.rank}. {n.title} — {n.path} (score {n.score:.3f})")
                lines += [f"   › {h.section_path} (lines {h.line_start}-{h.line_end}): {h.snippet[:140]}"
                          for h in n.sections]
            return _result("\n".join(lines), SearchResult(queries=queries, hits=[h for n in notes for h in n.sections],
                                                           notes=notes))
        rows = backend.search(queries, k=k, mode=mode, by_note=by_note, filters=filters, explain=explain)
        hits = [_hit(row, queries) for row in rows]
        lines = [f"{len(hits)} hit{'' if len(hits) == 1 else 's'} for {' | '.join(queries)!r}"]
        lines += [f"{h.rank}. {h.title} — {h.path} › {h.section_path} (lines {h.line_start}-{h.line_end}, "
                  f"score {h.score:.3f}): {h.snippet[:160]}" for h in hits]
        return _result("\n".join(lines), SearchResult(queries=queries, hits=hits))

    def read(
        note: Annotated[str, Field(min_length=1, max_length=1000,
                                   description="Note id, vault-relative path or title.")],
        section: Annotated[str | None, Field(description="A heading title or section path (`/H2/H3`).")] = None,
        line_start: Annotated[int | None, Field(ge=1, description="First file line (with line_end).")] = None,
        line_end: Annotated[int | None, Field(ge=1, description="Last file line, included.")] = None,
    ) -> Annotated[CallToolResult, ReadResult]:
        """Read a note: the whole text, one section, or a range of file lines, with the note's metadata
        and its list of sections. A long text stops at a line end (`truncated`); ask for the lines after
        `line_end` to go on. On a miss the error names the closest notes."""
        if (line_start is None) != (line_end is None):
            missing = "line_end" if line_end is None else "line_start"
            raise ToolError(f"argument '{missing}': give line_start and line_end together")
        lines = (line_start, line_end) if line_start is not None and line_end is not None else None
        found = ReadResult(**backend.read(note, section=section, lines=lines, max_chars=READ_CHARS))
        info = found.note
        where = f" › {found.section}" if found.section else ""
        head = f"{info.get('title')} — {info.get('path')}{where} (lines {found.line_start}-{found.line_end})"
        if found.truncated:
            head += f"; cut at {READ_CHARS} characters, read on with line_start={found.line_end + 1}"
        return _result(f"{head}\n\n{found.text}", found)

    def related(
        note: Annotated[str, Field(min_length=1, max_length=1000,
                                   description="Note id, vault-relative path or title.")],
        direction: Annotated[Literal["both", "links", "backlinks", "unresolved"],
                             Field(description="links (outgoing), backlinks (incoming), both, or "
                                               "unresolved (links to notes that do not exist yet).")] = "both",
        depth: Annotated[int, Field(ge=1, le=3, description="Hops to walk.")] = 1,
    ) -> Annotated[CallToolResult, RelatedResult]:
        """Notes linked with a note: what it links to, what links to it, and its unresolved links,
        up to a depth (each row says at which hop and via which note)."""
        rows = backend.related(note, view=VIEWS[direction], depth=depth)
        links = [Link(**row) for row in rows]
        lines = [f"{len(links)} {direction} of {note!r}"]
        lines += [f"- {'→' if x.direction == 'out' else '←'} {x.title} ({x.path or 'no note'}; {x.kind}, "
                  f"{x.status}{f', hop {x.depth}' if x.depth > 1 else ''})" for x in links]
        return _result("\n".join(lines), RelatedResult(note=note, direction=direction, links=links))

    def context(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="The question.")],
        budget: Annotated[int, Field(ge=50, le=MAX_BUDGET, description="Token budget of the text.")] = 2000,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="Hits to draw passages from.")] = 12,
        mode: Annotated[Mode, Field(description="Search mode.")] = "hybrid",
    ) -> Annotated[CallToolResult, ContextResult]:
        """Passages for a question within a token budget, each under a `[n]` header, and the
        citation list (note, path, section, file lines) that the markers point to."""
        found = backend.context(query, budget=budget, k=k, mode=mode)
        result = ContextResult(text=found["text"], tokens=found["tokens"],
                               citations=[Citation(**{f: c[f] for f in Citation.model_fields})
                                          for c in found["citations"]])
        return _result(result.text or "(nothing found)", result)

    def status() -> Annotated[CallToolResult, StatusResult]:
        """The index: notes, chunks, edges, models, the e5 tier's progress and the watcher's last event."""
        info = backend.status()
        result = StatusResult(**{f: info.get(f) for f in StatusResult.model_fields})
        resident = result.resident or {}
        summary = (f"{result.notes} notes, {result.chunks} chunks, {result.edges} edges; model {result.model}; "
                   f"e5: {result.quality_tier}; last change: {resident.get('last_event') or 'none'}")
        return _result(summary, result)

    return [_reported(fn) for fn in (search, read, related, context, status)]


def strict(tool: Tool) -> Tool:
    """The tool refusing arguments it does not know (the SDK ignores them), in its schema too."""
    base = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(base.__name__, (base,), {  # type: ignore[assignment]
        "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True), "__module__": __name__})
    tool.parameters["additionalProperties"] = False
    return tool


def describe(tool: str, error: ValidationError, known: Sequence[str]) -> str:
    """A validation error as one line per argument: which one, and what is wrong with it."""
    parts = []
    for err in error.errors():
        name = ".".join(str(p) for p in err["loc"][:1]) or "arguments"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown argument '{name}' (known: {', '.join(known) or 'none'})")
        else:
            parts.append(f"argument '{name}': {err['msg']}")
    return f"{tool}: " + "; ".join(dict.fromkeys(parts))


class MindnetMCP(MCPServer[Any]):
    """The SDK's server with strict argument errors."""

    def __init__(self, backend: Backend, instructions: str) -> None:
        tools = [strict(Tool.from_function(fn, annotations=READ_ONLY)) for fn in tool_functions(backend)]
        super().__init__("mindnet", instructions=instructions, version=__version__, tools=tools,
                         log_level="WARNING")
        self._known = {t.name: list(t.parameters.get("properties", {})) for t in tools}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(describe(name, exc.__cause__, self._known.get(name, []))) from exc.__cause__
            raise


def instructions(overview: dict[str, Any]) -> str:
    """The server's instructions: what the vault holds, and which tool answers what."""

    def top(counts: dict[str, int]) -> str:
        return ", ".join(f"{name} ({n})" for name, n in counts.items()) or "none"

    if not overview.get("notes"):
        about = f"the Markdown vault '{overview.get('vault')}' (not indexed yet: the first import runs now)"
    else:
        about = (f"the Markdown vault '{overview.get('vault')}': {overview['notes']} notes in "
                 f"{overview['chunks']} passages; languages: {top(overview['languages'])}; note types: "
                 f"{top(overview['types'])}; top tags: {top(overview['tags'])}")
    return (f"mindnet searches {about}. Use `search` to find passages (cite them by path and lines), `read` "
            "to open a note, one section or a line range, `related` for its links and backlinks, `context` for "
            "a token-budgeted excerpt with [n] citations, and `status` for the index's state. All tools are "
            "read-only.")
