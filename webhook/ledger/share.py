"""The gunicorn workers of one replica take turns per tenant and pass on their last write.

Each worker is its own process with its own KubeLedger, so two workers of one replica
changing the same tenant would race like two replicas: the loser's compare-and-swap comes
back 409 after a whole write's time, then it pauses, re-reads and writes again, and under
concurrent creates a tenant's throughput collapses. Workers share a machine, so they can do
better: per tenant a lock file, held by
the worker committing a batch, whose content is the TenantUsage as last written or read by
any of them. The next worker starts from that copy: no conflict and no read between workers
of one replica. Replicas still meet only at the API server's compare-and-swap, which alone
decides; the copy is never trusted beyond being the base of a write that the API server
checks (resourceVersion and uid), so a stale or foreign copy only costs a 409 and a read.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from webhook.ledger.batch import OutOfTime


@dataclass(frozen=True)
class Copy:
    """A TenantUsage as last written or read by a worker of this replica."""

    uid: str
    resource_version: str
    text: str  # spec.records
    written_at: float  # time.monotonic() when the last write ended (0: only read)
    write_seconds: float  # how long that write took


class Turn:
    """The lock file of one tenant, held: read the copy in it, or replace it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def read(self) -> Copy | None:
        """The copy, or None when no worker stored one (or it is not one this code wrote)."""
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0).decode()
        header, _, text = data.partition("\n")
        fields = header.split(" ")
        if len(fields) != 4:
            return None
        try:
            return Copy(fields[0], fields[1], text, float(fields[2]), float(fields[3]))
        except ValueError:
            return None

    def write(self, copy: Copy) -> None:
        header = f"{copy.uid} {copy.resource_version} {copy.written_at!r} {copy.write_seconds!r}"
        data = f"{header}\n{copy.text}".encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)


class Share:
    """Per tenant, one lock file under `directory` (one directory per API server)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_server(cls, server: str, base: Path | None = None) -> Share | None:
        """The share of every worker talking to `server`; None when no directory is writable
        (each worker then races alone, as replicas do)."""
        scope = hashlib.sha256(server.encode()).hexdigest()[:16]
        directory = (base or Path(tempfile.gettempdir())) / f"dragate-ledger-{scope}"
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return None
        return cls(directory) if os.access(directory, os.W_OK) else None

    @contextmanager
    def turn(self, tenant: str, deadline: float) -> Iterator[Turn]:
        """The tenant's turn among this replica's workers; OutOfTime if not had by `deadline`."""
        name = hashlib.sha256(tenant.encode()).hexdigest()[:32]
        fd = os.open(self.directory / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock(fd, deadline, tenant)
            yield Turn(fd)
        finally:
            os.close(fd)  # releases the lock


def _lock(fd: int, deadline: float, tenant: str) -> None:
    """flock cannot time out, so poll it: 0.2 ms at first, doubling up to 2 ms."""
    pause = 0.0002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() + pause >= deadline:
            raise OutOfTime(f"ledger for tenant {tenant!r} busy in this replica; retry")
        time.sleep(pause)
        pause = min(pause * 2, 0.002)
