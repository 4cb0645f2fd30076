"""YAML frontmatter: split it off the body and parse it safely, repairing YAML 1.1 surprises (R2, R3).

PyYAML implements YAML 1.1, whose implicit types corrupt what people write in notes: `no` becomes
False, `12:30` becomes 750, `2024-01-05` a date object, `tags: #x` a comment (None),
`related: [[Note]]` a nested list, and `title: a: b` a syntax error. The loader here resolves plain
scalars by YAML 1.2's core schema (only true/false/null and plain numbers are typed), keeps the
text-valued fields exactly as written, and repairs the two syntax cases, reporting each repair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import NoteError

_BASE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """Safe loader with YAML 1.2 core-schema implicit types (no yes/no/on/off, no base 60, no dates)."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$"),
    list("-+0123456789."),
)

TEXT_FIELDS = ("id", "title", "type", "status", "area", "project", "priority", "lang", "created", "updated")
"""Fields kept as the exact scalar text the user wrote (`id: 0012` stays "0012")."""
LIST_FIELDS = ("tags", "aliases", "people")

_OPEN = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|$)", re.M)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_COMMENT_VALUE = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+(#[^\r\n]*?)[ \t]*$")
_PLAIN_VALUE = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+([^'\"\s\[{|>][^\r\n]*?)[ \t]*$")


@dataclass(frozen=True, slots=True)
class Split:
    """A file split into frontmatter and body."""

    yaml_text: str | None
    """The YAML between the fences, or None when the file has no frontmatter."""
    body: str
    body_offset: int
    """Char offset of the body in the file text."""
    body_line: int
    """1-based file line of the body's first line."""
    yaml_line: int
    """1-based file line of the first YAML line (2 when present)."""


def split(text: str) -> Split:
    """Split a leading `---` fenced block off the text; an unclosed fence means no frontmatter."""
    m = _OPEN.match(text)
    if not m:
        return Split(None, text, 0, 1, 0)
    close = _CLOSE.search(text, m.end())
    if not close:
        return Split(None, text, 0, 1, 0)
    yaml_text = text[m.end() : close.start()]
    body_offset = close.end()
    body_line = 1 + len(_LINE_BREAK.findall(text, 0, body_offset))
    return Split(yaml_text, text[body_offset:], body_offset, body_line, 2)


@dataclass(frozen=True, slots=True)
class Parsed:
    data: dict[str, Any]
    repairs: tuple[str, ...]
    """One line per repaired YAML surprise, with its file line."""
    field_lines: dict[str, int]
    """1-based file line of each top-level key, for precise lint findings."""


def parse(yaml_text: str, path: str, first_line: int = 2) -> Parsed:
    """Parse frontmatter YAML into a mapping, repairing `key: a: b` and `key: #x` values.

    Raises:
        NoteError: malformed YAML that cannot be repaired, or a top level that is not a mapping;
            the line is the file line of the error.
    """
    lines = _LINE_BREAK.split(yaml_text)
    repairs: list[str] = []
    for i, line in enumerate(lines):
        m = _COMMENT_VALUE.match(line)
        if m:
            lines[i] = f"{m.group(1)}: {_quote(m.group(2))}"
            repairs.append(f"line {first_line + i}: value of {m.group(1)!r} starts with '#', read as text")
    for _attempt in range(len(lines) + 1):
        source = "\n".join(lines)
        try:
            loader = _Loader(source)
            try:
                node = loader.get_single_node()
                data = loader.construct_document(node) if node is not None else None
            finally:
                loader.dispose()
            break
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            row = mark.line if mark is not None else None
            if row is not None and _repair_colon(lines, row):
                repairs.append(f"line {first_line + row}: value with ': ' read as text")
                continue
            line = first_line + row if row is not None else first_line
            problem = (exc.problem or "syntax error").strip()
            raise NoteError(path, f"malformed YAML frontmatter: {problem}", line) from None
        except yaml.YAMLError as exc:
            raise NoteError(path, f"malformed YAML frontmatter: {exc}", first_line) from None
    else:  # pragma: no cover - every repair removes one bad line, so the loop always breaks
        raise NoteError(path, "malformed YAML frontmatter", first_line)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise NoteError(path, "frontmatter is not a mapping of fields", first_line)
    data = {str(k): v for k, v in data.items()}
    _keep_written_text(node, data)
    for key, value in list(data.items()):
        data[key] = _unnest_wikilinks(value)
    field_lines = _field_lines(node, first_line)
    return Parsed(data, tuple(repairs), field_lines)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _repair_colon(lines: list[str], row: int) -> bool:
    """Quote a plain `key: a: b` value on the error row (PyYAML reports it on that row)."""
    for candidate in (row, row - 1):
        if 0 <= candidate < len(lines):
            m = _PLAIN_VALUE.match(lines[candidate])
            if m and ": " in m.group(2):
                lines[candidate] = f"{m.group(1)}: {_quote(m.group(2))}"
                return True
    return False


def _keep_written_text(node: Any, data: dict[str, Any]) -> None:
    """Replace typed scalars of text fields by the exact text written in the file."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key in TEXT_FIELDS and isinstance(value_node, yaml.ScalarNode) and data.get(key) is not None:
            data[key] = value_node.value
        elif key in LIST_FIELDS and isinstance(value_node, yaml.SequenceNode):
            data[key] = [
                item.value if isinstance(item, yaml.ScalarNode) else data[key][i]
                for i, item in enumerate(value_node.value)
            ]
        elif key in LIST_FIELDS and isinstance(value_node, yaml.ScalarNode) and data.get(key) is not None:
            data[key] = value_node.value


def _unnest_wikilinks(value: Any) -> Any:
    """`related: [[Note]]` parses as [['Note']]; turn each one-string inner list back into "[[Note]]"."""
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], list) and len(value[0]) == 1 and isinstance(value[0][0], str):
            return f"[[{value[0][0]}]]"
        return [_unnest_wikilinks(v) for v in value]
    if isinstance(value, dict):
        return {k: _unnest_wikilinks(v) for k, v in value.items()}
    return value


def _field_lines(node: Any, first_line: int) -> dict[str, int]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): first_line + k.start_mark.line for k, _ in node.value}
