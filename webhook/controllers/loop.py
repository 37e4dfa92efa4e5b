"""The one contract of a controller loop: whether it runs only under the Lease, how often,
and what one pass does. The runner owns threads, sleeps, wake-ups and errors, so a loop is a
plain object whose pass can be called (and tested) directly."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Loop(Protocol):
    """What the runner needs of a loop."""

    @property
    def name(self) -> str: ...

    @property
    def leading(self) -> bool:
        """True: passes run only while this process holds the Lease."""
        ...

    @property
    def interval(self) -> float:
        """Seconds between two passes, unless woken earlier."""
        ...

    @property
    def wake(self) -> threading.Event:
        """Set to run the next pass now (a deleted claim, a changed policy set, the Lease)."""
        ...

    def pass_once(self) -> None: ...


@dataclass(frozen=True)
class LoopSpec:
    """A row of the controller's table: a `Loop` from a pass function. `writes` says what
    its passes change in the cluster (docs/architecture.md lists the table)."""

    name: str
    pass_fn: Callable[[], object]
    interval: float
    leading: bool = True
    writes: str = ""
    wake: threading.Event = field(default_factory=threading.Event, compare=False)

    def pass_once(self) -> None:
        self.pass_fn()
