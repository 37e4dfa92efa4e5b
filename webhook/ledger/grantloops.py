"""The two threads a process that admits from quota grants runs beside its KubeLedger.

The `Flusher` writes what the process admitted from its grants and gives idle grants back;
the `WantWatch` gives a grant back at once when another process wants it. The ledger makes
them and never starts them: threads do not survive a fork, and a store that started threads
on its first use would start them wherever it happened to be used first. The composer
(`webhook.assembly`) starts them with the process's other loops and stops them on shutdown.
Until they run, the ledger admits nothing from a grant: every admission waits for its write.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.ledger.flusher import Flusher
from webhook.ledger.wantwatch import WantWatch


@dataclass(frozen=True)
class GrantLoops:
    """A grant ledger's flusher and want watch, started and stopped together."""

    flusher: Flusher
    wants: WantWatch

    def start(self) -> None:
        self.flusher.start()
        self.wants.start()

    def running(self) -> bool:
        """Whether holders admitted from a grant are written moments later."""
        return self.flusher.has_started

    def stop(self, timeout: float = 2.0) -> None:
        """Write what the grants admitted, give every grant back, stop watching wants."""
        self.flusher.drain(timeout)
        self.wants.stop()
