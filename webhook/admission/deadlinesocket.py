"""TLS sockets whose blocking reads and writes have a deadline, for gunicorn's pool threads.

The event loop of `slowclients.GuardedThreadWorker` hands a thread a connection whose request
has arrived; what a thread still reads or writes on it (a body the loop did not buffer, the
answer to a client that stops reading) must end too. `tls.py` makes every accepted socket a
DeadlineSocket, so no client can hold a thread past REQUEST_SECONDS per read or write.

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.workers.gthread.ThreadWorker.handle(conn)`: switches the socket to blocking in the
  thread, where DeadlineSocket starts its clock.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

REQUEST_SECONDS = 5.0
"""How long a client has to send its whole request, and to take each write of the answer."""


class DeadlineSocket(ssl.SSLSocket):
    """An SSLSocket whose blocking mode has a deadline instead of none.

    gunicorn switches a connection to blocking when a thread takes it; here that starts a
    REQUEST_SECONDS budget for every read of the request the event loop did not already
    buffer, and each write gets its own REQUEST_SECONDS.
    """

    _deadline: float | None = None
    write_seconds = REQUEST_SECONDS
    """How long each write of the answer may take (`loopserving` shortens it in the loop)."""

    def setblocking(self, flag: bool) -> None:
        if not flag:
            super().setblocking(False)
            return
        self._deadline = None  # a thread took the connection: a new request begins
        super().settimeout(REQUEST_SECONDS)

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        self._arm()
        return super().recv(buflen, flags)

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        self._arm()
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        if self.gettimeout() != 0.0:
            super().settimeout(self.write_seconds)
        super().sendall(data, flags)

    def _arm(self) -> None:
        if self.gettimeout() == 0.0:  # non-blocking, in the event loop: it never waits
            return
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + REQUEST_SECONDS
        remaining = self._deadline - now
        if remaining <= 0:
            raise TimeoutError("the client did not send its request in time")
        super().settimeout(remaining)
