"""Reviews answered on the worker's event-loop thread instead of a pool thread.

`slowclients.GuardedThreadWorker` reads every request whole in its event loop and, as stock
gthread does, hands it to a pool thread, whose answer comes back to the loop through a pipe:
two thread switches and two wake-ups per request, a large share of the CPU of a small
request (docs/benchmarks.md). A review is CPU, and the threads of one worker share one
interpreter lock anyway.

So a review is answered in the loop, under `blocking.forbidden()`: what would wait on the
network (the cluster ledger's write, a template created, a read of the API server) raises
`WouldBlock` before it waits, nothing of the attempt is sent or counted, and the request is
handed to a pool thread, from its buffered bytes. What stays on pool threads: those
reviews, and every other path (/metrics reads every worker's files, /readyz, /healthz).
While the loop answers a review it reads no other connection; what bounds that: reviews
never wait on the network there, and a write of the answer waits at most LOOP_WRITE_SECONDS
for a client that stops reading (a pool thread's write may wait REQUEST_SECONDS).

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.workers.gthread.ThreadWorker.handle(conn)`: answers one buffered request and
  returns whether to keep the connection; an exception of the app reaches `handle_error`
  with nothing written (the app has not called start_response yet).
- `gunicorn.workers.gthread.ThreadWorker.finish_request(conn, fs)`: called with a finished
  Future, as the pool's callback calls it.
- `gunicorn.workers.gthread.ThreadWorker.method_queue.defer(callback, *args)`: runs a callback
  on the next loop turn.
- `gunicorn.workers.gthread.ThreadWorker.wsgi, nr, max_requests, max_keepalived`: the app, and
  what gthread's `handle_request` counts and decides keep-alive by (`buffered` answers).
- `gunicorn.config.Config.limit_request_line, limit_request_fields, limit_request_field_size`:
  the limits gunicorn's parser applies, which `buffered.parse` keeps.

A review in the loop that `buffered.parse` takes (every request the API server sends) is
answered from the loop's bytes without gunicorn's second parse; what it leaves goes through
`handle`.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from webhook.admission import buffered
from webhook.admission.deadlinesocket import DeadlineSocket
from webhook.admission.slowclients import REVIEW_PATHS, GuardedThreadWorker
from webhook.types import blocking

LOOP_WRITE_SECONDS = 1.0
"""How long a write of an answer made in the loop may wait for the client to read."""


class LoopServingWorker(GuardedThreadWorker):
    """GuardedThreadWorker that answers reviews in its loop, unless they would wait."""

    alive: bool  # gunicorn's running flag (untyped there), cleared after the last request

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._would_block = False  # set by handle_error, read right after handle (the loop)
        self._limits = buffered.Limits.of(self.cfg)

    def _serve(self, conn: Any, request: bytes, path: bytes) -> None:
        if path not in REVIEW_PATHS or not isinstance(conn.sock, DeadlineSocket):
            super()._serve(conn, request, path)
            return
        keep = self._answer_here(conn, request)
        if keep is None:  # it would have waited: a pool thread answers it from the start
            self._buffer(conn, request, fresh=True)
            self.enqueue_req(conn)
            return
        done: Future[bool] = Future()
        done.set_result(keep)
        if conn.dragate_ahead:  # a pipelined next request: read on the next turn, not nested
            self.method_queue.defer(self.finish_request, conn, done)
        else:
            self.finish_request(conn, done)

    def _answer_here(self, conn: Any, request: bytes) -> bool | None:
        """The review answered in this thread; None when it would have waited."""
        self._would_block = False
        conn.sock.write_seconds = LOOP_WRITE_SECONDS
        try:
            with blocking.forbidden():
                keep = self._answer(conn, request)
        finally:
            conn.sock.write_seconds = DeadlineSocket.write_seconds
        return None if self._would_block else keep

    def _answer(self, conn: Any, request: bytes) -> bool:
        parsed = buffered.parse(request, self._limits)
        self._buffer(conn, b"" if parsed is not None else request)
        if parsed is None:
            return bool(self.handle(conn))  # gunicorn's way: its parser, environ, Response
        return self._answer_buffered(conn, parsed)

    def _answer_buffered(self, conn: Any, request: buffered.BufferedRequest) -> bool:
        """What gthread's `handle_request` does for `request`, from the loop's bytes."""
        keep = self._keeps_alive()
        conn.sock.setblocking(True)  # as in `handle`: a write waits LOOP_WRITE_SECONDS at most
        env = buffered.environ(
            request, conn.sock, conn.client, conn.server, multiprocess=self.cfg.workers > 1
        )
        try:
            answer = buffered.respond(self.wsgi, env, keep_alive=keep)
        except Exception as exc:  # WouldBlock too: handle_error tells them apart
            self.handle_error(None, conn.sock, conn.client, exc)
            return False
        self._count_request()
        try:
            conn.sock.sendall(answer.data)
        except OSError:  # the client left: nothing to answer, as gthread's handle
            return False
        finally:
            answer.close()
        return keep

    def _keeps_alive(self) -> bool:
        """gthread's rule: not when stopping, keep-alive off, too many kept or the last one."""
        if not (self.alive and self.cfg.keepalive) or self.nr + 1 >= self.max_requests:
            return False
        return bool(len(self.keepalived_conns) < self.max_keepalived)

    def _count_request(self) -> None:
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception) -> None:
        if isinstance(exc, blocking.WouldBlock):
            self._would_block = True  # nothing was written: served again on a pool thread
            return
        super().handle_error(req, client, addr, exc)
