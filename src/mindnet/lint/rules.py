"""The rules of `mindnet lint` (R27): the rule table, `Finding`, and every check of one note.

Pure: a note and the vault's resolver in, findings out. The rule codes and what each one means are
documented in the table of the `mindnet.lint` package docstring (a test keeps both in step).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import unquote

from ..config import Settings
from ..errors import ConfigError
from ..links import Link, Resolution, Resolver, extract_links, fold, frontmatter_links
from ..text import line_of, line_starts, slugify
from ..vault import NAME_NOT_UTF8, REQUIRED_FIELDS, Note, NoteProblem

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
        Rule("MN013", "link to a skipped note", "warning"),
        Rule("MN020", "duplicate id", "error"),
        Rule("MN030", "id/filename scheme", "warning"),
        Rule("MN031", "tag scheme", "warning"),
        Rule("MN032", "tag normalisation", "warning", fixable=True),
    )
}
"""Every rule by code; the table in the package docstring documents the same codes."""


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


def new_finding(
    path: str,
    line: int,
    col: int,
    code: str,
    message: str,
    severity: Severity | None = None,
    fix: tuple[tuple[str, Any], ...] = (),
) -> Finding:
    """A finding with the rule's default severity unless `severity` overrides it (MN001 under strict)."""
    return Finding(path, line, col, code, severity or RULES[code].severity, message, fix)


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
    return new_finding(problem.path, line, col, code, reason)


def walk_finding(problem: NoteProblem) -> Finding:
    """MN005: a folder or symlink the vault walk did not follow; MN003 (an error) for a note file it
    could not read at all, a name that is not UTF-8: the import skips that note, so lint must fail too."""
    unreadable = problem.reason.startswith(NAME_NOT_UTF8) and problem.path.lower().endswith(".md")
    return new_finding(problem.path, problem.line or 1, 1, "MN003" if unreadable else "MN005", problem.reason)


def duplicate_findings(
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
                new_finding(
                    dup.path, dup.line or 1, 1, "MN020", dup.reason.replace("; note skipped", "; skipped on import")
                )
            )
        if winner is not None and winner.path in targets:
            line = winner.frontmatter_line("id") or 1
            out.append(
                new_finding(
                    winner.path,
                    line,
                    1,
                    "MN020",
                    f"id {winner.note_id!r} is also used by {dup.path}, which import skips",
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class SkippedNotes:
    """The note files an import skips (malformed YAML, unreadable, empty, duplicate id) and why.

    Why: a link to one of them is unresolved in the graph, yet its target exists; "no note has this
    name" sent users looking for a typo (issue 28). A link that this resolver finds is MN013 instead,
    naming the skipped file and the line of its problem.
    """

    resolver: Resolver
    """Over stubs of the skipped files (see `lint.runner`); only consulted for unresolved links."""
    problems: Mapping[str, NoteProblem]
    """Vault path of each skipped file -> why the import skips it."""

    def judge(self, res: Resolution, shown: str) -> tuple[str, str] | None:
        """MN013 and its message when `res` (this resolver's answer) found a skipped file, else None."""
        problem = self.problems.get(res.target_path or "") if res.status == "resolved" else None
        if problem is None:
            return None
        reason = problem.reason.removesuffix("; note skipped")
        where = f"{problem.path}:{problem.line or 1}"
        return "MN013", f"link {shown} names {problem.path}, which the import skips ({where}: {reason}); fix that note"


def check_note(
    note: Note,
    resolver: Resolver,
    settings: Settings,
    note_id: str,
    schemes: Sequence[IdScheme] = (),
    lines: Callable[[], Sequence[str]] = tuple,
    skipped: SkippedNotes | None = None,
) -> list[Finding]:
    """Every finding of one readable note.

    Args:
        note: the note as read (non-strict).
        resolver: the resolver of the whole vault, as the graph uses it.
        settings: `strict`, `tag_scheme`.
        note_id: the id the import gives the note (a defaulted id may have been made unique).
        schemes: compiled `id_scheme` (MN030 is off when empty).
        lines: gives the file's lines (no line breaks), read only when a finding sits on a frontmatter key.
        skipped: the files the import skips; an unresolved link to one is MN013, not MN010.
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
    out.extend(_link_findings(note, resolver, key_pos, skipped))
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
            out.append(
                new_finding(note.path, 1, 1, "MN007", "UTF-8 byte order mark; save the file as UTF-8 without BOM")
            )
            continue
        m = _REPAIR.match(warning)
        if m:
            out.append(new_finding(note.path, int(m.group(1)), 1, "MN006", f"{m.group(2)}; quote the value"))
        else:
            out.append(new_finding(note.path, 1, 1, "MN009", warning))
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
    return [new_finding(note.path, 1, 1, "MN001", message, severity, fix)]


def _blank(value: Any) -> bool:
    return value is None or value == "" or value == []


def _link_findings(
    note: Note, resolver: Resolver, key_pos: Callable[[str], tuple[int, int]], skipped: SkippedNotes | None
) -> list[Finding]:
    """MN010-MN013 for body links and frontmatter link fields, judged by the graph's own resolver (R15)."""
    out: list[Finding] = []
    starts: list[int] | None = None
    for link in extract_links(note.fulltext):
        if link.is_url:
            continue
        res = resolver.resolve_link(link, note.path)
        code, message = _judge(res, _shorten(link.raw))
        if code == "MN010" and skipped is not None:
            code, message = skipped.judge(skipped.resolver.resolve_link(link, note.path), _shorten(link.raw)) or (
                code, message)
        if code is None or (code == "MN011" and _relative_path_hit(link, note.path, res)):
            continue
        if starts is None:
            starts = line_starts(note.fulltext)
        offset = link.char_start + (1 if link.raw.startswith("!") else 0)  # the `[[` / `[`, not the `!`
        body_line = line_of(starts, offset)
        line = note.body_line - 1 + body_line
        col = offset - starts[body_line - 1] + 1
        out.append(new_finding(note.path, line, col, code, message))
    for field, targets in frontmatter_links(note.frontmatter).items():
        for target in targets:
            shown = f"[[{_shorten(target)}]] in {field!r}"
            code, message = _judge(resolver.resolve(target, note.path), shown)
            if code == "MN010" and skipped is not None:
                code, message = skipped.judge(skipped.resolver.resolve(target, note.path), shown) or (code, message)
            if code is not None:
                line, col = key_pos(field)
                out.append(new_finding(note.path, line, col, code, message))
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
    """The schemes named by the `id_scheme` setting (see the `mindnet.lint` docstring); empty when off.

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
            out.append(new_finding(note.path, line, col, "MN030", f"id {note.note_id!r}: {problem}"))
    stem = unicodedata.normalize("NFC", Path(note.path).stem)
    problem = scheme_problem(stem, note_type, schemes)
    if problem:
        out.append(new_finding(note.path, 1, 1, "MN030", f"filename {stem!r}: {problem}"))
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
            new_finding(
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
                    new_finding(note.path, line, col, "MN031", f"tag {tag!r} is outside the tag scheme ({allowed})")
                )
    return out
