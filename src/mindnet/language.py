"""Language detection (R6): py3langid restricted to the configured languages, loaded once per process.

Notes are detected once when read (`vault.parse_note`); chunks inherit their note's language unless
the note is *mixed* (see `chunk_languages`). The packaged model is LZMA-compressed, so its tables are
unpacked once into a cache folder that the caller passes in (`Settings.cache_dir`); this module reads
no environment variable.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import ConfigError
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
    # Each pattern runs only where its literal part occurs (most chunks hold no code span or link).
    if "`" in prose:
        prose = _CODE_SPAN.sub(" ", prose)
    if "[[" in prose or "](" in prose or "://" in prose:
        prose = _LINK_SYNTAX.sub(" ", prose)
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
    identifier = _langid_model(Path(cache_dir) if cache_dir is not None else None, languages)
    unknown = [code for code in languages if code not in identifier.nb_classes]
    if unknown:  # py3langid's own "Unknown language code" surfaced as an internal error
        raise ConfigError(f"languages: {', '.join(map(repr, unknown))} unknown to the language detector; "
                          "use ISO 639-1 codes such as de, en, fr")
    identifier.set_languages(list(languages))
    return identifier


def _langid_model(cache_dir: Path | None, languages: tuple[str, ...] | None = None) -> Any:
    """py3langid's model, from an unpacked copy in the user cache when one can be kept there.

    The packaged model is LZMA-compressed: unpacking it costs 0.3 s in every process that detects a
    language, i.e. in every import that sees a new or edited note. The copy holds the same arrays;
    the DFA table and the feature scores (stored language by language) are mapped, not read: a
    detection touches the DFA states it walks, and with `languages` only their scores are read (the
    columns `set_languages` would cut out of the whole table, the same values in the same layout), so
    a one-off query does not read the whole model (issue 26).
    """
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    packaged = MODEL_DIR / MODEL_FILE
    copy = _unpacked_model(packaged, cache_dir) if cache_dir is not None else None
    if copy is not None:
        import numpy as np

        try:
            with np.load(copy / "arrays.npz", allow_pickle=False) as data:
                nextmove = np.load(copy / "nextmove.npy", mmap_mode="r", allow_pickle=False)
                rows = _read_array(copy, "nextmove_row")
                out_feat = data["out_feat"]
                # The DFA: one output per state, one 256-entry row per distinct row index.
                if len(rows) != len(out_feat) or len(nextmove) != (max(rows) + 1) * 256:
                    raise ValueError(f"{copy}: DFA tables do not match")
                memory = int(data["memory"]) if "memory" in data else 0
                classes, pc = data["classes"].tolist(), data["pc"]
                by_language = np.load(copy / "ptc-by-language.npy", mmap_mode="r", allow_pickle=False)
                if by_language.ndim != 2 or by_language.shape[0] != len(classes) or len(pc) != len(classes):
                    raise ValueError(f"{copy}: feature scores do not match the classes")
                keep = [i for i, c in enumerate(classes) if languages is None or c in languages]
                identifier = _identifier_class()(
                    np.ascontiguousarray(by_language[keep].T),  # [features, languages], as the model holds it
                    pc[keep],
                    [classes[i] for i in keep],
                    nextmove,
                    out_feat.tolist(),
                    norm_probs=True,
                    tk_row=rows,
                )
                identifier.walk = _Walk(nextmove, rows, out_feat, memory) if memory else None
                return identifier
        except (OSError, ValueError, KeyError, EOFError):
            pass  # a damaged copy: the packaged model below is always right
    return LanguageIdentifier.from_model_file(packaged, norm_probs=True)


@lru_cache(maxsize=1)
def _identifier_class() -> Any:
    """py3langid's identifier with its byte walk replaced by `_Walk` (same counts, same order).

    Built on first use, so that importing this module does not import py3langid.
    """
    from py3langid.langid import LanguageIdentifier

    class _WalkingIdentifier(LanguageIdentifier):  # type: ignore[misc]
        __slots__ = ("walk",)

        def _raw_score(self, text: Any) -> Any:
            walk: _Walk | None = self.walk
            if walk is None or not isinstance(text, bytes):
                return super()._raw_score(text)
            visits = walk.visits(text)
            if visits is None:
                return super()._raw_score(text)  # no feature: py3langid's own fill value
            return self._sparse_score(visits, self.nb_ptc)

    return _WalkingIdentifier


class _Walk:
    """py3langid's DFA walk over a text's UTF-8 bytes, as a few numpy gathers instead of a Python loop.

    Why it is exact: the automaton (Aho-Corasick over byte n-grams) forgets: its state after any byte
    depends only on the last `memory` bytes, checked for the whole model by `dfa_memory` when the copy
    is unpacked. So the state at every position is a walk of at most `memory` steps from the start
    state, done for all positions at once, and the features are counted in position order, as
    py3langid counts them (its score sums them in that order). 1.6x faster on a 600-character chunk
    probe, 2x on a note's 20,000 characters (language detection was a sixth of the chunking time).
    """

    __slots__ = ("_nextmove", "_out", "_rowbase", "memory")

    def __init__(self, nextmove: Any, rows: Any, out_feat: Any, memory: int) -> None:
        import numpy as np

        self._nextmove = np.asarray(memoryview(nextmove)) if not isinstance(nextmove, np.ndarray) else nextmove
        self._rowbase = np.asarray(memoryview(rows) if not isinstance(rows, np.ndarray) else rows, np.int64) << 8
        self._out = np.asarray(out_feat, dtype=np.int64)
        self.memory = memory

    def visits(self, data: bytes) -> Counter[int] | None:
        """`py3langid.langid.visit_counts` of `data`: feature -> count, in first-visit order; None if none."""
        import numpy as np

        text = np.frombuffer(data, dtype=np.uint8)
        n = len(text)
        state = np.zeros(n, dtype=np.int64)
        # Position i reads bytes i-memory+1 .. i from the start state; the step with `shift` feeds
        # every position i >= shift its byte i - shift.
        for shift in range(min(self.memory, n) - 1, -1, -1):
            state[shift:] = self._nextmove[self._rowbase[state[shift:]] + text[: n - shift]]
        features = self._out[state]
        features = features[features >= 0]
        # A Counter keeps first-insertion order, exactly as py3langid builds its own.
        return Counter(features.tolist()) if len(features) else None


def dfa_memory(nextmove: Any, rows: Any, limit: int = 12) -> int:
    """How many trailing bytes decide the DFA's state, or 0 if more than `limit` do.

    Follows every pair (state after `c + z`, state after `z`) over all bytes `c` and strings `z`,
    one byte of `z` at a time: once every pair agrees, the byte before the last `len(z)` no longer
    matters, so by induction no earlier byte does. A few seconds, once per unpacked copy.
    """
    import numpy as np

    step = np.asarray(nextmove, dtype=np.int64)
    rowbase = np.asarray(rows, dtype=np.int64) << 8
    states = len(rowbase)
    if states >= 1 << 31:
        return 0
    byte = np.arange(256, dtype=np.int64)
    after_c, after_z = step[rowbase[0] + byte], np.zeros(256, dtype=np.int64)
    for length in range(limit + 1):
        differ = after_c != after_z
        pairs = np.unique((after_c[differ] << 31) | after_z[differ])
        if not len(pairs):
            return length
        after_c = step[(rowbase[pairs >> 31][:, None] + byte).ravel()]
        after_z = step[(rowbase[pairs & ((1 << 31) - 1)][:, None] + byte).ravel()]
    return 0


_COPY_FORMAT = 3
"""In the copy's folder name: 2 added the DFA's `memory` (copies without it would never use `_Walk`);
3 keeps the feature scores language by language and both big tables as mappable `.npy` files."""
_TYPECODES = {2: "H", 4: "I", 8: "Q"}
"""Stdlib `array` type code of an unsigned integer of each size."""


def _unpacked_model(packaged: Path, root: Path) -> Path | None:
    """`root/langid-2-<content hash>/`, unpacked on first use; None if it cannot be written.

    Named by the packaged file's content, not its path or mtime: every virtualenv installs the same
    model with a new mtime, and a copy per install left 68 MB behind each time (55 copies, 3.5 GB on
    one machine). A new copy removes the others (`_prune_copies`).
    """
    import io
    import lzma
    import shutil
    import tempfile

    import numpy as np

    try:
        copy = root / f"langid-{_COPY_FORMAT}-{_content_key(packaged, root)}"
        if copy.is_dir():
            return copy
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{copy.name}.", dir=root))
        with lzma.open(packaged) as src, np.load(io.BytesIO(src.read()), allow_pickle=False) as data:
            memory = np.array(dfa_memory(data["nextmove"], data["nextmove_row"]))
            arrays = {k: data[k] for k in ("pc", "classes", "out_feat")}
            np.savez(tmp / "arrays.npz", memory=memory, **arrays)
            np.save(tmp / "ptc-by-language.npy", np.ascontiguousarray(data["ptc"].T))  # a language's scores together
            np.save(tmp / "nextmove.npy", np.ascontiguousarray(data["nextmove"]))
            rows = np.ascontiguousarray(data["nextmove_row"])
            rows.tofile(tmp / f"nextmove_row.{_TYPECODES[rows.dtype.itemsize]}")
        try:
            os.rename(tmp, copy)  # atomic: a concurrent process sees no copy or a whole one
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process was first
        _prune_copies(root, keep=copy)
        return copy if copy.is_dir() else None
    except (OSError, RuntimeError, ValueError, KeyError, lzma.LZMAError):
        return None


_HASHES_FILE = "langid-hashes.json"
"""Packaged models' hashes by path and stat key, beside the copies (`_content_key`)."""
_KEPT_HASHES = 8
"""Installs remembered in that file (each virtualenv has its own packaged file)."""


def _content_key(packaged: Path, root: Path | None = None) -> str:
    """A short hash of the packaged model (4.6 MB): the same model in every install gets one copy.

    Hashing it cost every process that detects a language 5-10 ms, a cold search's too (issue 26), so
    the hash is kept in `root` under the file's path and stat key (`file_stat`; not while racily new)
    and computed again only when they change.
    """
    import contextlib
    import hashlib
    import json
    import time

    from .file_stat import is_racy, replace_file, stat_key

    key = stat_key(packaged.stat())
    memo = root / _HASHES_FILE if root is not None else None
    kept: dict[str, Any] = {}
    if memo is not None:
        try:
            kept = dict(json.loads(memo.read_text(encoding="utf-8")))
            entry = kept.get(str(packaged)) or {}
            if entry.get("stat") == list(key) and isinstance(entry.get("hash"), str):
                return str(entry["hash"])
        except (OSError, ValueError, TypeError, AttributeError):
            kept = {}
    digest = hashlib.blake2b(packaged.read_bytes(), digest_size=10).hexdigest()
    if memo is not None and not is_racy(key, time.time_ns()):
        others = [(p, e) for p, e in kept.items() if p != str(packaged)][-(_KEPT_HASHES - 1):]
        record = {**dict(others), str(packaged): {"stat": list(key), "hash": digest}}
        with contextlib.suppress(OSError):  # a folder that cannot be written: hashed again next time
            replace_file(memo, json.dumps(record))
    return digest


_STALE_TMP_SECONDS = 3600.0
"""A half-written copy older than this is a crashed run's, not a concurrent one's."""


def _prune_copies(root: Path, keep: Path) -> None:
    """Remove the other unpacked copies (older models, older formats, per-install copies of earlier
    releases) and crashed runs' temporaries. A process that still reads one falls back to the packaged
    model if its files vanish (`_langid_model`), so removing never breaks detection."""
    import shutil
    import time

    now = time.time()
    for other in root.glob("langid-*"):
        if other == keep or not other.is_dir() or other.is_symlink():
            continue
        try:
            half_written = "." in other.name
            if half_written and now - other.stat().st_mtime < _STALE_TMP_SECONDS:
                continue  # another process may be writing it right now
        except OSError:
            continue
        shutil.rmtree(other, ignore_errors=True)


def _read_array(folder: Path, name: str) -> Any:
    """The raw table `name.<typecode>` of an unpacked model as a stdlib `array`."""
    from array import array

    (path,) = folder.glob(f"{name}.?")
    values = array(path.suffix[1:])
    with path.open("rb") as fh:
        values.fromfile(fh, path.stat().st_size // values.itemsize)
    return values
