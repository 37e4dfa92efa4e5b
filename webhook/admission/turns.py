"""What every request gets from the serving layer before it is answered, whatever its path.

gunicorn's gevent worker serves a kept-alive connection in one greenlet: it parses the next
request and calls the app, and a request already in the parser's buffer (HTTP pipelining) is
parsed without waiting on the socket, so without a pause one connection could be answered
request after request while every other connection waits. `Turns` is the outermost WSGI app:

- it notes the request's arrival (`ARRIVED`), from which a review's deadline counts, before
  the body is read and parsed;
- it yields the loop once (`gevent.sleep(0)`) before the request is answered: every
  connection gets at most one request per turn of the loop, so a probe or a review on a new
  connection waits for one answer per busy connection, not for a pipeline's thousands;
- it bounds the writing of the answer: gunicorn writes it on a blocking socket, so a client
  that never reads its answers would hold its connection and greenlet for ever. If the answer
  is not written within `WRITE_SECONDS`, the connection is shut down (routes.hang_up) and the
  blocked write ends as a broken pipe, which gunicorn closes quietly.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import gevent

from webhook.admission.routes import ARRIVED, Environ, StartResponse, WsgiApp, hang_up

WRITE_SECONDS = 10.0
"""How long writing one answer may take: the API server, probes and Prometheus read theirs
at once; only a client that does not read its answers makes a write wait."""


class Turns:
    """WSGI middleware: arrival time, one yield of the loop, a bounded write (module doc)."""

    def __init__(self, app: WsgiApp, write_seconds: float = WRITE_SECONDS) -> None:
        self.app = app
        self.write_seconds = write_seconds

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        environ.setdefault(ARRIVED, time.monotonic())  # a server or test may have noted it
        gevent.sleep(0)
        body = self.app(environ, start_response)
        timer = gevent.get_hub().loop.timer(self.write_seconds)
        timer.start(hang_up, environ)
        return Bounded(body, timer)


class Bounded:
    """The app's answer, as the server iterates and writes it; `close` (which the server
    calls once it has written it, PEP 3333) stops the write timer, then closes the app's."""

    def __init__(self, body: Iterable[bytes], timer: Any) -> None:
        self._body, self._timer = body, timer

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        self._timer.close()
        close = getattr(self._body, "close", None)
        if close is not None:
            close()
