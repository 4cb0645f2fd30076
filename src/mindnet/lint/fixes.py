"""`mindnet lint --fix`: frontmatter edits that provably leave the body and every other field alone.

`--fix` never changes a note's body: it only inserts missing keys as new lines before the closing
`---` (or adds a frontmatter block to a note without one) and rewrites the `tags` entry, keeps
every other frontmatter line, comment and line ending as written, and re-reads the result to prove
that the body and every other field are unchanged before it writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import frontmatter as fm
from ..errors import MindnetError, NoteError
from ..vault import note_file
from .rules import Finding


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
        path = note_file(root_path / rel)  # the NFD name on disk of an NFC vault path
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
