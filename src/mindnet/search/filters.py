"""What a search result must satisfy (R22), and how that becomes the store's neutral `Filter`."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import MindnetError
from ..store import AnyOf, Condition, Equals, Filter, Prefix, Range

ISO_DATE = re.compile(r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})(?:[T ](?P<hm>[0-9]{2}:[0-9]{2})"
                      r"(?::(?P<s>[0-9]{2})(?:\.[0-9]+)?(?: ?(?:Z|[+-][0-9]{2}:?[0-9]{2}))?)?)?")
"""The dates the store reads: `2025-09-03`, `2025-09-03T10:00`, `2025-09-03T10:00:00[.f][Z|+02:00]`
(each form tested against Qdrant Edge, tests/test_cli_output.py)."""
MAX_FILTER_VALUES = 1_000
"""Most values one list filter (types, tags, notes) takes: each is a condition the store evaluates, and
`mindnet mcp` on stdio has no body limit (140,000 tags took 1.4 s even within /mcp's 1 MB)."""


def check_date(name: str, value: str | None) -> None:
    """Refuse a date the store cannot read, naming the option it came in: it was an internal error from
    deep inside Qdrant, in every interface (CLI, server, MCP) alike.

    Raises:
        MindnetError: `value` is not one of `ISO_DATE`'s forms or not a real day and time.
    """
    if value is None:
        return
    shape = ISO_DATE.fullmatch(value)
    try:
        if shape is None:
            raise ValueError(value)
        datetime.date.fromisoformat(shape["date"])
        if shape["hm"]:
            datetime.time.fromisoformat(shape["hm"] + (f":{shape['s']}" if shape["s"] else ""))
    except ValueError:
        raise MindnetError(f"{name} needs an ISO date such as 2025-09-03 or 2025-09-03T10:00, not {value!r}") from None


def nested_tags(tag: str, stored: Iterable[str]) -> tuple[str, ...]:
    """`tag` and every stored tag nested below it (`topic` -> `topic/chunking`), compared ignoring case
    and a leading `#`; `tag` itself first, so a store that does not hold it still gets an exact match."""
    wanted = tag.lstrip("#").casefold()
    below = sorted(t for t in stored if t.casefold() == wanted or t.casefold().startswith(f"{wanted}/"))
    return tuple(dict.fromkeys([tag, *below]))


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """What a result must satisfy (R22); every given field must hold, empty fields are ignored."""

    type: tuple[str, ...] = ()
    """Note types; a chunk of any of them matches."""
    tags: tuple[str, ...] = ()
    """Tags that must *all* be on the note: adding a tag narrows the search, as in Obsidian. A tag
    also matches its nested tags (`topic` finds `topic/chunking`) once `to_filter` is told them."""
    area: str | None = None
    project: str | None = None
    lang: str | None = None
    """Chunk language (ISO 639-1), detected per chunk (R6)."""
    path_prefix: str | None = None
    """Vault-relative path prefix such as `projects/` (a folder) or `daily/2024-`."""
    note_id: tuple[str, ...] = ()
    """Restrict to these notes."""
    created_from: str | None = None
    """ISO 8601 date or datetime; notes created on or after it."""
    created_to: str | None = None
    """ISO 8601 date or datetime; notes created on or before it (a bare date includes that whole day)."""

    def __post_init__(self) -> None:
        check_date("created_from", self.created_from)
        check_date("created_to", self.created_to)
        for name in ("type", "tags", "note_id"):
            if len(getattr(self, name)) > MAX_FILTER_VALUES:
                raise MindnetError(f"{name}: at most {MAX_FILTER_VALUES} values, not {len(getattr(self, name))}")

    def to_filter(self, stored_tags: Iterable[str] = ()) -> Filter | None:
        """The store's neutral `Filter`, or None when nothing is restricted.

        `stored_tags` are the tags the store holds: each wanted tag then matches any of them that is
        the tag itself or nested below it, ignoring case, as Obsidian's tag search does.
        """
        must: list[Condition] = []
        if self.type:
            must.append(AnyOf("type", tuple(self.type)))
        known = tuple(stored_tags)
        for tag in self.tags:
            variants = nested_tags(tag, known)
            must.append(AnyOf("tags", variants) if len(variants) > 1 else Equals("tags", variants[0]))
        for name in ("area", "project", "lang"):
            value = getattr(self, name)
            if value:
                must.append(Equals(name, value))
        if self.path_prefix:
            must.append(Prefix("path", self.path_prefix))
        if self.note_id:
            must.append(AnyOf("note_id", tuple(self.note_id)))
        if self.created_from or self.created_to:
            upper = self.created_to
            if upper and len(upper) == 10:  # a bare date: the whole day counts
                upper = f"{upper}T23:59:59.999999Z"
            lower = self.created_from
            if lower and len(lower) == 10:
                lower = f"{lower}T00:00:00Z"
            must.append(Range("created_at", gte=lower, lte=upper))
        return Filter(must=tuple(must)) if must else None


__all__ = ["ISO_DATE", "MAX_FILTER_VALUES", "SearchFilters", "check_date", "nested_tags"]
