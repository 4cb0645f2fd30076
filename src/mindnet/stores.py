"""The store a vault's settings name, opened: the embedded Edge store of its folder, or a Qdrant server (R20).

Apart from `sync` so that opening a store for a search imports no chunker: `sync` re-exports these.
"""

from __future__ import annotations

from pathlib import Path

from . import store as store_module
from .config import Settings, store_dir
from .store import Store


def open_store(vault: str | Path, settings: Settings, *, leave_to_exit: bool = False) -> Store:
    """The configured store: a Qdrant server by URL, else the embedded Edge store of the vault (R20);
    `leave_to_exit`, see `Store.leave_to_exit`."""
    if settings.qdrant_url:
        return open_server_store(settings.qdrant_url, settings.qdrant_api_key, settings)
    return open_local_store(vault, settings, leave_to_exit=leave_to_exit)


def open_local_store(vault: str | Path, settings: Settings, *, leave_to_exit: bool = False) -> Store:
    """The embedded Edge store in the vault's store folder, whatever `qdrant_url` says (migrate's source)."""
    return store_module.open_store(
        path=store_dir(vault, settings) / "qdrant", prefix=settings.collection_prefix,
        hnsw_m=settings.hnsw_m, hnsw_ef_construct=settings.hnsw_ef_construct, leave_to_exit=leave_to_exit,
    )


def open_server_store(url: str, api_key: str | None, settings: Settings) -> Store:
    """A Qdrant server's collections with the configured prefix, sharding and index settings."""
    return store_module.open_store(
        url=url,
        api_key=api_key,
        prefix=settings.collection_prefix,
        shard_number=settings.shard_number,
        replication_factor=settings.replication_factor,
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construct=settings.hnsw_ef_construct,
    )
