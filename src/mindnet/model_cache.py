"""Files derived from a packaged model, built once per model and version and kept in the cache folder.

Building USE's and e5's onnx graphs means importing `onnx` and running seconds of Python over the
weights; a process that answers one query cannot pay that each time (issue 26). So each engine
builds its files once into `Settings.cache_dir` and later processes read them back:

- A folder per model, version and build format (`name`), holding the built files and
  `manifest.json`: the source model's hash and a checksum of every file.
- Loading verifies both: the source model must hash to the manifest's hash (a reinstalled or
  upgraded model makes the folder stale) and every file must match its checksum (a damaged or
  truncated file). Anything that does not verify is rebuilt, never used.
- A memory-mapped table (USE's 65 MB embedding table) is read a few rows per query; checksumming it
  read all of it, the largest part of a cold search's model load and 65 MB of page cache in every
  process (issue 26). So the manifest keeps each mapped file's stat key once it has been checked,
  and a load that finds the same key trusts the checksum it had: nothing writes into an installed
  folder (it is replaced by a rename, which gives its files new inodes), any write to a file
  changes its ctime, and a key is recorded only once it is not racily new (`file_stat`).
- Hashing the source costs a read of the whole model, so the manifest also keeps the source's
  stat key (`file_stat`) at build time: while the file keeps that key (and it was not racily
  new when built) its hash is known. Another install of the same model hashes it once per process.
- Writes are atomic: files go to a temporary folder that is renamed into place, so a reader sees
  no folder or a whole one, and two processes building at once both end with a whole folder
  (the second rename loses, and its files are used from memory).

Only the standard library: a query-time load imports no `onnx`, and this module no numpy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from .file_stat import StatKey, is_racy, replace_file, stat_key

MANIFEST = "manifest.json"
Files = dict[str, Any]
"""Files by name (no folders): bytes, or a read-only `mmap` for a file `load` was asked to map."""

_STALE_TMP_SECONDS = 3600.0
"""A half-written folder older than this is a crashed run's, not a concurrent one's."""


def checksum(data: Any) -> str:
    """CRC-32 of a cached file, as zip and PNG use it to catch a damaged file.

    Not a security hash: the folder is the user's own, and whoever can write there can change the
    installed model too. It is the cheap check that every load can afford on the graphs and tables.
    """
    return f"{zlib.crc32(data):08x}"


def source_hash(path: Path) -> str:
    """blake2b of the source model file: its identity, whatever its path or mtime."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, lambda: hashlib.blake2b(digest_size=20)).hexdigest()


def load(root: Path, name: str, source: Path, mapped: Collection[str] = ()) -> Files | None:
    """The files of `root/name` if they were built from `source` and are whole; None otherwise.

    Files named in `mapped` come back memory-mapped (read-only, checked all the same): a table that
    is read a few rows at a time is then not copied into the process (the USE embedding table).
    """
    folder = root / name
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if not _same_source(manifest, source):
            return None
        files: Files = {}
        checked: dict[str, StatKey] = dict(manifest.get("checked") or {})
        for file, expected in manifest["files"].items():
            if file in mapped:
                data = _mapped(folder / file)
                key = stat_key(os.stat(folder / file))
                if list(checked.get(file) or ()) != list(key):
                    if checksum(data) != expected:
                        return None
                    if not is_racy(key, time.time_ns()):  # a same-tick write could keep a racy key
                        checked[file] = key
            else:
                data = (folder / file).read_bytes()
                if checksum(data) != expected:
                    return None
            files[file] = data
        if checked != dict(manifest.get("checked") or {}):
            _record_checked(folder, manifest, checked)
        return files
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _record_checked(folder: Path, manifest: dict[str, Any], checked: Mapping[str, StatKey]) -> None:
    """Keep the stat keys of mapped files that matched their checksums (see the module docstring); a
    folder that cannot be written is checked again next time."""
    updated = {**manifest, "checked": {f: list(k) for f, k in checked.items()}}
    with contextlib.suppress(OSError):
        replace_file(folder / MANIFEST, json.dumps(updated))


class MappedFile(mmap.mmap):
    """A cached file mapped read-only, with its `path` (a loader that reads files itself, such as
    onnxruntime, is given the path: its own read is cheaper than a Python bytes copy)."""

    path: Path


def _mapped(path: Path) -> MappedFile:
    with path.open("rb") as fh:
        mapped = MappedFile(fh.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.path = path
    return mapped


def has(root: Path, name: str, source: Path) -> bool:
    """Whether a folder built from `source` is there (files are checked when `load` reads them)."""
    try:
        manifest = json.loads((root / name / MANIFEST).read_text(encoding="utf-8"))
        return _same_source(manifest, source) and all((root / name / f).is_file() for f in manifest["files"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def load_or_build(root: Path | None, name: str, source: Path, build: Callable[[], Files],
                  mapped: Collection[str] = ()) -> Files:
    """The files of `root/name`, built from `source` by `build` and kept there when they are not.

    With `root` None, or a folder that cannot be written, the files are built and used from memory
    (each process then pays the build, as before the cache existed). `mapped`: as for `load`.
    """
    if root is not None:
        found = load(root, name, source, mapped)
        if found is not None:
            return found
    files = build()
    if root is not None:
        with contextlib.suppress(OSError):
            store(root, name, source, files)
    return files


def store(root: Path, name: str, source: Path, files: Mapping[str, bytes]) -> None:
    """Write `files` as `root/name` atomically, replacing a stale or damaged folder of that name."""
    root.mkdir(parents=True, exist_ok=True)
    _prune_tmp(root, name)
    before = os.stat(source)
    digest = source_hash(source)
    key: StatKey | None = stat_key(before)
    if key != stat_key(os.stat(source)) or is_racy(key, time.time_ns()):
        key = None  # changed while hashed, or too new to trust by its stat: always hash it
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        for file, data in files.items():
            (tmp / file).write_bytes(data)
        manifest = {"source": {"hash": digest, "stat": key}, "files": {f: checksum(d) for f, d in files.items()}}
        (tmp / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
        _install(tmp, root / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _same_source(manifest: dict[str, object], source: Path) -> bool:
    """Whether `source` is the model the manifest's files were built from (hashing it only when its
    stat key differs from the one recorded at build time)."""
    recorded = manifest["source"]
    assert isinstance(recorded, dict)
    key = recorded.get("stat")
    if key is not None and list(stat_key(os.stat(source))) == list(key):
        return True
    return source_hash(source) == recorded["hash"]


def _install(tmp: Path, folder: Path) -> None:
    """Rename `tmp` to `folder`; an existing folder (stale, damaged or a concurrent build) is replaced.

    A concurrent process may install its own folder between the two renames: then ours is left
    (`rename` refuses a non-empty target) and theirs, equally whole, stays.
    """
    try:
        os.rename(tmp, folder)
        return
    except OSError:
        pass
    trash = folder.with_name(f".{folder.name}.old.{os.getpid()}")
    try:
        os.rename(folder, trash)
    except OSError:
        return  # gone already: another process replaced it
    shutil.rmtree(trash, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rename(tmp, folder)


def _prune_tmp(root: Path, name: str) -> None:
    """Remove what crashed builds of `name` left (temporary and replaced folders), not a live build's."""
    now = time.time()
    for other in root.glob(f".{name}.*"):
        with contextlib.suppress(OSError):
            if now - other.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(other, ignore_errors=True)
