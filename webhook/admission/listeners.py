"""A listening socket per gunicorn worker (SO_REUSEPORT), so the kernel spreads connections.

With one listening socket shared by every worker, connections opened at once mostly go to
whichever worker wakes first (the accept race): keep-alive connections opened together can all
land on one worker, so one GIL serves them all while the other worker idles, and throughput at
many connections falls below that at a few. With SO_REUSEPORT each worker has its own socket
bound to the same port and the kernel picks the socket for each new connection from a hash of
its addresses, whoever is busy: connections spread over the workers, never by who was
scheduled first.

gunicorn's `reuse_port` setting does the first half (gunicorn >= 27: the master opens no shared
socket and the arbiter binds one per worker right after fork, so a booting worker's socket
queues connections until its app has loaded, as the shared socket did). What this worker adds:
- a stopping worker closes its socket as soon as another worker listens on the port, accepting
  what is queued until then (gthread would keep it open through the whole graceful timeout,
  collecting connections that are reset when it exits): the kernel then sends new connections
  to the other workers. It waits for another listener (HANDOVER_SECONDS at most) because on a
  HUP the arbiter stops the old workers right after forking the new ones, before these have
  bound: closing at once would refuse the connections arriving in that gap. What remains: a
  connection arriving in the microseconds between the last accept and the close is reset (Linux
  drops a closed listener's queue unless `net.ipv4.tcp_migrate_req` is 1), and the API server
  does not retry a webhook POST; with one shared socket the queue outlives any one worker. A
  worker killed outright (the 30 s timeout, a crash) loses its queue the same way;
- the listeners are not inherited by subprocesses (gunicorn marks them inheritable): a child
  holding one would take a share of the connections and never accept them.
`check_address_free` runs in the master: with no shared socket there, a port taken by another
process would otherwise only show as workers failing to bind, and a second server with
SO_REUSEPORT on the same port would silently share its connections.

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.arbiter.Arbiter.spawn_worker`: with `reuse_port`, binds `worker.sockets` per worker
  after fork and the master has no listener.
- `gunicorn.workers.gthread.ThreadWorker.set_accept_enabled(enabled)`: called with False once
  `alive` is False, when the graceful stop begins.
- `gunicorn.workers.base.Worker.sockets`: the worker's listeners (BaseSocket: `.sock`, `close()`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import time
from typing import Any

from gunicorn.workers import gthread

HANDOVER_SECONDS = 1.0  # a stopping worker waits this long, at most, for another listener
LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp


def check_address_free(host: str, port: int) -> None:
    """Raise OSError (EADDRINUSE) when anything listens on (host, port) already, with or
    without SO_REUSEPORT: this probe does not set it, so it cannot share a listener's port.
    SO_REUSEADDR is set, as on the listeners: connections of a previous run still in
    TIME_WAIT (a container restarted in the same pod) do not count as taking the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


class ReusePortThreadWorker(gthread.ThreadWorker):  # type: ignore[misc]
    """gthread with its own SO_REUSEPORT listener, closed as soon as it stops accepting."""

    def init_process(self) -> None:
        for listener in self.sockets:
            listener.sock.set_inheritable(False)
        super().init_process()

    def set_accept_enabled(self, enabled: bool) -> None:
        stopping = not enabled and not self.alive and self._accepting
        super().set_accept_enabled(enabled)
        if stopping:
            self._drain_and_close()

    def _drain_and_close(self) -> None:
        """Once another worker listens (or HANDOVER_SECONDS passed), serve what the kernel
        queued on this worker's socket and leave the reuseport group."""
        deadline = time.monotonic() + HANDOVER_SECONDS
        for listener in self.sockets:
            with contextlib.suppress(OSError):
                while not _others_listen(listener) and time.monotonic() < deadline:
                    self._accept_queued(listener, wait=0.01)
                self._accept_queued(listener, wait=0)
            listener.close()

    def _accept_queued(self, listener: Any, wait: float) -> None:
        """Accept every connection waiting on the listener (waiting up to `wait` for one)."""
        while select.select([listener], [], [], wait)[0]:
            self.accept(listener)
            wait = 0


def _others_listen(listener: Any) -> bool:
    """Whether a socket other than `listener` listens on its port (Linux /proc; elsewhere,
    True: nothing to wait for)."""
    port, own = listener.getsockname()[1], os.fstat(listener.fileno()).st_ino
    tables = [t for t in ("/proc/net/tcp", "/proc/net/tcp6") if os.path.exists(t)]
    if not tables:
        return True
    for table in tables:
        with open(table, encoding="ascii") as rows:
            for row in itertools.islice(rows, 1, None):
                fields = row.split()
                local_port = int(fields[1].rpartition(":")[2], 16)
                if fields[3] == LISTEN_STATE and local_port == port and int(fields[9]) != own:
                    return True
    return False
