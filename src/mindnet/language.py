"""Language detection (R6): py3langid restricted to the configured languages, loaded once per process.

Notes are detected once when read (`vault.parse_note`); chunks inherit their note's language unless
the note is *mixed* (see `chunk_languages`). The packaged model is LZMA-compressed, so its tables are
unpacked once into a cache folder that the caller passes in (`Settings.cache_dir`); this module reads
no environment variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .text import without_fences

_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK_SYNTAX = re.compile(r"\[\[[^\]]{0,300}\]\]|\]\([^)]{0,500}\)|https?://\S+")
"""Link syntax left out of language detection. The lengths are bounded: unbounded, every `[[` or `](`
of a note without closing brackets was scanned to the end of the text (quadratic)."""

MIN_CHARS_FOR_DETECTION = 80
"""Below this, a chunk's language guess is noise; it inherits the note's language (R6)."""

DETECTION_CHARS = 600
"""A chunk's first few hundred characters *of prose* decide its language as well as all of it, at a
third of the cost. Counted after code and links are masked: a chunk that opens with a code block
is judged by the prose after it (cutting first judged 9 German rustbook chunks by their code)."""

PROBES = 3
"""Chunks of a note classified to decide whether it is mixed: the first, middle and last long one."""


def detect_language(
    text: str, languages: tuple[str, ...], max_chars: int = 20_000, cache_dir: str | Path | None = None
) -> str:
    """ISO 639-1 code among `languages`, offline (R6); code and link syntax are ignored.

    `max_chars` bounds the prose classified, counted after code and links are removed.
    """
    if len(languages) == 1:
        return languages[0]
    prose = without_fences(text)
    prose = _LINK_SYNTAX.sub(" ", _CODE_SPAN.sub(" ", prose))
    if len(prose.strip()) < 3:
        return languages[0]
    lang, _prob = language_identifier(tuple(languages), cache_dir).classify(prose[:max_chars])
    return str(lang)


def chunk_languages(
    texts: Sequence[str], note_lang: str, languages: tuple[str, ...], cache_dir: str | Path | None = None
) -> list[str]:
    """The language of each chunk text: the note's, unless the note is mixed.

    A note is *mixed* when one of up to `PROBES` of its long chunks (first, middle, last of those with
    at least `MIN_CHARS_FOR_DETECTION` characters) is classified as another language than the note.
    Only then is every long chunk classified on its own, as every chunk was before; a short chunk,
    or one of a note whose language is not configured, always takes the note's language.
    """

    def detect(text: str) -> str:
        return detect_language(text, languages, max_chars=DETECTION_CHARS, cache_dir=cache_dir)

    out = [note_lang] * len(texts)
    if note_lang not in languages or len(languages) == 1:
        return out
    long = [i for i, text in enumerate(texts) if len(text) >= MIN_CHARS_FOR_DETECTION]
    if not long:
        return out
    probes = sorted({long[0], long[len(long) // 2], long[-1]})[:PROBES]
    found = {i: detect(texts[i]) for i in probes}
    if all(lang == note_lang for lang in found.values()):
        return out
    for i in long:
        out[i] = found[i] if i in found else detect(texts[i])
    return out


@lru_cache(maxsize=8)
def language_identifier(languages: tuple[str, ...], cache_dir: str | Path | None = None) -> Any:
    """py3langid restricted to `languages` (R6), loaded once per process and cache folder.

    `cache_dir` holds the unpacked model (`Settings.cache_dir`); with None no copy is kept, and each
    process pays the 0.3 s of unpacking.
    """
    identifier = _langid_model(Path(cache_dir) if cache_dir is not None else None)
    identifier.set_languages(list(languages))
    return identifier


def _langid_model(cache_dir: Path | None) -> Any:
    """py3langid's model, from an unpacked copy in the user cache when one can be kept there.

    The packaged model is LZMA-compressed: unpacking it costs 0.3 s in every process that detects a
    language, i.e. in every import that sees a new or edited note. The copy holds the same arrays;
    the two DFA tables (39 MB) are raw files read straight into the `array`s py3langid walks.
    """
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    packaged = MODEL_DIR / MODEL_FILE
    copy = _unpacked_model(packaged, cache_dir) if cache_dir is not None else None
    if copy is not None:
        import numpy as np

        try:
            with np.load(copy / "arrays.npz", allow_pickle=False) as data:
                nextmove, rows = _read_array(copy, "nextmove"), _read_array(copy, "nextmove_row")
                out_feat = data["out_feat"]
                # The DFA: one output per state, one 256-entry row per distinct row index.
                if len(rows) != len(out_feat) or len(nextmove) != (max(rows) + 1) * 256:
                    raise ValueError(f"{copy}: DFA tables do not match")
                return LanguageIdentifier(
                    data["ptc"],
                    data["pc"],
                    data["classes"].tolist(),
                    nextmove,
                    out_feat.tolist(),
                    norm_probs=True,
                    tk_row=rows,
                )
        except (OSError, ValueError, KeyError, EOFError):
            pass  # a damaged copy: the packaged model below is always right
    return LanguageIdentifier.from_model_file(packaged, norm_probs=True)


_TYPECODES = {2: "H", 4: "I", 8: "Q"}
"""Stdlib `array` type code of an unsigned integer of each size."""


def _unpacked_model(packaged: Path, root: Path) -> Path | None:
    """`root/langid-<size>-<mtime>/`, unpacked on first use; None if it cannot be written."""
    import io
    import lzma
    import shutil
    import tempfile

    import numpy as np

    try:
        st = packaged.stat()
        copy = root / f"langid-{st.st_size}-{st.st_mtime_ns}"
        if copy.is_dir():
            return copy
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{copy.name}.", dir=root))
        with lzma.open(packaged) as src, np.load(io.BytesIO(src.read()), allow_pickle=False) as data:
            np.savez(tmp / "arrays.npz", **{k: data[k] for k in ("ptc", "pc", "classes", "out_feat")})
            for name in ("nextmove", "nextmove_row"):
                values = np.ascontiguousarray(data[name])
                values.tofile(tmp / f"{name}.{_TYPECODES[values.dtype.itemsize]}")
        try:
            os.rename(tmp, copy)  # atomic: a concurrent process sees no copy or a whole one
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process was first
        return copy if copy.is_dir() else None
    except (OSError, RuntimeError, ValueError, KeyError, lzma.LZMAError):
        return None


def _read_array(folder: Path, name: str) -> Any:
    """The raw table `name.<typecode>` of an unpacked model as a stdlib `array`."""
    from array import array

    (path,) = folder.glob(f"{name}.?")
    values = array(path.suffix[1:])
    with path.open("rb") as fh:
        values.fromfile(fh, path.stat().st_size // values.itemsize)
    return values
