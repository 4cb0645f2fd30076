"""Vault hygiene (R27): rules over notes, findings with stable codes, three output formats, safe fixes.

`lint_vault` reads a vault the way an import does (`vault.read_note`, `links.Resolver`: link
integrity is judged by exactly the resolver that builds the graph, never a second one) and turns
every problem into a `Finding` at `path:line:col`. Lines and columns are 1-based; columns count
characters. A link points at its `[[` (or `[` of a Markdown link), a frontmatter field at its key,
and a finding about the whole file at 1:1.

Rule codes are stable: a code is never reused for another meaning, new rules get new codes.

| code  | severity | fix | rule |
| ----- | -------- | --- | ---- |
| MN001 | warning² | yes¹ | missing required field(s) `title, id, type, status, created, tags` (R2) |
| MN002 | error    |     | malformed YAML frontmatter, or not a mapping; the file is skipped (R3) |
| MN003 | error    |     | unreadable: invalid UTF-8, NUL byte, size limit, I/O error, outside the vault (R3) |
| MN004 | error    |     | empty file; skipped (R3) |
| MN005 | warning  |     | not followed: symlink leaving the vault, broken symlink or loop, unreadable folder (R1) |
| MN006 | warning  |     | YAML value repaired on reading (`key: #x`, `key: a: b`); quote the value |
| MN007 | warning  |     | UTF-8 byte order mark |
| MN009 | warning  |     | any other reader warning (`Note.warnings`) without a rule of its own |
| MN010 | warning  |     | unresolved link (body, or a frontmatter link field); an `unresolved` edge (R15) |
| MN011 | warning  |     | ambiguous link: several notes or files match, the shortest path wins (R15) |
| MN012 | warning  |     | missing attachment: the link names a file type that is not in the vault |
| MN020 | error    |     | duplicate `id`, on every note sharing it; import keeps the first path (R3) |
| MN030 | warning  |     | id or filename outside `id_scheme`, or its type segment is not the note's `type` |
| MN031 | warning  |     | tag outside `tag_scheme` (`area/…`, `type/…`, `topic/…`) |
| MN032 | warning  | yes | tags not normalised: leading `#`, spaces, duplicates, empty items, `a, b` string |

² An error with `--strict` (R2).
¹ `--fix` writes the defaults of `id`, `title` and `created` into the frontmatter (freezing what
the import already uses); `type`, `status` and `tags` need a human decision.

Exit code (R25): 1 when a finding is an error (or any finding under `--strict`), else 0.
`id_scheme` and `tag_scheme` (in `mindnet.toml`) are off by default, so vaults that follow
other conventions get no MN030/MN031 findings. `id_scheme` names one or more schemes,
comma-separated: `timestamp` (= `YYYYMMDD-HHMM-type-slug`), `type-slug`, or a regular expression
starting with `^` (a named group `type` is compared with the note's type).

`--fix` never changes a note's body: it only inserts missing keys as new lines before the closing
`---` (or adds a frontmatter block to a note without one) and rewrites the `tags` entry, keeps
every other frontmatter line, comment and line ending as written, and re-reads the result to prove
that the body and every other field are unchanged before it writes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import unquote

from . import frontmatter as fm
from .config import Settings
from .errors import ConfigError, MindnetError, NoteError
from .links import Link, Resolution, Resolver, extract_links, fold, frontmatter_links
from .lint_cache import refresh_index
from .text import line_of, line_starts, slugify
from .vault import (
    REQUIRED_FIELDS,
    Note,
    NoteProblem,
    assign_ids,  # the import's own duplicate-id rule (R3), not a copy
    read_note,
)

Severity: TypeAlias = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One lint rule: its stable code, default severity and whether `--fix` can repair it."""

    code: str
    name: str
    severity: Severity
    fixable: bool = False


RULES: dict[str, Rule] = {
    r.code: r
    for r in (
        Rule("MN001", "missing required field", "warning", fixable=True),
        Rule("MN002", "malformed YAML", "error"),
        Rule("MN003", "unreadable file", "error"),
        Rule("MN004", "empty file", "error"),
        Rule("MN005", "path not followed", "warning"),
        Rule("MN006", "YAML value repaired", "warning"),
        Rule("MN007", "byte order mark", "warning"),
        Rule("MN009", "reader warning", "warning"),
        Rule("MN010", "unresolved link", "warning"),
        Rule("MN011", "ambiguous link", "warning"),
        Rule("MN012", "missing attachment", "warning"),
        Rule("MN020", "duplicate id", "error"),
        Rule("MN030", "id/filename scheme", "warning"),
        Rule("MN031", "tag scheme", "warning"),
        Rule("MN032", "tag normalisation", "warning", fixable=True),
    )
}
"""Every rule by code; the table in the module docstring documents the same codes."""

FORMATS = ("text", "json", "github")


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem at one place of one file."""

    path: str
    """Vault-relative path (`LintRun.findings` prefixes the vault folder for display)."""
    line: int
    col: int
    code: str
    severity: Severity
    message: str
    fix: tuple[tuple[str, Any], ...] = ()
    """Frontmatter values `fix_notes` would write (`(key, value)` pairs); empty when not fixable."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON record of `--format json`."""
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class LintReport:
    """The findings of one lint run over one vault."""

    root: str
    findings: tuple[Finding, ...]
    files: int
    """How many files were linted."""
    strict: bool = False

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def exit_code(self) -> int:
        """1 on any error, or on any finding at all under `--strict`; else 0."""
        return 1 if self.errors or (self.strict and self.findings) else 0


# --------------------------------------------------------------------------------------------
# Linting a vault.


def lint_vault(
    root: str | Path,
    settings: Settings,
    files: Iterable[str | Path] | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    *,
    use_cache: bool = True,
) -> LintReport:
    """Lint a whole vault, or some of its files against the whole vault.

    Args:
        root: the vault folder.
        settings: resolved settings; `strict` turns MN001 into an error, `id_scheme` and
            `tag_scheme` switch on MN030 and MN031.
        files: note files as given on a command line (absolute or relative to the working
            directory); None lints every note. Other files are ignored, so a pre-commit hook may
            pass anything staged.
        select: only report codes starting with one of these (all when empty).
        ignore: never report codes starting with one of these.
        use_cache: keep the vault index in `VAULT/.mindnet/lint-index.json` (see `lint_cache`).

    Raises:
        NoteError: the vault folder does not exist.
        ConfigError: an unknown `id_scheme` or rule code.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise NoteError(str(root), "vault folder not found")
    schemes = compile_id_scheme(settings.id_scheme)
    select, ignore = parse_codes(select), parse_codes(ignore)
    # Lint needs neither strict reading (it reports missing fields itself) nor language detection.
    reading = dataclasses.replace(settings, strict=False, languages=settings.languages[:1] or ("en",))
    findings: list[Finding] = []
    wanted: list[str] | None = None
    if files is not None:
        wanted, outside = _vault_paths(root_path, files)
        findings.extend(outside)
    index = refresh_index(root_path, reading, use_cache=use_cache, keep=["*"] if wanted is None else wanted)
    stubs = [e.stub() for e in index.entries.values() if e.note_id is not None]
    kept, duplicates = assign_ids(stubs)
    resolver = Resolver(kept, index.attachments)
    assigned = {n.path: n.note_id for n in kept}
    if wanted is None:
        targets = list(index.entries)
        findings.extend(_walk_finding(p) for p in index.walk_problems)
    else:
        targets = [rel for rel in dict.fromkeys(wanted) if rel in index.entries]
        findings.extend(m for rel in wanted if rel not in index.entries and (m := _missing_file(root_path, rel)))
    target_set = set(targets)
    findings.extend(_duplicate_findings(duplicates, kept, index.entries, target_set))
    for rel in targets:
        entry = index.entries[rel]
        problem = entry.problem()
        note = None if problem else index.read.get(rel)
        if note is None and problem is None:
            try:
                note = read_note(root_path / rel, rel, reading)
            except NoteError as exc:
                problem = NoteProblem(exc.path, exc.line, exc.reason)
        if problem is not None:
            findings.append(problem_finding(problem))
            continue
        assert note is not None
        lines = functools.partial(_header_lines, root_path / rel)
        findings.extend(check_note(note, resolver, settings, assigned.get(rel, note.note_id), schemes, lines))
    chosen = [f for f in findings if _selected(f.code, select, ignore)]
    chosen.sort(key=lambda f: (f.path, f.line, f.col, f.code, f.message))
    return LintReport(str(root_path), tuple(chosen), len(targets), settings.strict)


def _vault_paths(root: Path, files: Iterable[str | Path]) -> tuple[list[str], list[Finding]]:
    """Vault-relative, NFC paths of command-line files (as `vault.discover` names them)."""
    real_root = root.resolve()
    abs_root = Path(os.path.abspath(root))
    rels: list[str] = []
    outside: list[Finding] = []
    for raw in files:
        path = Path(raw)
        rel: str | None = None
        for base, candidate in ((abs_root, Path(os.path.abspath(path))), (real_root, path.resolve())):
            try:
                rel = candidate.relative_to(base).as_posix()
                break
            except ValueError:
                continue
        if rel is None:
            if str(raw).lower().endswith(".md"):
                outside.append(_finding(str(raw), 1, 1, "MN003", f"not inside the vault {root}; pass --vault"))
            continue
        rels.append(unicodedata.normalize("NFC", rel))
    return rels, outside


def _missing_file(root: Path, rel: str) -> Finding | None:
    """A command-line file the walk did not list: gone, or not a note (other type, ignored folder)."""
    if rel.lower().endswith(".md") and not (root / rel).exists():
        return _finding(rel, 1, 1, "MN003", "no such file")
    return None


def _header_lines(path: Path) -> list[str]:
    """The file's first lines, to find the column of frontmatter keys (read_note succeeded, so it decodes)."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            head = fh.read(65536)
    except OSError:
        return []
    return _LINE_SPLIT.split(head)


_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


def _finding(
    path: str,
    line: int,
    col: int,
    code: str,
    message: str,
    severity: Severity | None = None,
    fix: tuple[tuple[str, Any], ...] = (),
) -> Finding:
    return Finding(path, line, col, code, severity or RULES[code].severity, message, fix)


# --------------------------------------------------------------------------------------------
# Rules. Everything below up to the formatters is pure: notes and a resolver in, findings out.

_REPAIR = re.compile(r"^line (\d+): (.*)$")


def problem_finding(problem: NoteProblem) -> Finding:
    """A file `vault.read_note` rejected (R3), by its reason: MN002, MN003 or MN004."""
    reason = problem.reason
    line = problem.line or 1
    if reason.startswith(("malformed YAML", "frontmatter is not a mapping")):
        code = "MN002"
    elif reason.startswith("empty file"):
        code = "MN004"
    elif reason.startswith("duplicate id"):
        code = "MN020"
    else:
        code = "MN003"
    col_match = re.search(r"at column (\d+)", reason)
    col = int(col_match.group(1)) if col_match else 1
    return _finding(problem.path, line, col, code, reason)


def _walk_finding(problem: NoteProblem) -> Finding:
    return _finding(problem.path, problem.line or 1, 1, "MN005", problem.reason)


def _duplicate_findings(
    duplicates: Iterable[NoteProblem],
    kept: Iterable[Note],
    entries: Mapping[str, Any],
    targets: set[str],
) -> list[Finding]:
    """MN020 on every file sharing an explicit id, so linting only the first file still reports it."""
    winner_of = {n.note_id.casefold(): n for n in kept}
    out: list[Finding] = []
    for dup in duplicates:
        note_id = entries[dup.path].note_id
        winner = winner_of.get(note_id.casefold()) if note_id else None
        if dup.path in targets:
            out.append(
                _finding(
                    dup.path, dup.line or 1, 1, "MN020", dup.reason.replace("; note skipped", "; skipped on import")
                )
            )
        if winner is not None and winner.path in targets:
            line = winner.frontmatter_line("id") or 1
            out.append(
                _finding(
                    winner.path,
                    line,
                    1,
                    "MN020",
                    f"id {winner.note_id!r} is also used by {dup.path}, which import skips",
                )
            )
    return out


def check_note(
    note: Note,
    resolver: Resolver,
    settings: Settings,
    note_id: str,
    schemes: Sequence[IdScheme] = (),
    lines: Callable[[], Sequence[str]] = tuple,
) -> list[Finding]:
    """Every finding of one readable note.

    Args:
        note: the note as read (non-strict).
        resolver: the resolver of the whole vault, as the graph uses it.
        settings: `strict`, `tag_scheme`.
        note_id: the id the import gives the note (a defaulted id may have been made unique).
        schemes: compiled `id_scheme` (MN030 is off when empty).
        lines: gives the file's lines (no line breaks), read only when a finding sits on a frontmatter key.
    """

    read: list[Sequence[str]] = []

    def key_pos(key: str) -> tuple[int, int]:
        line = note.frontmatter_line(key)
        if line is None:
            return 1, 1
        if not read:
            read.append(lines())
        text = read[0][line - 1] if 0 < line <= len(read[0]) else ""
        return line, len(text) - len(text.lstrip(" \t")) + 1

    out: list[Finding] = []
    out.extend(_reader_warnings(note))
    out.extend(_missing_fields(note, settings, note_id))
    out.extend(_link_findings(note, resolver, key_pos))
    if schemes:
        out.extend(_scheme_findings(note, schemes, key_pos))
    out.extend(_tag_findings(note, settings, key_pos))
    return out


def _reader_warnings(note: Note) -> list[Finding]:
    out: list[Finding] = []
    for warning in note.warnings:
        if warning.startswith("missing required field"):
            continue  # MN001 is computed from the frontmatter, one finding per note
        if warning.startswith("UTF-8 byte order mark"):
            out.append(_finding(note.path, 1, 1, "MN007", "UTF-8 byte order mark; save the file as UTF-8 without BOM"))
            continue
        m = _REPAIR.match(warning)
        if m:
            out.append(_finding(note.path, int(m.group(1)), 1, "MN006", f"{m.group(2)}; quote the value"))
        else:
            out.append(_finding(note.path, 1, 1, "MN009", warning))
    return out


_FIXABLE_DEFAULTS = ("title", "id", "created")


def _missing_fields(note: Note, settings: Settings, note_id: str) -> list[Finding]:
    """MN001: one finding per note naming every missing required field and the default used (R2)."""
    missing = [f for f in REQUIRED_FIELDS if _blank(note.frontmatter.get(f))]
    if not missing:
        return []
    defaults = {
        "title": repr(note.title),
        "id": repr(note_id),
        "type": repr(note.type),
        "created": "the file's mtime",
        "tags": "[]",
    }
    used = [f"{f}={defaults[f]}" for f in missing if f in defaults]
    message = f"missing required field{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    if used:
        message += f" (defaults: {', '.join(used)})"
    fix = tuple(
        (f, {"title": note.title, "id": note_id, "created": note.created}[f]) for f in _FIXABLE_DEFAULTS if f in missing
    )
    severity: Severity = "error" if settings.strict else "warning"
    return [_finding(note.path, 1, 1, "MN001", message, severity, fix)]


def _blank(value: Any) -> bool:
    return value is None or value == "" or value == []


def _link_findings(note: Note, resolver: Resolver, key_pos: Callable[[str], tuple[int, int]]) -> list[Finding]:
    """MN010-MN012 for body links and frontmatter link fields, judged by the graph's own resolver (R15)."""
    out: list[Finding] = []
    starts: list[int] | None = None
    for link in extract_links(note.fulltext):
        if link.is_url:
            continue
        res = resolver.resolve_link(link, note.path)
        code, message = _judge(res, _shorten(link.raw))
        if code is None or (code == "MN011" and _relative_path_hit(link, note.path, res)):
            continue
        if starts is None:
            starts = line_starts(note.fulltext)
        offset = link.char_start + (1 if link.raw.startswith("!") else 0)  # the `[[` / `[`, not the `!`
        body_line = line_of(starts, offset)
        line = note.body_line - 1 + body_line
        col = offset - starts[body_line - 1] + 1
        out.append(_finding(note.path, line, col, code, message))
    for field, targets in frontmatter_links(note.frontmatter).items():
        for target in targets:
            code, message = _judge(resolver.resolve(target, note.path), f"[[{_shorten(target)}]] in {field!r}")
            if code is not None:
                line, col = key_pos(field)
                out.append(_finding(note.path, line, col, code, message))
    return out


def _relative_path_hit(link: Link, source_path: str, res: Resolution) -> bool:
    """Whether a Markdown link found its target as a path relative to the linking note.

    NOTE: `Resolver` lists the other notes of the same file name as candidates for any target
    without `/` (so `[[index]]` counts as ambiguous, R15); a Markdown link is a relative path,
    though, and `[t](deploy.md)` next to `deploy.md` is exact. The verdict stays the resolver's;
    this only decides that lint does not call an exact path ambiguous.
    """
    if link.kind == "wikilink" or link.raw.startswith("![[") or res.target_path is None:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), unquote(link.target)))
    return fold(_without_md(joined)) == fold(_without_md(res.target_path))


def _without_md(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


def _judge(res: Resolution, shown: str) -> tuple[str | None, str]:
    if res.status == "unresolved":
        return "MN010", f"unresolved link {shown}: no note has this name, id, title or alias"
    if res.status == "attachment" and res.target_path is None:
        return "MN012", f"missing attachment {shown}: no such file in the vault"
    if res.status in ("resolved", "attachment") and res.ambiguous_candidates:
        others = [p for p in res.ambiguous_candidates if p != res.target_path]
        listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return "MN011", f"ambiguous link {shown}: resolves to {res.target_path}, also matches {listed}; write the path"
    return None, ""


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Id schemes (MN030).


@dataclass(frozen=True, slots=True)
class IdScheme:
    """One accepted id/filename shape."""

    name: str
    pattern: re.Pattern[str]
    """Full-match pattern; optional groups `date`, `time` (validated as a timestamp) and `type`."""


_SLUG = r"(?P<slug>[^\W_]+(?:-[^\W_]+)*)"
_BUILTIN_SCHEMES = {
    "timestamp": rf"(?P<date>\d{{8}})-(?P<time>\d{{4}})-(?P<type>[a-z]+)-{_SLUG}",
    "type-slug": rf"(?P<type>[a-z]+)-{_SLUG}",
}
_SCHEME_ALIASES = {"yyyymmdd-hhmm-type-slug": "timestamp", "timestamp": "timestamp", "type-slug": "type-slug"}


def compile_id_scheme(value: str | None) -> tuple[IdScheme, ...]:
    """The schemes named by the `id_scheme` setting (see the module docstring); empty when off.

    Raises:
        ConfigError: an unknown scheme name or an invalid regular expression.
    """
    if not value or value.strip().lower() in ("off", "none", "false"):
        return ()
    parts = [value.strip()] if value.strip().startswith("^") else [p.strip() for p in value.split(",") if p.strip()]
    schemes: list[IdScheme] = []
    for part in parts:
        if part.startswith("^"):
            try:
                schemes.append(IdScheme(part, re.compile(part.removeprefix("^").removesuffix("$"))))
            except re.error as exc:
                raise ConfigError(f"id_scheme: invalid regular expression {part!r}: {exc}") from None
            continue
        name = _SCHEME_ALIASES.get(part.lower())
        if name is None:
            raise ConfigError(
                f"id_scheme: unknown scheme {part!r}; use timestamp (YYYYMMDD-HHMM-type-slug), type-slug, "
                "both comma-separated, or a regular expression starting with ^"
            )
        schemes.append(IdScheme(part, re.compile(_BUILTIN_SCHEMES[name])))
    return tuple(schemes)


def scheme_problem(value: str, note_type: str | None, schemes: Sequence[IdScheme]) -> str | None:
    """Why `value` (an id or a filename stem) fits none of the schemes, or None when one fits."""
    mismatch: str | None = None
    for scheme in schemes:
        m = scheme.pattern.fullmatch(value)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("slug") is not None and slugify(groups["slug"]) != groups["slug"]:
            continue  # upper case or other non-slug text
        if groups.get("date") is not None and not _valid_timestamp(groups["date"], groups.get("time") or "0000"):
            mismatch = f"{groups['date']}-{groups.get('time')} is not a valid date and time"
            continue
        if note_type is not None and groups.get("type") is not None and groups["type"] != note_type:
            mismatch = f"its type segment {groups['type']!r} is not the note's type {note_type!r}"
            continue
        return None
    names = " or ".join(s.name for s in schemes)
    return mismatch or f"does not follow the id scheme {names}"


def _valid_timestamp(date: str, time: str) -> bool:
    try:
        datetime.strptime(date + time, "%Y%m%d%H%M")
    except ValueError:
        return False
    return True


def _scheme_findings(
    note: Note, schemes: Sequence[IdScheme], key_pos: Callable[[str], tuple[int, int]]
) -> list[Finding]:
    out: list[Finding] = []
    note_type = note.type if not _blank(note.frontmatter.get("type")) else None
    if note.id_explicit:
        problem = scheme_problem(note.note_id, note_type, schemes)
        if problem:
            line, col = key_pos("id")
            out.append(_finding(note.path, line, col, "MN030", f"id {note.note_id!r}: {problem}"))
    stem = unicodedata.normalize("NFC", Path(note.path).stem)
    problem = scheme_problem(stem, note_type, schemes)
    if problem:
        out.append(_finding(note.path, 1, 1, "MN030", f"filename {stem!r}: {problem}"))
    return out


# Tags (MN031, MN032).

_TAG_SPLIT = re.compile(r"[,\s]+")
_TAG_SPACE = re.compile(r"\s+")


def normalise_tags(value: Any) -> tuple[str, ...] | None:
    """The normal form of a `tags` value: a list of tags without `#` or spaces, no duplicates.

    Returns:
        The tags in their first spelling (duplicates compared case-insensitively, as Obsidian
        does), or None when the value holds nested mappings or lists that a fix must not drop.
    """
    if _blank(value):
        return ()
    if isinstance(value, dict):
        return None
    items = value if isinstance(value, list) else _TAG_SPLIT.split(str(value))
    out: dict[str, str] = {}
    for item in items:
        if isinstance(item, dict | list):
            return None
        if item is None:
            continue
        tag = _TAG_SPACE.sub("-", str(item).strip().lstrip("#").strip())
        if tag:
            out.setdefault(tag.casefold(), tag)
    return tuple(out.values())


def _tag_findings(note: Note, settings: Settings, key_pos: Callable[[str], tuple[int, int]]) -> list[Finding]:
    raw = note.frontmatter.get("tags")
    if _blank(raw):
        return []
    line, col = key_pos("tags")
    out: list[Finding] = []
    normal = normalise_tags(raw)
    written = [str(t) for t in raw] if isinstance(raw, list) else [str(raw).strip()]
    if normal is not None and list(normal) != written:
        shown = ", ".join(normal)
        out.append(
            _finding(
                note.path, line, col, "MN032", f"tags are not normalised; write [{shown}]", fix=(("tags", normal),)
            )
        )
    if settings.tag_scheme:
        prefixes = tuple(p.strip().strip("/") for p in settings.tag_scheme if p.strip().strip("/"))
        allowed = ", ".join(f"{p}/…" for p in prefixes)
        for tag in normal or note.tags:
            head, slash, rest = tag.partition("/")
            if not (slash and rest and head in prefixes):
                out.append(
                    _finding(note.path, line, col, "MN031", f"tag {tag!r} is outside the tag scheme ({allowed})")
                )
    return out


# --------------------------------------------------------------------------------------------
# Rule selection.


def parse_codes(values: Iterable[str] | None) -> tuple[str, ...]:
    """Codes or code prefixes from `--select`/`--ignore` values (comma-separated, repeatable).

    Raises:
        ConfigError: a value that is the prefix of no rule code.
    """
    codes: list[str] = []
    for value in values or ():
        for part in value.split(","):
            code = part.strip().upper()
            if not code:
                continue
            if code != "ALL" and not any(c.startswith(code) for c in RULES):
                raise ConfigError(f"unknown rule code {part.strip()!r}; codes are {', '.join(RULES)}")
            codes.append(code)
    return tuple(codes)


def _selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    if select and not any(s == "ALL" or code.startswith(s) for s in select):
        return False
    return not any(i == "ALL" or code.startswith(i) for i in ignore)


# --------------------------------------------------------------------------------------------
# Output.


def format_findings(findings: Sequence[Finding], output_format: str) -> str:
    """Findings as `text` (`path:line:col: CODE message`), `json` (a list) or `github` (annotations).

    Raises:
        ConfigError: an unknown format.
    """
    if output_format == "text":
        return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message}\n" for f in findings)
    if output_format == "json":
        return json.dumps([f.as_dict() for f in findings], ensure_ascii=False, indent=2) + "\n"
    if output_format == "github":
        return "".join(_github(f) for f in findings)
    raise ConfigError(f"unknown lint format {output_format!r}; one of {', '.join(FORMATS)}")


def _github(f: Finding) -> str:
    """A GitHub Actions workflow command; `%`, CR, LF (and `:` `,` in properties) must be escaped."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    return f"::{f.severity} file={prop(f.path)},line={f.line},col={f.col},title={f.code}::{data(f.message)}\n"


def summary_line(findings: Sequence[Finding], files: int) -> str:
    """One line for stderr: counts by severity and how many `--fix` could repair."""
    if not findings:
        return f"no findings in {files} file{'s' if files != 1 else ''}"
    errors = sum(1 for f in findings if f.severity == "error")
    fixable = sum(1 for f in findings if f.fix)
    text = f"{len(findings)} finding{'s' if len(findings) != 1 else ''} ({errors} error{'s' if errors != 1 else ''}, "
    text += f"{len(findings) - errors} warning{'s' if len(findings) - errors != 1 else ''}) in {files} files"
    return text + (f"; {fixable} fixable with --fix" if fixable else "")


# --------------------------------------------------------------------------------------------
# Command-line paths.

VAULT_MARKERS = ("mindnet.toml", ".obsidian", ".mindnet")
"""A folder holding one of these is a vault root, for file arguments given without `--vault`."""


def find_vault_root(path: Path, default: Path | None = None) -> Path:
    """The nearest folder above `path` that holds a vault marker, else `default` (the working directory)."""
    for folder in Path(os.path.abspath(path)).parents:
        if any((folder / marker).exists() for marker in VAULT_MARKERS):
            return folder
    return default or Path.cwd()


def group_paths(paths: Sequence[Path], vault: Path | None) -> dict[Path, list[Path] | None]:
    """Command-line arguments by vault: a folder is a vault of its own; files go to `vault` or their own.

    Raises:
        MindnetError: an argument that does not exist and is no Markdown file (a typo, not a deleted note).
    """
    groups: dict[Path, list[Path] | None] = {}
    for path in paths:
        if path.is_dir():
            groups[path] = None
            continue
        if not path.exists() and not path.name.lower().endswith(".md"):
            raise MindnetError(f"{path}: no such file or folder")
        root = vault if vault is not None else find_vault_root(path)
        existing = groups.setdefault(root, [])
        if existing is not None:
            existing.append(path)
    return groups


@dataclass(frozen=True, slots=True)
class LintRun:
    """Reports of every vault named on a command line, and what `--fix` changed."""

    reports: tuple[tuple[str, LintReport], ...]
    """(display prefix of the vault folder, report)."""
    fixes: tuple[FixSummary, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        """All findings, paths shown relative to the working directory where the vault lies below it."""
        return [
            dataclasses.replace(f, path=prefix + f.path) for prefix, report in self.reports for f in report.findings
        ]

    @property
    def files(self) -> int:
        return sum(r.files for _, r in self.reports)

    @property
    def exit_code(self) -> int:
        return max((r.exit_code for _, r in self.reports), default=0)


def run_lint(
    paths: Sequence[Path],
    vault: Path | None,
    settings_for: Callable[[Path], Settings],
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    *,
    fix: bool = False,
    use_cache: bool = True,
) -> LintRun:
    """What `mindnet lint` does: lint each vault named by the arguments, fix, lint again.

    Args:
        paths: vault folders or note files (default `.` when empty).
        vault: the vault that file arguments belong to; found from vault markers when None.
        settings_for: builds the settings of a vault folder (the CLI's four config layers).
        select: codes or prefixes to report; ignore: codes or prefixes to drop.
        fix: apply `fix_notes` to the fixable findings, then lint the same files again.
        use_cache: see `lint_vault`.
    """
    reports: list[tuple[str, LintReport]] = []
    fixes: list[FixSummary] = []
    for root, files in group_paths(list(paths) or [Path(".")], vault).items():
        settings = settings_for(root)
        report = lint_vault(root, settings, files, select, ignore, use_cache=use_cache)
        if fix:
            summary = fix_notes(root, report.findings)
            fixes.append(summary)
            if summary.changed:
                report = lint_vault(root, settings, files, select, ignore, use_cache=use_cache)
        reports.append((_display_prefix(root), report))
    return LintRun(tuple(reports), tuple(fixes))


def _display_prefix(root: Path) -> str:
    """How the vault folder is shown before vault paths: relative below the working directory, else absolute."""
    absolute = Path(os.path.abspath(root))
    try:
        rel = absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix().rstrip("/") + "/"
    return "" if rel == "." else rel + "/"


# --------------------------------------------------------------------------------------------
# Fixes.


@dataclass(frozen=True, slots=True)
class FixSummary:
    """What `fix_notes` did in one vault."""

    root: str
    changed: tuple[str, ...]
    """Vault paths of the files rewritten."""
    fixed: int
    """Findings repaired."""
    skipped: tuple[str, ...] = ()
    """`path: reason` for fixable findings left alone because a safe edit was not possible."""

    def one_line(self) -> str:
        text = f"fixed {self.fixed} finding{'s' if self.fixed != 1 else ''} in {len(self.changed)} files"
        return text + (f"; {len(self.skipped)} left for a human" if self.skipped else "")


def fix_notes(root: str | Path, findings: Iterable[Finding]) -> FixSummary:
    """Write the frontmatter edits of fixable findings (MN001 defaults, MN032 tags); never the body.

    Each file is changed only when re-reading the new text gives back the same body and the same
    value of every field not fixed; otherwise it is listed in `skipped`.
    """
    root_path = Path(root)
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if f.fix:
            by_path.setdefault(f.path, []).append(f)
    changed: list[str] = []
    skipped: list[str] = []
    fixed = 0
    for rel, items in sorted(by_path.items()):
        path = root_path / rel
        edits: dict[str, Any] = {}
        for f in items:
            edits.update(f.fix)
        try:
            raw = path.read_bytes()
            new_text = fix_text(raw.decode("utf-8"), edits)
        except (OSError, UnicodeDecodeError, FixError) as exc:
            skipped.append(f"{rel}: {exc}")
            continue
        new = new_text.encode("utf-8")
        if new != raw:
            path.write_bytes(new)
            changed.append(rel)
        fixed += len(items)
    return FixSummary(str(root_path), tuple(changed), fixed, tuple(skipped))


class FixError(MindnetError):
    """A fix that cannot be applied without touching more than the frontmatter keys it names."""


_OPEN_FENCE = re.compile(r"---[ \t]*(\r\n|\r|\n)")
_KEEP_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_FIRST_EOL = re.compile(r"\r\n|\r|\n")


def fix_text(text: str, edits: Mapping[str, Any]) -> str:
    """The file text with frontmatter `edits` applied: new keys appended, blank keys filled, `tags` rewritten.

    Args:
        text: the whole file (a leading BOM is kept).
        edits: key → value; strings for scalar fields, a tuple of strings for `tags`.

    Raises:
        FixError: no safe edit exists (a flow-style frontmatter, a key written twice…).
    """
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    t = text[len(bom) :]
    parts = fm.split(t)
    if parts.yaml_text is None:
        m = _FIRST_EOL.search(t)
        eol = m.group() if m else "\n"
        head, yaml_text, tail, body = f"---{eol}", "", f"---{eol}", t
    else:
        m_open = _OPEN_FENCE.match(t)
        assert m_open is not None
        eol = m_open.group(1)
        head, yaml_text = t[: m_open.end()], parts.yaml_text
        tail = t[m_open.end() + len(yaml_text) : parts.body_offset]
        body = parts.body
    try:
        before = fm.parse(yaml_text, "<fix>", 0) if yaml_text else None
    except NoteError as exc:
        raise FixError(f"frontmatter does not parse: {exc.reason}") from None
    data = dict(before.data) if before else {}
    key_rows = dict(before.field_lines) if before else {}
    lines = _KEEP_LINES.findall(yaml_text)
    appended: list[str] = []
    replaced: dict[int, list[str]] = {}
    for key, value in edits.items():
        if key == "tags":
            new_lines = _tags_lines(lines, key_rows, tuple(value), eol)
        else:
            # A date-like id or title is quoted: YAML 1.1 readers (and Obsidian's) would make it a date.
            quote = key != "created" and _DATE_LIKE.match(str(value)) is not None
            new_lines = [f"{key}: {_quoted(str(value)) if quote else _yaml_scalar(str(value), flow=False)}{eol}"]
        if key in key_rows:
            row = key_rows[key]
            end = _entry_end(lines, key_rows, row) if key == "tags" else row + 1
            if key != "tags" and not _blank_entry(lines[row], key):
                raise FixError(f"{key!r} has a value that is not blank; not overwritten")
            replaced[row] = new_lines
            for dropped in range(row + 1, end):
                replaced[dropped] = []
        else:
            appended.extend(new_lines)
    out_lines: list[str] = []
    for i, line in enumerate(lines):
        out_lines.extend(replaced.get(i, [line]))
    if out_lines and not out_lines[-1].endswith(("\n", "\r")):
        out_lines[-1] += eol
    new_text = bom + head + "".join(out_lines + appended) + tail + body
    _verify(new_text[len(bom) :], body, data, edits)
    return new_text


def _blank_entry(line: str, key: str) -> bool:
    blank = rf"{re.escape(key)}:[ \t]*(?:''|\"\"|~|null|Null|NULL|\[\])?[ \t]*(?:\r\n|\r|\n)?"
    return re.fullmatch(blank, line) is not None


def _entry_end(lines: Sequence[str], key_rows: Mapping[str, int], row: int) -> int:
    """The row after a key's value: the next key's row, less trailing blank lines and column-0 comments."""
    later = [r for r in key_rows.values() if r > row]
    end = min(later) if later else len(lines)
    while end - 1 > row and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return end


_ITEM = re.compile(r"([ \t]*)-[ \t]")


def _tags_lines(lines: Sequence[str], key_rows: Mapping[str, int], tags: tuple[str, ...], eol: str) -> list[str]:
    """The `tags` entry in normal form, in the style it was written: block list or flow list."""
    row = key_rows.get("tags")
    if row is not None and tags:
        end = _entry_end(lines, key_rows, row)
        value = lines[row].split(":", 1)[1].strip()
        items = [m for m in (_ITEM.match(line) for line in lines[row + 1 : end]) if m]
        if not value and items:
            indent = items[0].group(1)
            return [f"tags:{eol}", *(f"{indent}- {_yaml_scalar(t, flow=False)}{eol}" for t in tags)]
    return [f"tags: [{', '.join(_yaml_scalar(t, flow=True) for t in tags)}]{eol}"]


_PLAIN = re.compile(r"[\w./][\w ./+:-]*")
_PLAIN_FLOW = re.compile(r"[\w./][\w ./+-]*")
_NUMBER_LIKE = re.compile(r"[-+]?(?:\d[\d_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+|0o[0-7]+")
_RESERVED = frozenset({"true", "false", "null", "~", "yes", "no", "on", "off", "y", "n"})


def _yaml_scalar(value: str, *, flow: bool) -> str:
    """A YAML scalar that reads back as `value`: plain when obviously safe, else double-quoted."""
    plain = (_PLAIN_FLOW if flow else _PLAIN).fullmatch(value)
    if (
        plain
        and ": " not in value
        and " #" not in value
        and not value.endswith((" ", ":"))
        and value.lower() not in _RESERVED
        and not _NUMBER_LIKE.fullmatch(value)
    ):
        return value
    return _quoted(value)


_DATE_LIKE = re.compile(r"\d{4}-\d\d?-\d\d?(?:$|[T ])")


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _verify(new_text: str, body: str, data: Mapping[str, Any], edits: Mapping[str, Any]) -> None:
    """Re-read the fixed text: same body, every untouched field equal, every edited field as intended."""
    parts = fm.split(new_text)
    if parts.yaml_text is None or parts.body != body:
        raise FixError("the fix would change the body; not written")
    try:
        after = fm.parse(parts.yaml_text, "<fix>", parts.yaml_line).data
    except NoteError as exc:
        raise FixError(f"the fixed frontmatter would not parse ({exc.reason}); not written") from None
    for key, value in data.items():
        if key not in edits and after.get(key) != value:
            raise FixError(f"the fix would change {key!r}; not written")
    for key, value in edits.items():
        expected = list(value) if key == "tags" else str(value)
        if after.get(key) != expected:
            raise FixError(f"{key!r} would not read back as written; not written")
