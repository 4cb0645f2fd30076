"""When a cached reading of a file may be trusted: its stat key, git's racy-clean rule, and how a
cache file is written so that no reader sees half of it.

Both file caches (`note_cache` for imports, `lint.cache` for lint's vault index) skip re-reading a
file whose stat key is unchanged. The key holds mtime, ctime, size and inode: mtime alone misses
an edit that restores it (`os.utime`, `touch -r`, some sync tools) and keeps the size, while ctime
is set by the kernel on every change and cannot be set back; the inode catches a file replaced by
a rename (editors that save atomically).

A key is only as fine as the file system's clock: a second same-size edit within one timestamp
tick leaves it unchanged. So an entry whose mtime or ctime is within `RACY_SECONDS` of the moment
it is cached is not stored, and the file is read again next time (git calls these entries "racily
clean").
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TypeAlias

StatKey: TypeAlias = tuple[int, int, int, int]
"""(mtime_ns, ctime_ns, size, inode) of a file."""

RACY_SECONDS = 2.0
"""Files changed this recently are re-read next time rather than trusted by their stat key (read at
call time, so a test may set it to 0 to cache freshly written files)."""


def stat_key(st: os.stat_result) -> StatKey:
    """The part of a stat result that changes whenever the file's content may have changed."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def is_racy(key: StatKey, now_ns: int) -> bool:
    """Whether a file with this key changed too recently (before `now_ns`) for its key to be trusted."""
    mtime_ns, ctime_ns, _, _ = key
    return max(mtime_ns, ctime_ns) > now_ns - int(RACY_SECONDS * 1e9)


def replace_file(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a temporary file of its own (one per call, so threads and
    processes never share one) renamed over it, removed if the write fails.

    Raises:
        OSError: the folder cannot be written; the caller decides whether that matters.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone after the rename; left by a failed write otherwise
