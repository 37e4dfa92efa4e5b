"""This process's id without a system call, kept current across forks.

`os.getpid` asks the kernel every time (glibc stopped caching it), and per review it was
asked once per metric update and once per ledger access. gunicorn forks its workers, so the
id is taken again in each child as it starts.
"""

from __future__ import annotations

import os

_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def current() -> int:
    """`os.getpid()`, from memory."""
    return _PID[0]
