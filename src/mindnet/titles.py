"""Exact note names in a query: the title/alias list of hybrid search (issue 15).

In an Obsidian vault a note's title and its `aliases` are the names its author calls the topic
by, in any language ("Chunking", "Chunking-Strategie", "RRF"). A query that contains such a name
as whole words is very likely about that note, whatever the query's language: the README's own
question "Wie funktioniert das Chunking von Notizen?" names the English concept note "Chunking",
yet BM25 weighs that English chunk as an accidental cross-language match and dense search ranks
the German notes about *Notizen* higher. Neither list can say "this is the note's name".

`TitleIndex` maps every normalised name (case-folded words joined by one space) to its notes and
answers a query by looking up each of its word n-grams: O(words^2) dictionary lookups per query,
independent of the vault's size. Longer names rank first (a match on "Reciprocal Rank Fusion" is
more specific than one on "Fusion").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"\w+")

MAX_NAME_WORDS = 8
"""Longest name (in words) looked for; longer titles are sentences, not names."""


def normalise(text: str) -> tuple[str, ...]:
    """The case-folded words of `text` (hyphens, quotes and punctuation separate words)."""
    return tuple(w.casefold() for w in _WORD.findall(text))


class TitleIndex:
    """Note names (titles and aliases) by their normalised words."""

    def __init__(self, names: Iterable[tuple[str, str]]) -> None:
        """Index `(note_id, name)` pairs; empty names and names over `MAX_NAME_WORDS` words are left out."""
        self._notes: dict[tuple[str, ...], list[str]] = {}
        for note_id, name in names:
            words = normalise(name)
            if not words or len(words) > MAX_NAME_WORDS:
                continue
            ids = self._notes.setdefault(words, [])
            if note_id not in ids:
                ids.append(note_id)

    def __len__(self) -> int:
        return len(self._notes)

    def matches(self, query: str) -> list[str]:
        """Notes one of whose names occurs in `query` as whole consecutive words, longest name first.

        Longest match wins: words covered by a longer name do not also match a shorter name
        inside it ("reciprocal rank fusion" does not also name a note "Fusion"). A note matched
        by several names counts once, at its longest.
        """
        words = normalise(query)
        covered = [False] * len(words)
        found: dict[str, int] = {}
        for n in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
            for start in range(len(words) - n + 1):
                ids = self._notes.get(words[start:start + n])
                if not ids or any(covered[start:start + n]):
                    continue
                covered[start:start + n] = [True] * n
                for note_id in ids:
                    found.setdefault(note_id, n)
        return sorted(found, key=lambda note_id: -found[note_id])


__all__ = ["MAX_NAME_WORDS", "TitleIndex", "normalise"]
