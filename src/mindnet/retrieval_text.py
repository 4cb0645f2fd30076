"""What the retrieval models read of a chunk: its text without the markup that carries no prose (pure).

A chunk's `text` is what a citation shows and stays as it is. The dense model and BM25 read
`retrieval_text(text)` instead, which leaves out four kinds of line or span that say nothing a
question asks about: link reference definitions (`[slug]: path 'Title'`), HTML comments, lines that
hold only images (kept as their alt text when it says something) and lines that hold only URLs. A
chunk made of them looks, to a sentence encoder, like a list of every topic it links to, and to BM25
like a page full of link titles. Prose keeps its links whole: a link's words and its target's slug
are often the best words a line has (docs/decisions/search-representation.md).

Code is never touched: fenced blocks and inline code spans pass through unchanged.
"""

from __future__ import annotations

import functools
import re

RETRIEVAL_TEXT_VERSION = 3
"""Bump when `retrieval_text` reads a chunk otherwise: it is part of every store's chunking hash, so the
vectors are made again (from the embedding cache where a text is unchanged)."""

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})", re.M)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK_DEFINITION = re.compile(
    r"^ {0,3}\[(?!\^)[^\]\n]{1,999}\]:[ \t]*(?:<[^>\n]*>|\S+)(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
    re.M)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_BULLET = r"^[ \t]*(?:[-*+][ \t]+|\d{1,9}[.)][ \t]+)?"
_IMAGE = r"(?:\[?!\[([^\]\n]*)\]\([^)\n]*\)(?:\]\([^)\n]*\))?|!\[\[[^\]\n]+\]\]|<img\b[^>\n]*>)"
_ONLY_IMAGES = re.compile(rf"{_BULLET}(?:{_IMAGE}[ \t]*)+$", re.M | re.I)
_ALT = re.compile(r"!\[(?!\[)([^\]\n]*)\]|\balt\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.I)
_URL = r"(?:<(?:https?|ftp|mailto):[^>\s]*>|\b(?:https?|ftp)://[^\s<>]+)"
_ONLY_URLS = re.compile(rf"{_BULLET}(?:{_URL}[ \t,;]*)+$", re.M | re.I)
_WORD = re.compile(r"\w")
_FILE_NAME = re.compile(r"^[\w.\- ]+\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|avif|ico)$", re.I)
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_MEANINGLESS_ALT = frozenset({"", "image", "img", "picture", "screenshot", "alt", "alt text", "bild", "foto",
                              "photo", "icon", "logo", "gif", "diagram"})


MEMO_TEXTS = 4096
"""Texts `retrieval_text` remembers (the latest); a chunk's text is read four times in a cold import (what the
model sees while the vault is read and again when the batch is checked, the context of its vector, its BM25
document), 3.8 MB read for 1.3 MB of text in rustbook-de. The importer forgets them when it ends
(`forget_retrieval_texts`), so a resident process keeps none between imports."""
MEMO_CHARS = 8192
"""Longer texts (a long note's whole text) are reduced each time: the memo stays a few MB at most."""


def retrieval_text(text: str) -> str:
    """`text` without link definitions, comments, image-only and URL-only lines (images keep a meaningful
    alt text). Fenced code and inline code spans are kept byte for byte. Empty when no word is left (a
    chunk of link definitions only): such a chunk is stored and shown, but not embedded or indexed."""
    return _remembered(text) if len(text) <= MEMO_CHARS else _reduced(text)


def forget_retrieval_texts() -> None:
    """Drop the texts `retrieval_text` remembers (an import's end)."""
    _remembered.cache_clear()


def _reduced(text: str) -> str:
    out = [part if is_code else _prose(part) for part, is_code in _code_blocks(text)]
    cleaned = _BLANK_RUN.sub("\n\n", "".join(out))
    return cleaned.strip() if _WORD.search(cleaned) else ""


_remembered = functools.lru_cache(maxsize=MEMO_TEXTS)(_reduced)


def _code_blocks(text: str) -> list[tuple[str, bool]]:
    """`text` cut into (part, is fenced code) pieces, in order; an unclosed fence runs to the end."""
    parts: list[tuple[str, bool]] = []
    pos = 0
    while (m := _FENCE.search(text, pos)) is not None:
        if m.start() > pos:
            parts.append((text[pos:m.start()], False))
        fence = m.group(2)
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        line_end = text.find("\n", m.end())
        end_match = close.search(text, line_end + 1) if line_end >= 0 else None
        end = len(text) if end_match is None else end_match.end()
        parts.append((text[m.start():end], True))
        pos = end
    if pos < len(text):
        parts.append((text[pos:], False))
    return parts


def _prose(part: str) -> str:
    """One stretch outside fenced code: inline code spans kept, the lines around them reduced."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(part):
        out.append(_reduce(part[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_reduce(part[pos:]))
    return "".join(out)


def _reduce(s: str) -> str:
    s = _COMMENT.sub(" ", s)  # a space: "a<!-- x -->b" is two words, not one
    s = _LINK_DEFINITION.sub("", s)
    s = _ONLY_IMAGES.sub(lambda m: " ".join(filter(None, (_alt(a) for a in _alts(m.group(0))))), s)
    return _ONLY_URLS.sub("", s)


def _alts(line: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in _ALT.finditer(line)]


def _alt(alt: str) -> str:
    """An image's alt text when it says something (not empty, not 'image', not a file name)."""
    alt = alt.strip()
    if alt.lower() in _MEANINGLESS_ALT or _FILE_NAME.match(alt):
        return ""
    return alt


__all__ = ["RETRIEVAL_TEXT_VERSION", "retrieval_text"]
