"""The SQLite ledger's write epoch: a counter in shared memory that every write moves.

`PRAGMA data_version` tells a connection whether another one has committed, but asking costs a
read transaction (the WAL index and its locks): served, the first SQLite call of a review is the
largest single step of re-admitting an unchanged holder. Every write through `SqliteLedger`
holds its WriterGate and moves this counter after its COMMIT, before it lets the next writer in;
so a reader that finds the epoch where it was when it read a tenant's rows knows no write of a
SqliteLedger has committed since, without asking SQLite.

The counter is 8 bytes of a small file next to the ledger (`<ledger>.epoch`), mapped shared
by every process (a fork keeps the mapping), read and written as one aligned 64-bit word.
An epoch names the file too (device and inode): were the file deleted and made again, no
epoch read before could equal one read after, and each process follows the new file within
FOLLOW_SECONDS (looking it up by name is a path walk, a good part of the cost of the
SQLite call it replaces, so it is not done on every read; a read in that window may trust
rows another process has since changed through the new file: deleting it is not supported).
Writes still check `data_version` under the write lock, so what they store never rests on
the epoch alone. A file that cannot be opened or mapped is FactsUnavailable (the ledger's
own LedgerUnavailable is one too): the review fails as configured, never on rows it cannot
vouch for.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from collections.abc import Callable

from webhook.types import FactsUnavailable

SIZE = 8
FOLLOW_SECONDS = 1.0
"""How often a process checks that the file it maps is still the one the path names."""
Epoch = tuple[int, int, int]
"""(device, inode, count): equal twice only if no write committed between."""


class WriteEpoch:
    """One process's view of the counter file (shared by its threads)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._mapped = _map(path)
        self._checked_at = clock()

    def current(self) -> Epoch:
        file, counter = self._following()
        return (*file, counter.value)

    def bump(self) -> Epoch:
        """Called with the writer gate held, after a COMMIT: one writer at a time moves it,
        so the read-and-add cannot lose another's step."""
        file, counter = self._following()
        counter.value += 1
        return (*file, counter.value)

    def _following(self) -> tuple[tuple[int, int], ctypes.c_uint64]:
        now = self._clock()
        if now - self._checked_at < FOLLOW_SECONDS:
            return self._mapped
        self._checked_at = now
        try:
            stat = os.stat(self.path)
            same = (stat.st_dev, stat.st_ino) == self._mapped[0]
        except FileNotFoundError:
            same = False
        except OSError as error:
            raise FactsUnavailable(f"ledger epoch {self.path}: {error}") from error
        if not same:
            self._mapped = _map(self.path)
        return self._mapped


def after(epoch: Epoch) -> Epoch:
    """The epoch one write leaves behind `epoch` (read under the writer gate)."""
    device, inode, count = epoch
    return (device, inode, count + 1)


def _map(path: str) -> tuple[tuple[int, int], ctypes.c_uint64]:
    """The file (made SIZE bytes if shorter) mapped shared, and the counter in it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < SIZE:
                os.ftruncate(fd, SIZE)
            shared = mmap.mmap(fd, SIZE)
            stat = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise FactsUnavailable(f"ledger epoch {path}: {error}") from error
    return (stat.st_dev, stat.st_ino), ctypes.c_uint64.from_buffer(shared)
