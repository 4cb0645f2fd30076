"""The import lease of a server store: importers on different machines exclude each other (R21).

The embedded store is guarded by a `flock` in its folder, which only works on one machine. A
Qdrant server is shared, so its lock must live in the server: one record in the `<prefix>_meta`
collection holding the holder, its host, a random token and an expiry time.

* Taking it is one conditional write: an upsert whose `update_filter` lets it replace the record
  only when that record has expired or carries this lease's token. A missing record is inserted
  whatever the filter says. Qdrant applies the writes to one shard in order, so of two importers
  racing for it exactly one record survives; reading it back tells each whether it won.
* A thread renews it every third of its time to live, with the same condition (only while the
  token is still this lease's), so a long import keeps it and a killed one lets it lapse.
* A stale lease (its holder died or lost the network) expires after `ttl` seconds and is then
  taken over by the next importer. Expiry compares the clocks of two machines: keep them in sync
  (NTP); the default of 60 s tolerates the usual skew of a few seconds.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import StoreError
from .records import point_id
from .server_errors import server_reason

LEASE_KEY = "import-lease"
DEFAULT_TTL = 60.0
"""Seconds a lease lives without renewal."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What the server holds about the current lease."""

    holder: str
    host: str
    pid: int
    token: str
    expires_at: float
    """Seconds since the epoch, by the holder's clock."""

    def describe(self, now: float) -> str:
        left = self.expires_at - now
        when = f"expires in {left:.0f} s" if left > 0 else f"expired {-left:.0f} s ago"
        return f"{self.holder} (pid {self.pid} on {self.host}; {when} unless renewed)"


class ImportLease:
    """A lease record in a Qdrant server, taken on enter, renewed in the background, released on exit.

    Raises (on enter):
        StoreError: another importer holds an unexpired lease (named, with its expiry), or the
            server cannot be reached.
    """

    def __init__(self, client: Any, collection: str, where: str, *, ttl: float = DEFAULT_TTL,
                 holder: str = "mindnet import", clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.collection = collection
        self.where = where
        self.ttl = ttl
        self.holder = holder
        self.clock = clock
        self.token = uuid.uuid4().hex
        self.lost: LeaseRecord | None = None
        """The record that replaced ours, when a renewal found the lease gone."""
        self._id = point_id(LEASE_KEY)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the three writes ---------------------------------------------------------------------------

    def take(self) -> None:
        """Write our record where there is none, an expired one, or our own; fail if another holds it."""
        from qdrant_client import models as qm

        now = self.clock()
        free_or_mine = qm.Filter(should=[
            qm.FieldCondition(key="expires_at", range=qm.Range(lt=now)),
            qm.FieldCondition(key="token", match=qm.MatchValue(value=self.token)),
        ])
        self._write(now, update_filter=free_or_mine)
        current = self.read()
        if current is None or current.token != self.token:
            held = current.describe(now) if current else "another importer"
            raise StoreError(f"another import is running on {self.where}: {held}; wait for it to finish "
                             "(a lease whose holder died expires by itself)")

    def renew(self) -> bool:
        """Extend our record while it is still ours; False (and `lost` set) when it is not."""
        from qdrant_client import models as qm

        mine = qm.Filter(must=[qm.FieldCondition(key="token", match=qm.MatchValue(value=self.token))])
        self._write(self.clock(), update_filter=mine, update_mode=qm.UpdateMode.UPDATE_ONLY)
        current = self.read()
        if current is not None and current.token == self.token:
            return True
        self.lost = current or LeaseRecord("nobody", "-", 0, "", 0.0)
        return False

    def release(self) -> None:
        """Delete our record (only ours: a lease taken over after expiry stays with its new holder)."""
        from qdrant_client import models as qm

        self.client.delete(self.collection, qm.FilterSelector(filter=qm.Filter(must=[
            qm.HasIdCondition(has_id=[self._id]),
            qm.FieldCondition(key="token", match=qm.MatchValue(value=self.token)),
        ])), wait=True)

    def read(self) -> LeaseRecord | None:
        """The lease record in the server now, whoever holds it."""
        records = self.client.retrieve(self.collection, [self._id], with_payload=True)
        if not records:
            return None
        p = records[0].payload or {}
        return LeaseRecord(str(p.get("holder", "?")), str(p.get("host", "?")), int(p.get("pid", 0)),
                           str(p.get("token", "")), float(p.get("expires_at", 0.0)))

    def _write(self, now: float, **condition: Any) -> None:
        from qdrant_client import models as qm

        payload = {"lease": LEASE_KEY, "holder": self.holder, "host": socket.gethostname(), "pid": os.getpid(),
                   "token": self.token, "expires_at": now + self.ttl}
        self.client.upsert(self.collection, [qm.PointStruct(id=self._id, vector={}, payload=payload)],
                           wait=True, ordering=qm.WriteOrdering.STRONG, **condition)

    # -- the background renewal ---------------------------------------------------------------------

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not self.renew():
                    return
            except Exception:  # the server is briefly unreachable: try again next tick, expire if it stays so
                continue

    def __enter__(self) -> ImportLease:
        try:
            self.take()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"Qdrant at {self.where}: cannot take the import lease: {server_reason(exc)}") from exc
        self._thread = threading.Thread(target=self._renew_loop, name="mindnet-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost is None:
            try:
                self.release()
            except Exception as exc:  # it expires by itself; the import's own outcome matters more
                if exc_type is None:
                    raise StoreError(f"Qdrant at {self.where}: cannot release the import lease "
                                     f"(it expires in {self.ttl:.0f} s): {server_reason(exc)}") from exc
        elif exc_type is None:
            raise StoreError(
                f"the import lease on {self.where} was lost to {self.lost.describe(self.clock())}: this import may "
                "have overlapped another one; run `mindnet import` again to make sure the store is complete"
            )
