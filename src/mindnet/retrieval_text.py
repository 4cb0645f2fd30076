"""What the retrieval models read of a chunk: its prose, without the markup that carries none (pure).

A chunk's `text` is what a citation shows and stays as it is. The dense model and BM25 read
`retrieval_text(text)` instead: link reference definitions, HTML comments, URLs and image-only
lines say nothing a question asks about, but a chunk made of them looks, to a sentence encoder, like
a list of every topic it links to, and to BM25 like a page full of link titles. Where markup holds
words of its own (a link's text, an image's alt text, a wikilink's alias or target) the words stay.

Code is never touched: fenced blocks and inline code spans pass through unchanged, since people
search for the exact identifiers in them.
"""

from __future__ import annotations

import re

RETRIEVAL_TEXT_VERSION = 1
"""Bump when `retrieval_text` reads a chunk otherwise: it is part of every store's chunking hash, so the
vectors are made again (from the embedding cache where a text is unchanged)."""

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})", re.M)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK_DEFINITION = re.compile(
    r"^ {0,3}\[(?!\^)[^\]\n]{1,999}\]:[ \t]*(?:<[^>\n]*>|\S+)(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?[ \t]*$",
    re.M)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_IMAGE_EMBED = re.compile(r"!\[\[([^\]\n|#]+\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|avif|ico|pdf|mp4|webm|mp3|wav|ogg))"
                          r"(?:[|#][^\]\n]*)?\]\]", re.I)
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\](?:\([^)\n]*\)|\[[^\]\n]*\])")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^>\s]*>", re.I)
_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>()\[\]]+", re.I)
_HTML_TAGS = ("a|abbr|b|big|blockquote|br|center|code|details|div|em|figcaption|figure|font|h[1-6]|hr|i|iframe|img|"
              "kbd|li|mark|ol|p|picture|pre|s|small|source|span|strong|sub|summary|sup|table|tbody|td|th|thead|tr|"
              "u|ul|video|audio|section|article|aside|nav|header|footer|main|style|script|svg|path")
_HTML_TAG = re.compile(rf"</?(?:{_HTML_TAGS})\b(?:[^<>\"']|\"[^\"]*\"|'[^']*')*/?>", re.I)
_IMG_ALT = re.compile(r"<img\b[^>]*?\balt\s*=\s*(\"[^\"]*\"|'[^']*')[^>]*>", re.I)
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$", re.M)
_WORD = re.compile(r"\w")
_FILE_NAME = re.compile(r"^[\w.\- ]+\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|avif|ico)$", re.I)
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_SPACE_RUN = re.compile(r"[ \t]{2,}")
_MEANINGLESS_ALT = frozenset({"", "image", "img", "picture", "screenshot", "alt", "alt text", "bild", "foto",
                              "photo", "icon", "logo", "gif", "diagram"})


def retrieval_text(text: str) -> str:
    """`text` with markup that carries no prose removed and links reduced to their words.

    Fenced code blocks and inline code spans are kept byte for byte. What is left may be empty
    (a chunk of link definitions only): such a chunk is stored and shown, but not embedded.
    """
    out: list[str] = []
    for part, is_code in _code_blocks(text):
        out.append(part if is_code else _prose(part))
    cleaned = _BLANK_RUN.sub("\n\n", "".join(out))
    return cleaned.strip() if _WORD.search(cleaned) else ""


def has_prose(text: str) -> bool:
    """Whether `retrieval_text(text)` leaves anything to embed."""
    return bool(retrieval_text(text))


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
    """One stretch outside fenced code: inline code spans kept, the markup around them reduced."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(part):
        out.append(_reduce(part[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_reduce(part[pos:]))
    return "".join(out)


def _reduce(s: str) -> str:
    """The reductions, most specific first: a definition's or image's URL must go before links are read."""
    s = _COMMENT.sub("", s)
    s = _LINK_DEFINITION.sub("", s)
    s = _IMG_ALT.sub(lambda m: " " + _alt(m.group(1)[1:-1]) + " ", s)
    s = _IMAGE.sub(lambda m: _alt(m.group(1)), s)
    s = _IMAGE_EMBED.sub("", s)
    s = _LINK.sub(lambda m: m.group(1), s)
    s = _AUTOLINK.sub("", s)
    s = _URL.sub("", s)
    s = _HTML_TAG.sub(" ", s)
    s = _TABLE_RULE.sub("", s)
    return _SPACE_RUN.sub(" ", s)


def _alt(alt: str) -> str:
    """An image's alt text when it says something (not empty, not 'image', not a file name)."""
    alt = alt.strip()
    if alt.lower() in _MEANINGLESS_ALT or _FILE_NAME.match(alt):
        return ""
    return alt


__all__ = ["RETRIEVAL_TEXT_VERSION", "has_prose", "retrieval_text"]
