"""YAML frontmatter: split it off the body and parse it safely, repairing YAML 1.1 surprises (R2, R3).

PyYAML implements YAML 1.1, whose implicit types corrupt what people write in notes: `no` becomes
False, `12:30` becomes 750, `2024-01-05` a date object, `tags: #x` a comment (None),
`related: [[Note]]` a nested list, and `title: a: b` a syntax error. The loader here resolves plain
scalars by YAML 1.2's core schema (only true/false/null and plain numbers are typed), keeps the
text-valued fields exactly as written, and repairs the two syntax cases, reporting each repair.

YAML aliases make a few hundred bytes stand for billions of values ("billion laughs"). PyYAML shares
aliased nodes, but every later walk or copy (JSON for the store, the note cache, lint) expands them,
so the event stream is measured first, in one linear pass and without recursion: values counted
with aliases expanded, nesting depth, and self-referencing aliases. Past a limit the note is refused
before any value is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

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

MAX_REPAIRS = 50
"""Each repair re-parses the frontmatter, so their number is bounded to keep a note's parse linear."""


class Limits(NamedTuple):
    """Bounds on one frontmatter block (settings `frontmatter_max_nodes`, `frontmatter_max_depth`)."""

    max_nodes: int = 10_000
    """Values (scalars and collections) counted with every alias expanded."""
    max_depth: int = 64
    """Nesting of collections, aliases expanded; the walks over values are recursive."""


_OPEN = re.compile(r"---[ \t]*(?:\r\n|\r|\n)")
_CLOSE = re.compile(r"(?:^|(?<=\r))(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|$)", re.M)
"""The closing fence at a line start; `^` knows only LF, so a line after a lone CR (classic Mac or
mixed line endings) is a line start too: else the YAML was chunked as body text and its fields lost."""
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# The values run to the end of the line and are right-stripped in code: a lazy `.*?` before `[ \t]*$`
# backtracks quadratically on a line of many spaces followed by a non-space.
_COMMENT_VALUE = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+(#[^\r\n]*)$")
_PLAIN_VALUE = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+([^'\"\s\[{|>][^\r\n]*)$")


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


DEFAULT_LIMITS = Limits()


def parse(yaml_text: str, path: str, first_line: int = 2, limits: Limits = DEFAULT_LIMITS) -> Parsed:
    """Parse frontmatter YAML into a mapping, repairing `key: a: b` and `key: #x` values.

    Raises:
        NoteError: malformed YAML that cannot be repaired, a top level that is not a mapping, or
            a frontmatter over `limits`; the line is the file line of the error.
    """
    lines = _LINE_BREAK.split(yaml_text)
    repairs: list[str] = []
    for i, line in enumerate(lines):
        m = _COMMENT_VALUE.match(line)
        if m:
            value = m.group(2).rstrip(" \t")
            lines[i] = f"{m.group(1)}: {_quote(value)}"
            repairs.append(f"line {first_line + i}: value of {m.group(1)!r} starts with '#', read as text")
    colon_repairs = 0
    while True:
        source = "\n".join(lines)
        try:
            node, data = _load(source, path, first_line, limits)
            break
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            row = mark.line if mark is not None else None
            if row is not None and colon_repairs < MAX_REPAIRS and _repair_colon(lines, row):
                colon_repairs += 1
                repairs.append(f"line {first_line + row}: value with ': ' read as text")
                continue
            line = first_line + row if row is not None else first_line
            problem = (exc.problem or "syntax error").strip()
            if colon_repairs >= MAX_REPAIRS:
                problem += f" (after {MAX_REPAIRS} repaired values; quote values that contain ': ')"
            raise NoteError(path, f"malformed YAML frontmatter: {problem}", line) from None
        except yaml.YAMLError as exc:
            raise NoteError(path, f"malformed YAML frontmatter: {exc}", first_line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise NoteError(path, "frontmatter is not a mapping of fields", first_line)
    data = {str(k): v for k, v in data.items()}
    _keep_written_text(node, data)
    done: dict[int, Any] = {}
    for key, value in list(data.items()):
        data[key] = _unnest_wikilinks(value, done)
    field_lines = _field_lines(node, first_line)
    return Parsed(data, tuple(repairs), field_lines)


def _load(source: str, path: str, first_line: int, limits: Limits) -> tuple[Any, Any]:
    """The node graph and the constructed value, once the event stream is known to be within `limits`.

    Raises:
        yaml.YAMLError: malformed YAML (the caller may repair it and retry).
        NoteError: over a limit, a self-referencing alias, or a typed scalar that cannot be built.
    """
    _measure(source, path, first_line, limits)
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        try:
            data = loader.construct_document(node) if node is not None else None
        except (ValueError, TypeError, OverflowError) as exc:  # `!!int abc`, `!!float x`, `!!timestamp 1-2-3`
            raise NoteError(path, f"malformed YAML frontmatter: bad tagged value: {exc}", first_line) from None
    finally:
        loader.dispose()
    return node, data


@dataclass(slots=True)
class _Open:
    """A collection whose end event has not come yet."""

    anchor: str | None
    values: int = 1
    """Values inside so far, itself included, aliases expanded."""
    height: int = 0
    """Height of its tallest child (0: a leaf)."""


def _measure(source: str, path: str, first_line: int, limits: Limits) -> None:
    """Walk the YAML events once, counting values with aliases expanded, and refuse past `limits`.

    An anchor's expanded size and height are recorded when its node ends, so an alias costs one
    lookup however often it is repeated: the work is linear in the text, never in the expansion.
    """
    size: dict[str, int] = {}
    height: dict[str, int] = {}
    unfinished: dict[str, bool] = {}
    stack: list[_Open] = []
    total = 0
    for event in yaml.parse(source, Loader=_Loader):
        line = first_line + event.start_mark.line
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(event.anchor))
            if event.anchor:
                unfinished[event.anchor] = True
            total += 1
            _check(total, len(stack), limits, path, line)
            continue
        if isinstance(event, yaml.ScalarEvent):
            anchor, count, own = event.anchor, 1, 0
            total += 1
        elif isinstance(event, yaml.AliasEvent):
            name = event.anchor or ""
            if unfinished.get(name):
                raise NoteError(path, f"frontmatter alias *{name} refers to itself (a recursive value)", line)
            anchor, count, own = None, size.get(name, 1), height.get(name, 0)
            total += count
        elif isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            anchor, count, own = done.anchor, done.values, done.height + 1  # its values are counted already
        else:
            continue
        if anchor:
            size[anchor], height[anchor], unfinished[anchor] = count, own, False
        if stack:
            stack[-1].values += count
            stack[-1].height = max(stack[-1].height, own)
        _check(total, len(stack) + own, limits, path, line)


def _check(total: int, depth: int, limits: Limits, path: str, line: int) -> None:
    if total > limits.max_nodes:
        what = f"over {limits.max_nodes} values once aliases are expanded (frontmatter_max_nodes)"
    elif depth > limits.max_depth:
        what = f"nested deeper than {limits.max_depth} levels (frontmatter_max_depth)"
    else:
        return
    raise NoteError(path, f"frontmatter too large: {what}", line)


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


def _unnest_wikilinks(value: Any, done: dict[int, Any] | None = None) -> Any:
    """`related: [[Note]]` parses as [['Note']]; turn each one-string inner list back into "[[Note]]".

    `done` maps an aliased (shared) list or mapping to its result, so it is copied once and stays shared.
    """
    done = {} if done is None else done
    if not isinstance(value, list | dict):
        return value
    if id(value) in done:
        return done[id(value)]
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], list) and len(value[0]) == 1 and isinstance(value[0][0], str):
            result: Any = f"[[{value[0][0]}]]"
        else:
            result = [_unnest_wikilinks(v, done) for v in value]
    else:
        result = {k: _unnest_wikilinks(v, done) for k, v in value.items()}
    done[id(value)] = result
    return result


def _field_lines(node: Any, first_line: int) -> dict[str, int]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): first_line + k.start_mark.line for k, _ in node.value}
