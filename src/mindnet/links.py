"""Link extraction and resolution (R14, R15): which notes, files and URLs a note points at.

Extraction is a light scanner of its own, independent of `markdown.py`: a masking pass blanks
fenced code, inline code, `%%comments%%` and `<!-- comments -->` with spaces (offsets unchanged),
then regular expressions find wikilinks, embeds, Markdown links and autolinks in what is left.

Resolution follows Obsidian's `getFirstLinkpathDest`, extended by mindnet's own keys (R15):

1. An empty target (`[[#Heading]]`, `[text](#heading)`) is the source note itself.
2. Paths: `/x` is vault-absolute; `./x`, `../x` and every Markdown link are first tried relative
   to the source note's folder; then the target is tried as a vault-relative path, with or
   without `.md`.
3. A name without `/` matches file name stems; a name with `/` matches path suffixes
   (`[[folder/note]]` finds `a/folder/note.md`), as Obsidian does.
4. mindnet keys, in this order: note `id`, `title`, `aliases`, and last the slug of the target
   against note ids (so an unresolved edge's `target_id` never names an existing note).

Every comparison is case-insensitive (`casefold`) on NFC text, so NFD file names from macOS
match NFC link text. When several notes match in the first matching tier, the shortest path wins
(fewest segments, then alphabetical), whichever note links: Obsidian prefers the vault root over
the linking note's own folder (`[[./note]]` is the way to say "this folder"), and SPEC R15 asks
for the shortest path. The other candidates are reported for lint.

Non-note targets (a known attachment extension, or a file of the vault's attachment list) get
status `attachment`; `target_path` is None when the file is not in the vault. Unknown targets get
status `unresolved` and `target_id` = slug of the target's last path segment, which is the id a
note created from that link would get by default (R2), so it resolves by itself later (R15).
"""

from __future__ import annotations

import functools
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import unquote

from .text import closes_fence, fence_opener, slugify

if TYPE_CHECKING:
    from .vault import Note

LinkKind: TypeAlias = Literal["wikilink", "markdown", "embed"]
Status: TypeAlias = Literal["resolved", "unresolved", "attachment", "external"]

FRONTMATTER_LINK_FIELDS: tuple[str, ...] = ("depends_on", "assigned_to", "discussed_in", "authored_by", "related")
"""Fields whose plain string values are link targets even without brackets (R16)."""

ATTACHMENT_EXTENSIONS: frozenset[str] = frozenset(
    """
    png jpg jpeg gif bmp svg webp avif heic tif tiff ico
    pdf mp3 wav m4a ogg flac 3gp webm mp4 mov mkv ogv avi
    canvas base excalidraw drawio docx xlsx pptx odt ods odp zip csv json txt html htm
    """.split()  # noqa: SIM905 (a word list reads better than 41 quoted strings)
)
"""Extensions Obsidian treats as files, not notes: such a target is an attachment even when absent."""


@dataclass(frozen=True, slots=True)
class Link:
    """One link as written in a text; offsets index the string given to `extract_links`."""

    raw: str
    """The source text of the whole link, brackets included."""
    target: str
    """The target as written, without anchor or alias (may be empty: `[[#Heading]]`)."""
    anchor: str | None
    """Heading (`Heading` or `H2#H3`) or block reference (`^block-id`), else None."""
    alias: str | None
    """Display text: `[[t|alias]]` or the text of `[text](dest)`; None when absent or empty."""
    kind: LinkKind
    """wikilink (`[[t]]`), markdown (`[text](dest)`, `<url>`) or embed (`![[t]]`, `![alt](file)`)."""
    char_start: int
    char_end: int
    is_url: bool
    """The target is a URL (has a scheme): it resolves to status `external`, never to a note."""


@dataclass(frozen=True, slots=True)
class LinkRef:
    """One reference of a chunk as stored in its payload (R14): what a link resolved to, without offsets."""

    target_id: str
    kind: str
    """wikilink, markdown or embed."""
    status: str
    """resolved, unresolved or attachment."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where a link target leads (R15)."""

    status: Status
    target_id: str
    """Note id (resolved), vault path or link text (attachment), URL (external), slug (unresolved)."""
    target_path: str | None = None
    """Vault-relative path of the note or attachment; None when unresolved, external or missing."""
    ambiguous_candidates: tuple[str, ...] = ()
    """All candidate paths in shortest-path order when more than one note matched (lint reports them)."""


@dataclass(frozen=True, slots=True)
class Transclusion:
    """Text of another note shown in the host by `![[note#section]]` (issue: embeds)."""

    host_note_id: str
    source_note_id: str
    anchor: str | None
    char_start: int
    """Span of the embedded text in the source note's `fulltext`."""
    char_end: int
    text: str
    link_start: int
    """Offset of the embed in the host's `fulltext`, to place the text in the host's chunks."""


# --------------------------------------------------------------------------------------------
# Masking: code and comments never contain links (R14).

_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
# Lines split on CRLF, CR and LF only, as `text.line_starts` does (U+2028 is ordinary text).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def mask_code(text: str) -> str:
    """Blank fenced code, inline code, `%%…%%` and `<!--…-->` with spaces, keeping offsets.

    Line breaks are kept so line numbers stay valid. An unclosed fence or `%%` runs to the end
    of the text, as in Obsidian; an unclosed backtick run is literal text (CommonMark).
    """
    if "`" not in text and "~~~" not in text and "%%" not in text and "<!--" not in text:
        return text
    return _blank(text, _hidden_spans(text))


def _hidden_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    prose_start = 0
    pos = 0
    fence: str | None = None
    fence_start = 0
    for line in _LINE.findall(text):
        line_end = pos + len(line)
        bare = line.rstrip("\r\n")
        if fence is None:
            fence = fence_opener(bare)
            if fence is not None:
                spans.extend(_inline_spans(text, prose_start, pos))
                fence_start = pos
        elif closes_fence(bare, fence):
            spans.append((fence_start, line_end))
            fence = None
            prose_start = line_end
        pos = line_end
    if fence is not None:
        spans.append((fence_start, len(text)))
    else:
        spans.extend(_inline_spans(text, prose_start, len(text)))
    return spans


_INLINE_OPENERS = re.compile(r"`+|%%|<!--")


def _inline_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Code spans and comments in a fence-free region, scanned left to right (first opener wins)."""
    spans: list[tuple[int, int]] = []
    pos = start
    paragraph_end = -1  # where the paragraph holding `pos` ends, found once per paragraph
    while pos < end:
        m = _INLINE_OPENERS.search(text, pos, end)
        if m is None:
            break
        opener = m.group()
        if opener == "%%":
            close = text.find("%%", m.end(), end)
            stop = end if close < 0 else close + 2
        elif opener == "<!--":
            close = text.find("-->", m.end(), end)
            stop = end if close < 0 else close + 3
        else:
            if paragraph_end < m.end():
                limit = _BLANK_LINE.search(text, m.end(), end)
                paragraph_end = limit.start() if limit else end
            stop = _code_span_end(text, m.end(), paragraph_end, len(opener))
            if stop is None:
                pos = m.end()
                continue
        spans.append((m.start(), stop))
        pos = stop
    return spans


def _code_span_end(text: str, pos: int, stop: int, width: int) -> int | None:
    """End of a code span opened by `width` backticks: the next run of exactly that width before `stop`.

    A code span does not cross a blank line (it would leave its paragraph), so `stop` is where the
    paragraph ends; the caller finds it once per paragraph, not once per backtick (quadratic before).
    """
    run = re.compile(r"`+")
    for m in run.finditer(text, pos, stop):
        if len(m.group()) == width:
            return m.end()
    return None


# --------------------------------------------------------------------------------------------
# Extraction.

_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]*?)\]\]")
# Link text may hold one level of brackets (`[![img](a.png)](url)`, `[see [1]](x.md)`).
_MD_LINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\(\s*(<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.\-]{1,31}:[^\s<>]*)>")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]{1,31}:")
_INNER_IMAGE = re.compile(r"!\[")


def extract_links(text: str) -> list[Link]:
    """Every link of a text in order of position, ignoring code and comments (R14).

    Markdown reference definitions (`[x]: path.md`) are not links: Obsidian does not index them
    and Foam writes them as duplicates of its wikilinks. Bare URLs without `<>` are not either.
    """
    masked = mask_code(text)
    links: list[Link] = []
    taken: list[tuple[int, int]] = []
    for m in _WIKILINK.finditer(masked):
        inner = text[m.start(2) : m.end(2)]
        target, anchor, alias = _split_wikilink(inner)
        if not target and anchor is None:
            continue  # `[[]]` or `[[|x]]`: Obsidian renders it as text
        kind: LinkKind = "embed" if m.group(1) else "wikilink"
        links.append(Link(text[m.start() : m.end()], target, anchor, alias, kind, m.start(), m.end(), False))
        taken.append((m.start(), m.end()))
    md_masked = _blank(masked, taken) if taken else masked
    md_taken: list[tuple[int, int]] = []
    for m in _MD_LINK.finditer(md_masked):
        links.extend(_markdown_links(text, md_masked, m))
        md_taken.append((m.start(), m.end()))
    auto_masked = _blank(md_masked, md_taken) if md_taken else md_masked
    for m in _AUTOLINK.finditer(auto_masked):
        url = m.group(1)
        links.append(Link(m.group(), url, None, None, "markdown", m.start(), m.end(), True))
    links.sort(key=lambda link: (link.char_start, link.char_end))
    return links


_NOT_LINE_BREAK = re.compile(r"[^\r\n]")


def _blank(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each (sorted, disjoint) span replaced by spaces, line breaks kept."""
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        parts.append(text[pos:start])
        parts.append(_NOT_LINE_BREAK.sub(" ", text[start:end]))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _split_wikilink(inner: str) -> tuple[str, str | None, str | None]:
    """`target#anchor|alias` → parts; `\\|` is the alias bar escaped inside tables."""
    inner = inner.replace("\\|", "|")
    body, bar, alias = inner.partition("|")
    target, hash_, anchor = body.partition("#")
    alias_text = alias.strip() if bar and alias.strip() else None
    anchor_text = anchor.strip() if hash_ and anchor.strip() else None
    return target.strip(), anchor_text, alias_text


def _markdown_links(text: str, masked: str, m: re.Match[str]) -> list[Link]:
    dest = m.group(3).strip()
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1].strip()
    label = text[m.start(2) : m.end(2)].strip() or None
    out: list[Link] = []
    # An image inside the link text (`[![badge](b.png)](url)`) is a link of its own.
    for inner in _INNER_IMAGE.finditer(masked, m.start(2), m.end(2)):
        nested = _MD_LINK.match(masked, inner.start())
        if nested and nested.end() <= m.end(2):
            out.extend(_markdown_links(text, masked, nested))
    raw = text[m.start() : m.end()]
    if not dest and not label:
        return out
    kind: LinkKind = "embed" if m.group(1) else "markdown"
    if _SCHEME.match(dest):
        out.append(Link(raw, dest, None, label, kind, m.start(), m.end(), True))
        return out
    target, hash_, anchor = dest.partition("#")
    anchor_text = unquote(anchor) if hash_ and anchor else None
    if not target and anchor_text is None:
        return out  # `[text]()`: no destination
    out.append(Link(raw, target, anchor_text, label, kind, m.start(), m.end(), False))
    return out


# --------------------------------------------------------------------------------------------
# Frontmatter.

_FM_WIKILINK = re.compile(r"\[\[([^\[\]\n]*?)\]\]")


def frontmatter_links(frontmatter: Mapping[str, Any]) -> dict[str, list[str]]:
    """Link targets per frontmatter field, in field order (R16, `related: "[[X]]"`).

    The R16 fields (`depends_on`, `assigned_to`, `discussed_in`, `authored_by`, `related`) take
    plain strings as targets too (`assigned_to: Alice`); any other field only contributes its
    `[[X]]` values, so `title: Foo` never becomes a link. Anchors and aliases are dropped: edges
    connect notes. Lists and nested mappings are walked; non-strings are ignored.

    Returns:
        Field name → targets as written (without brackets, anchor or alias), fields with none left out.
    """
    out: dict[str, list[str]] = {}
    for field, value in frontmatter.items():
        name = str(field)
        targets: list[str] = []
        for item in _strings(value):
            found = [_split_wikilink(inner)[0] for inner in _FM_WIKILINK.findall(item)]
            if found:
                targets.extend(t for t in found if t)
            elif name in FRONTMATTER_LINK_FIELDS and item.strip():
                targets.append(_split_wikilink(item.strip())[0])
        targets = [t for t in dict.fromkeys(targets) if t]
        if targets:
            out[name] = targets
    return out


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item)


# --------------------------------------------------------------------------------------------
# Resolution.


_Names: TypeAlias = tuple[str, str, tuple[str, ...]]
"""A note's id, title and aliases: what a link may call it besides its path."""

RESOLUTIONS_KEPT = 8192
"""Link targets a `Resolver` remembers before it starts over. An import resolves every link of the notes it
writes through one resolver, and a relative Markdown link is a key per folder: a 30,000-note import (msdocs
copied into ten folders) kept 70,000 resolutions, ~25 MB that grew with the vault to its end (issue 27). A
target a batch repeats is still found again; one resolved anew costs a few dictionary lookups."""


@functools.lru_cache(maxsize=4096)
def fold(text: str) -> str:
    """The comparison key of names and paths: NFC, case-folded (R15).

    Cached for the link targets a batch repeats; small, because every import builds its `Resolver` over the
    whole vault (four keys a note): at 30,000 notes a cache of 65,536 kept ~20 MB of strings in a resident
    from its first edit on and never hit for them (120,000 keys in turn), while a miss costs under a
    microsecond (docs/decisions/large-vaults.md)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())


def _strip_md(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


def _stem(path: str) -> str:
    return _strip_md(path.rsplit("/", 1)[-1])


def link_key(target: str) -> str:
    """Coarse key of a link target or note name: slug of its last path segment, `.md` dropped.

    Two texts that resolve to each other always share this key, so incremental imports compare
    keys to find links that a new, renamed or deleted note may affect (see `graph.notes_to_relink`).
    """
    key = slugify(_stem(target.strip()))
    return key or fold(target.strip())


def note_keys(note: Note) -> set[str]:
    """Every `link_key` under which a link can reach this note (path, stem, id, title, aliases)."""
    names = [note.path, note.note_id, note.title, *note.aliases]
    return {link_key(name) for name in names if name}


def _path_order(path: str) -> tuple[int, str, str]:
    return (path.count("/"), fold(path), path)


class Resolver:
    """Resolves link targets against one state of the vault: build one per import, or keep one and `refresh` it."""

    __slots__ = (
        "_att_by_name",
        "_att_by_path",
        "_attachments",
        "_by_alias",
        "_by_id",
        "_by_path",
        "_by_stem",
        "_by_title",
        "_cache",
        "_names",
        "_paths",
    )

    def __init__(self, notes: Iterable[Note], attachments: Iterable[str] = ()) -> None:
        """Index notes by path, stem, id, title and aliases, and attachments by path and name.

        Args:
            notes: every note of the vault (after the change, for incremental imports).
            attachments: vault-relative paths of the non-note files, for `attachment` targets.
        """
        self._by_path: dict[str, list[tuple[str, str]]] = {}
        self._by_stem: dict[str, list[tuple[str, str]]] = {}
        self._by_id: dict[str, list[tuple[str, str]]] = {}
        self._by_title: dict[str, list[tuple[str, str]]] = {}
        self._by_alias: dict[str, list[tuple[str, str]]] = {}
        self._paths: dict[str, str] = {}
        self._names: dict[str, _Names] = {}
        """What each note is called, by path: what `refresh` compares to find the notes to index anew."""
        for note in notes:
            self._add(note.path, (note.note_id, note.title, note.aliases))
        self._cache: dict[tuple[str, str | None, bool], Resolution] = {}
        self._index_attachments(tuple(attachments))

    def refresh(self, notes: Iterable[Note], attachments: Iterable[str] = ()) -> int:
        """Bring the indexes in line with `notes` and `attachments`, as a new `Resolver(notes, attachments)`
        would have them, and return how many notes were indexed anew or dropped.

        Why: a resident that imports every save of a large vault built a resolver over the whole vault for
        each one (0.25-0.3 s and ~30 MB of short-lived strings at 30,000 notes, which left Python's arenas
        larger after the first save; issue 27). A save that renames nothing changes no name, so the
        resolutions found before stay true and are kept; any other change forgets them."""
        names = {note.path: (note.note_id, note.title, note.aliases) for note in notes}
        gone = [(path, was) for path, was in self._names.items() if names.get(path) != was]
        came = [(path, now) for path, now in names.items() if self._names.get(path) != now]
        for path, was in gone:
            self._remove(path, was)
        for path, now in came:
            self._add(path, now)
        kept = tuple(attachments)
        moved = kept != self._attachments
        if moved:
            self._index_attachments(kept)
        if gone or came or moved:
            self._cache.clear()
        return len(gone) + len(came)

    def _keys(self, path: str, names: _Names) -> Iterator[tuple[dict[str, list[tuple[str, str]]], str]]:
        """Each index a note is listed in, with its key there."""
        note_id, title, aliases = names
        yield self._by_path, fold(_strip_md(path))
        yield self._by_stem, fold(_stem(path))
        yield self._by_id, fold(note_id)
        if title:
            yield self._by_title, fold(title.strip())
        for alias in aliases:
            if alias and alias.strip():
                yield self._by_alias, fold(alias.strip())

    def _add(self, path: str, names: _Names) -> None:
        entry = (path, names[0])
        self._names[path] = names
        self._paths[names[0]] = path
        for index, key in self._keys(path, names):
            index.setdefault(key, []).append(entry)

    def _remove(self, path: str, names: _Names) -> None:
        entry = (path, names[0])
        del self._names[path]
        if self._paths.get(names[0]) == path:
            del self._paths[names[0]]
        for index, key in self._keys(path, names):
            left = [e for e in index.get(key, ()) if e != entry]
            if left:
                index[key] = left
            else:
                index.pop(key, None)

    def _index_attachments(self, attachments: tuple[str, ...]) -> None:
        self._attachments = attachments
        self._att_by_path: dict[str, str] = {}
        self._att_by_name: dict[str, list[str]] = {}
        for path in attachments:
            self._att_by_path[fold(path)] = path
            self._att_by_name.setdefault(fold(path.rsplit("/", 1)[-1]), []).append(path)

    def path_of(self, note_id: str) -> str | None:
        """Vault path of a note id, or None when no such note exists."""
        return self._paths.get(note_id)

    def note_id_at(self, path: str) -> str | None:
        """Id of the note stored at a vault path (case- and Unicode-insensitive), else None."""
        hit = self._note_at(path)
        return hit.target_id if hit else None

    def resolve_link(self, link: Link, source_path: str | None) -> Resolution:
        """Resolve an extracted link; Markdown links and embeds are relative to the source folder."""
        if link.is_url:
            return Resolution("external", link.target)
        # `![alt](file)` is Markdown syntax (relative, URL-encoded); `![[file]]` is a wikilink.
        markdown = link.kind == "markdown" or (link.kind == "embed" and not link.raw.startswith("![["))
        return self.resolve(link.target, source_path, markdown=markdown)

    def resolve(self, target: str, source_path: str | None = None, *, markdown: bool = False) -> Resolution:
        """Where `target` leads from the note at `source_path` (R15, rules in the module docstring).

        Args:
            target: the link target as written, without anchor or alias.
            source_path: vault path of the linking note; needed for self and relative links.
            markdown: a Markdown link destination: URL-decoded (`%20`) and relative to the source folder.
        """
        # Only empty, relative and Markdown targets depend on where the link stands.
        if not target.strip():
            where = source_path  # the note itself
        elif markdown or target.lstrip().startswith("."):
            where = posixpath.dirname(source_path) if source_path is not None else None
        else:
            where = None
        local = where is not None
        key = (target, where, markdown)
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= RESOLUTIONS_KEPT:
                self._cache.clear()
            found = self._cache[key] = self._resolve(target, source_path if local else None, markdown)
        return found

    def _resolve(self, target: str, source_path: str | None, markdown: bool) -> Resolution:
        text = target.strip()
        if markdown:
            text = unquote(text)
        if _SCHEME.match(text):
            return Resolution("external", text)
        if not text:
            return self._self(source_path)
        tries = self._path_tries(text, source_path, markdown)
        for path in tries:
            hit = self._note_at(path) or self._attachment_at(path)
            if hit is not None:
                if hit.status == "resolved" and "/" not in text and not hit.ambiguous_candidates:
                    # A bare name that is also a root path (`[[index]]`) is still ambiguous for lint.
                    others = _pick(self._by_name(text)).ambiguous_candidates if self._by_name(text) else ()
                    hit = Resolution(hit.status, hit.target_id, hit.target_path, others)
                return hit
        name = text.lstrip("/")
        tiers = [self._by_name(name), *(self._by_key(index, name) for index in self._key_indexes())]
        for candidates in tiers:
            if candidates:
                return _pick(candidates)
        slug = link_key(name)
        by_slug = self._by_id.get(fold(slug), [])
        if by_slug:
            return _pick(by_slug)
        attachment = self._attachment_by_name(name)
        if attachment is not None:
            return attachment
        if _extension(name) in ATTACHMENT_EXTENSIONS:
            # A missing file: name it by its vault path where the link gives one.
            return Resolution("attachment", tries[0] if tries else name)
        return Resolution("unresolved", slug)

    def _key_indexes(self) -> tuple[dict[str, list[tuple[str, str]]], ...]:
        return (self._by_id, self._by_title, self._by_alias)

    def _self(self, source_path: str | None) -> Resolution:
        if source_path is not None:
            entries = self._by_path.get(fold(_strip_md(source_path)), [])
            if entries:
                return _pick(entries)
        return Resolution("unresolved", "")

    def _path_tries(self, text: str, source_path: str | None, markdown: bool) -> list[str]:
        """Candidate vault paths, most specific first: relative to the source, then from the root."""
        tries: list[str] = []
        if text.startswith("/"):
            return [posixpath.normpath(text.lstrip("/"))]
        if source_path is not None and (markdown or text.startswith(("./", "../"))):
            folder = posixpath.dirname(source_path)
            joined = posixpath.normpath(posixpath.join(folder, text))
            if not joined.startswith("../"):
                tries.append(joined)
        if not text.startswith(("./", "../")):
            tries.append(posixpath.normpath(text))
        return tries

    def _note_at(self, path: str) -> Resolution | None:
        entries = self._by_path.get(fold(_strip_md(path)), [])
        if not entries:
            return None
        # `x.md` and a note named `x.md.md` are different files; the exact spelling wins.
        return _pick(entries)

    def _attachment_at(self, path: str) -> Resolution | None:
        found = self._att_by_path.get(fold(path))
        return Resolution("attachment", found, found) if found else None

    def _by_name(self, name: str) -> list[tuple[str, str]]:
        """Stem match for a bare name; path-suffix match for a name with `/` (Obsidian)."""
        bare = _strip_md(name)
        entries = self._by_stem.get(fold(_stem(bare)), [])
        if "/" not in bare:
            return entries
        suffix = "/" + fold(bare)
        return [e for e in entries if fold(_strip_md(e[0])).endswith(suffix) or fold(_strip_md(e[0])) == fold(bare)]

    @staticmethod
    def _by_key(index: dict[str, list[tuple[str, str]]], name: str) -> list[tuple[str, str]]:
        return index.get(fold(name), []) or index.get(fold(_strip_md(name)), [])

    def _attachment_by_name(self, name: str) -> Resolution | None:
        base = name.rsplit("/", 1)[-1]
        paths = self._att_by_name.get(fold(base), [])
        if "/" in name:
            suffix = "/" + fold(name)
            paths = [p for p in paths if fold(p).endswith(suffix)]
        if not paths:
            return None
        ordered = sorted(paths, key=_path_order)
        return Resolution("attachment", ordered[0], ordered[0], tuple(ordered) if len(ordered) > 1 else ())


class KeptResolver:
    """A resident's one `Resolver`, refreshed by each import instead of built anew (`Resolver.refresh`).

    Only a process that imports its vault again and again keeps one (`api.Index.keep_resolver`): a one-off
    import builds its resolver and lets it go. Its memory (~1 KB a note) then stays with the server from its
    first import on, instead of being made and freed by every save."""

    __slots__ = ("_resolver",)

    def __init__(self) -> None:
        self._resolver: Resolver | None = None

    @property
    def built(self) -> bool:
        return self._resolver is not None

    def current(self, notes: Iterable[Note], attachments: Iterable[str] = ()) -> Resolver:
        """The resolver of this state of the vault: the kept one refreshed, or a new one the first time."""
        if self._resolver is None:
            self._resolver = Resolver(notes, attachments)
        else:
            self._resolver.refresh(notes, attachments)
        return self._resolver

    def forget(self) -> None:
        """Build anew next time: after a failed import, whose read of the vault it may not match."""
        self._resolver = None


def _pick(entries: Sequence[tuple[str, str]]) -> Resolution:
    """The shortest path among candidates (fewest segments, then alphabetical), others reported."""
    unique = sorted(set(entries), key=lambda e: _path_order(e[0]))
    path, note_id = unique[0]
    ambiguous = tuple(p for p, _ in unique) if len(unique) > 1 else ()
    return Resolution("resolved", note_id, path, ambiguous)


def _extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[-1].lower() if "." in base else ""


# --------------------------------------------------------------------------------------------
# Transclusion.


_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]")
_BLOCK_ID = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)[ \t]*$", re.M)


def embedded_span(fulltext: str, anchor: str | None) -> tuple[int, int] | None:
    """The part of a note that `![[note#anchor]]` shows, as a span of its `fulltext`.

    No anchor: the whole body. `Heading` (or `H2#H3`, last part counts): from the heading line to
    the next heading of the same or a higher level. `^block`: the paragraph or list line that
    ends with that block id. None when the anchor is not found.
    """
    if anchor is None:
        return (0, len(fulltext))
    masked = mask_code(fulltext)
    if anchor.startswith("^"):
        block = anchor[1:]
        for m in _BLOCK_ID.finditer(masked):
            if m.group(1) == block:
                return _block_around(fulltext, m.start(1))
        return None
    wanted = fold(anchor.split("#")[-1].strip())
    headings = list(_HEADING.finditer(masked))
    for i, m in enumerate(headings):
        if fold(m.group(2).strip()) == wanted:
            level = len(m.group(1))
            end = len(fulltext)
            for later in headings[i + 1 :]:
                if len(later.group(1)) <= level:
                    end = later.start()
                    break
            return (m.start(), len(fulltext[:end].rstrip()))
    return None


def _block_around(text: str, pos: int) -> tuple[int, int]:
    """The block a `^id` closes: its list line, or the paragraph lines above it up to a blank or heading line."""
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    line_end = len(text) if line_end < 0 else line_end
    if _LIST_ITEM.match(text, line_start):
        return (line_start, line_end)
    start = line_start
    while start > 0:
        prev_start = text.rfind("\n", 0, start - 1) + 1
        prev = text[prev_start : start - 1]
        if not prev.strip() or _HEADING.match(prev) or _LIST_ITEM.match(prev):
            break
        start = prev_start
    return (start, line_end)


def transclusions(
    note: Note, resolver: Resolver, notes_by_id: Mapping[str, Note], links: Sequence[Link] | None = None
) -> list[Transclusion]:
    """The note-text embeds of a note, with the embedded text (`transclude_embeds`, default on).

    Embeds of attachments, of unknown notes, of the note itself and of anchors that no longer
    exist give nothing: there is no text to index. `links` are the note's links when the caller
    has them from parsing; None scans the body.
    """
    out: list[Transclusion] = []
    for link in extract_links(note.fulltext) if links is None else links:
        if link.kind != "embed":
            continue
        res = resolver.resolve_link(link, note.path)
        source = notes_by_id.get(res.target_id) if res.status == "resolved" else None
        if source is None or source.note_id == note.note_id:
            continue
        span = embedded_span(source.fulltext, link.anchor)
        if span is None or span[0] == span[1]:
            continue
        text = source.fulltext[span[0] : span[1]]
        out.append(Transclusion(note.note_id, source.note_id, link.anchor, span[0], span[1], text, link.char_start))
    return out
