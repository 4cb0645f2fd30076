"""Exact note names in a query: the title/alias list of hybrid search (issue 15).

In an Obsidian vault a note's title and its `aliases` are the names its author calls the topic
by, in any language ("Chunking", "Chunking-Strategie", "RRF"). A query that contains such a name
as whole words is very likely about that note, whatever the query's language: the README's own
question "Wie funktioniert das Chunking von Notizen?" names the English concept note "Chunking",
yet BM25 weighs that English chunk as an accidental cross-language match and dense search ranks
the German notes about *Notizen* higher. Neither list can say "this is the note's name".

A name is evidence for a note only as far as it singles the note out. When many notes carry the
same name (every paragraph of an imported article under the article's title, a "README" in each
folder, daily notes titled by a weekday) the name says which *group* the query is about, not
which note, and lifting the whole group above the content lists' best hit is what made the plain
list cost XQuAD nDCG (docs/benchmarks.md). So every match carries its `share`: 1 / the number of notes
that carry the matched name, as title or alias or as the `area` or `project` their frontmatter
puts them in, and fusion weighs the note by it (`fusion.add_title_list`).

`TitleIndex` maps every normalised name (case-folded words) to its notes and answers a query by
looking up each of its word n-grams: O(words^2) dictionary lookups per query, independent of the
vault's size. Longer names rank first (a match on "Reciprocal Rank Fusion" is more specific than
one on "Fusion").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

_WORD = re.compile(r"\w+")

MAX_NAME_WORDS = 8
"""Longest name (in words) looked for; longer titles are sentences, not names."""


NoteNames: TypeAlias = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
"""What a `TitleIndex` is built from: (note_id, title or alias) pairs and (note_id, area or project) pairs."""


@dataclass(frozen=True, slots=True)
class NamedNote:
    """A note the query names: which note, how long the name is, and how much of it is this note's."""

    note_id: str
    words: int
    """Words of the matched name (the longest, when several of the note's names match)."""
    share: float
    """1 / the number of notes carrying the matched name (as title, alias, area or project): 1 for a
    name only this note has."""


def normalise(text: str) -> tuple[str, ...]:
    """The case-folded words of `text` (hyphens, quotes and punctuation separate words).

    Folded before the words are found, and composed again (NFC): case folding decomposes some letters
    ("ᾶ" -> "α" + a combining accent, which is no word character), so folding each word after it was
    found gave words that split on a second pass, and a name would not match its own normal form.
    """
    return tuple(_WORD.findall(unicodedata.normalize("NFC", text.casefold())))


class TitleIndex:
    """Note names (titles and aliases) by their normalised words."""

    def __init__(self, names: Iterable[tuple[str, str]], groups: Iterable[tuple[str, str]] = ()) -> None:
        """Index `(note_id, name)` pairs; empty names and names over `MAX_NAME_WORDS` words are left out.

        `groups` are `(note_id, group)` pairs, a group being the `area` or `project` a note's
        frontmatter puts it in: a group name never names a note, but every note in the group
        carries it, so a note titled like a project that twelve notes belong to gets a twelfth
        (`NamedNote.share`). A project's hub note is named like the project, and a question that
        mentions the project is about the project's notes, not about the hub.
        """
        self._notes: dict[tuple[str, ...], list[str]] = {}
        for note_id, name in names:
            words = normalise(name)
            if not words or len(words) > MAX_NAME_WORDS:
                continue
            ids = self._notes.setdefault(words, [])
            if note_id not in ids:
                ids.append(note_id)
        self._carriers: dict[tuple[str, ...], int] = {words: len(ids) for words, ids in self._notes.items()}
        members: dict[tuple[str, ...], set[str]] = {}
        for note_id, group in groups:
            words = normalise(group)
            if words in self._notes:
                members.setdefault(words, set(self._notes[words])).add(note_id)
        self._carriers.update({words: len(ids) for words, ids in members.items()})

    def __len__(self) -> int:
        return len(self._notes)

    def named(self, query: str) -> list[NamedNote]:
        """The notes one of whose names occurs in `query` as whole consecutive words, longest name first
        (then the larger share, then the index's order).

        Longest match wins: words covered by a longer name do not also match a shorter name
        inside it ("reciprocal rank fusion" does not also name a note "Fusion"). A note matched
        by several names counts once, at its longest.
        """
        words = normalise(query)
        covered = [False] * len(words)
        found: dict[str, NamedNote] = {}
        for n in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
            for start in range(len(words) - n + 1):
                ids = self._notes.get(words[start:start + n])
                if not ids or any(covered[start:start + n]):
                    continue
                covered[start:start + n] = [True] * n
                share = 1 / self._carriers[words[start:start + n]]
                for note_id in ids:
                    old = found.get(note_id)
                    if old is None or (old.words == n and old.share < share):
                        found[note_id] = NamedNote(note_id, n, share)
        return sorted(found.values(), key=lambda m: (-m.words, -m.share))

    def matches(self, query: str) -> list[str]:
        """The ids of `named(query)`, in its order."""
        return [m.note_id for m in self.named(query)]


__all__ = ["MAX_NAME_WORDS", "NamedNote", "TitleIndex", "normalise"]
