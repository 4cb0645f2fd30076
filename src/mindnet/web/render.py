"""A note's Markdown as HTML for the note view: safe by construction, links from the index.

The note text is someone's file, so nothing in it may run in the page: raw HTML is escaped
(markdown-it with `html=False`), a link's href is kept only for `http`, `https`, `mailto` and
fragments, images become their alt text (no request leaves the machine, no file is read), and a
relative link becomes a link to its note only when the index resolved it. Wikilinks are looked
up by their text as written in `Index.note_links` rows, so this module resolves nothing itself.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
HIGHLIGHTED = frozenset({"paragraph_open", "heading_open", "list_item_open", "fence", "code_block",
                         "tr_open", "hr", "blockquote_open"})
"""Block tokens that get the `hit` class when their lines meet the hit's span."""
WIKILINK = re.compile(r"!?\[\[([^\[\]\n]+)\]\]")


def note_href(ref: str, chunk: str | None = None) -> str:
    """The note view's URL for a note id (and the chunk to highlight)."""
    url = "/note?ref=" + quote(ref, safe="")
    return url + ("&chunk=" + quote(chunk, safe="") if chunk else "")


def safe_href(href: str) -> str | None:
    """`href` when a browser may follow it from a note; None for scripts, data, files and the like."""
    href = href.strip()
    if not href or any(ord(c) < 0x20 for c in href):
        return None
    if href.startswith("#"):
        return href
    scheme = urlsplit(href).scheme.lower()
    return href if scheme in SAFE_SCHEMES else None


class LinkTable:
    """Written link -> the row of `Index.note_links` it resolved to."""

    def __init__(self, rows: Iterable[dict[str, Any]]) -> None:
        self.by_raw: dict[str, dict[str, Any]] = {}
        self.by_dest: dict[str, dict[str, Any]] = {}
        for row in rows:
            for raw in row.get("raw_links", ()):
                self.by_raw.setdefault(raw, row)
                if raw.endswith(")") and "](" in raw:  # a Markdown link: keyed by its destination
                    self.by_dest.setdefault(raw.rsplit("](", 1)[1][:-1].strip("<> "), row)

    def wikilink(self, raw: str) -> dict[str, Any] | None:
        return self.by_raw.get(raw) or self.by_raw.get(raw.removeprefix("!"))

    def markdown(self, dest: str) -> dict[str, Any] | None:
        return self.by_dest.get(dest)


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    """`[[target#anchor|alias]]` and `![[embed]]` as one `wikilink` token carrying the text as written."""
    match = WIKILINK.match(state.src, state.pos)
    if match is None:
        return False
    if not silent:
        token = state.push("wikilink", "", 0)
        inner = match.group(1)
        target, _, alias = inner.partition("|")
        token.meta = {"raw": match.group(0), "label": alias.strip() or target.strip()}
        token.content = match.group(0)
    state.pos = match.end()
    return True


class NoteRenderer(RendererHTML):
    """markdown-it's HTML renderer with the link rules of this module."""

    def wikilink(self, tokens: Sequence[Token], idx: int, _options: OptionsDict, env: EnvType) -> str:
        meta = tokens[idx].meta
        row = env["links"].wikilink(meta["raw"])
        label = html.escape(meta["label"])
        if row is None or row["status"] != "resolved" or not row.get("path"):
            title = html.escape(f"unresolved: {meta['raw']}")
            return f'<span class="unresolved" title="{title}">{label}</span>'
        return f'<a class="wikilink" href="{html.escape(note_href(row["note_id"]))}">{label}</a>'

    def link_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        row = env["links"].markdown(href)
        if row is not None and row["status"] == "resolved" and row.get("path"):
            token.attrs = {"href": note_href(row["note_id"]), "class": "wikilink"}
        elif safe_href(href) is not None:
            token.attrs = {"href": href, "rel": "noreferrer noopener", "class": "external"}
        else:
            token.attrs = {"class": "unresolved", "title": f"not a note or web link: {href}"[:300]}
            token.tag = "span"
            _close_of(tokens, idx).tag = "span"
        return self.renderToken(tokens, idx, options, env)

    def image(self, tokens: Sequence[Token], idx: int, _options: OptionsDict, _env: EnvType) -> str:
        alt = "".join(t.content for t in tokens[idx].children or ()) or str(tokens[idx].attrGet("src") or "")
        return f'<span class="image" title="image (not loaded)">[{html.escape(alt)}]</span>'


def _close_of(tokens: Sequence[Token], idx: int) -> Token:
    depth = 0
    for token in tokens[idx + 1:]:
        if token.type == "link_open":
            depth += 1
        elif token.type == "link_close":
            if depth == 0:
                return token
            depth -= 1
    return tokens[idx]


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False},
                    renderer_cls=NoteRenderer).enable("table").enable("strikethrough")
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.validateLink = lambda url: True  # every href is judged in `link_open` instead (safe_href)
    return md


MD = _markdown()


def render_note(fulltext: str, links: Iterable[dict[str, Any]], hit: tuple[int, int] | None = None,
                title: str | None = None) -> str:
    """The note body as HTML; blocks on body lines `hit` (0-based, end exclusive) get class `hit`.

    The first highlighted block gets `id="hit"`, so the view can scroll to it. A body that opens
    with an H1 reading `title` starts after it: the view's header shows the title already, and the
    note showed it twice (issue 28). A different H1, or one further down, stays.
    """
    env: dict[str, Any] = {"links": LinkTable(links)}
    tokens = MD.parse(fulltext, env)
    if title is not None and _opens_with_title(tokens, title):
        tokens = tokens[3:]  # heading_open, inline, heading_close
    first = True
    for token in tokens:
        if hit is None or token.type not in HIGHLIGHTED or not token.map or token.hidden:
            continue
        start, end = token.map
        if start < hit[1] and end > hit[0]:
            token.attrJoin("class", "hit")
            if first:
                token.attrSet("id", "hit")
                first = False
    return MD.renderer.render(tokens, MD.options, env)


def _opens_with_title(tokens: Sequence[Token], title: str) -> bool:
    """Whether the first block is an H1 whose text is `title` (whitespace and case aside)."""
    if len(tokens) < 3 or tokens[0].type != "heading_open" or tokens[0].tag != "h1":
        return False
    return " ".join(tokens[1].content.split()).casefold() == " ".join(title.split()).casefold()
