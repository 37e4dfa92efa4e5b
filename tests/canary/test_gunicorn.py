"""gunicorn's gthread internals that `GuardedThreadWorker` subclasses and calls."""

from __future__ import annotations

import inspect
import logging
import os
import socket

import pytest
from canary.canary_support import Internal, rows, subclasses, takes, verify


def _worker_attributes() -> None:
    """The attributes the guarded worker reads and updates, as ThreadWorker() sets them."""
    from gunicorn.config import Config
    from gunicorn.workers import gthread

    worker = gthread.ThreadWorker(0, os.getppid(), [], None, 30, Config(), logging.getLogger())
    try:
        missing = [a for a in ("nr_conns", "keepalived_conns", "poller", "alive", "cfg", "log",
                               "app") if not hasattr(worker, a)]  # fmt: skip
        assert not missing, f"ThreadWorker() sets no {missing}"
    finally:
        worker.tmp.close()


def _connection_shape() -> None:
    """TConn(cfg, sock, client, server) with the fields the event loop fills in."""
    from gunicorn.config import Config
    from gunicorn.workers import gthread

    left, right = socket.socketpair()
    with left, right:
        conn = gthread.TConn(Config(), left, ("192.0.2.1", 1), ("0.0.0.0", 8443))
        fields = {
            f: getattr(conn, f, "missing")
            for f in ("sock", "client", "parser", "initialized", "data_ready")
        }
        assert fields == {"sock": left, "client": ("192.0.2.1", 1), "parser": None,
                          "initialized": False, "data_ready": False}, fields  # fmt: skip
        assert callable(conn.close)


def _initialized_connection_kept() -> None:
    """TConn.init() leaves a connection the loop set up (parser built, initialized) alone."""
    from gunicorn.config import Config
    from gunicorn.workers import gthread

    left, right = socket.socketpair()
    with left, right:
        conn = gthread.TConn(Config(), left, ("192.0.2.1", 1), ("0.0.0.0", 8443))
        parser = object()
        conn.parser, conn.initialized = parser, True
        conn.init()
        assert conn.parser is parser, "init() replaced the parser of an initialized connection"


def _parser_unreads() -> None:
    """get_parser(cfg, sock, client).unreader.unread(bytes): the buffered request goes back."""
    from gunicorn import http
    from gunicorn.config import Config

    left, right = socket.socketpair()
    with left, right:
        parser = http.get_parser(Config(), left, ("192.0.2.1", 1))
        parser.unreader.unread(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        request = next(parser)
        assert request.method == "GET" and request.path == "/", (request.method, request.path)


def _thread_blocks_socket() -> None:
    """A pool thread switches the socket to blocking (where DeadlineSocket starts its clock),
    and an exception of the app reaches handle_error (where loopserving sees WouldBlock)."""
    from gunicorn.workers import gthread

    source = inspect.getsource(gthread.ThreadWorker.handle)
    assert "conn.sock.setblocking(True)" in source
    assert "self.handle_error(req, conn.sock, conn.client, e)" in source


def _method_queue_defers() -> None:
    """The worker's method queue runs a deferred callback on the loop's next turn."""
    from gunicorn.workers import gthread

    assert "self.method_queue = PollableMethodQueue()" in inspect.getsource(
        gthread.ThreadWorker.__init__
    )
    queue = gthread.PollableMethodQueue()
    queue.init()
    try:
        ran: list[int] = []
        queue.defer(ran.append, 1)
        queue.run_callbacks(None)
        assert ran == [1]
    finally:
        queue.close()


def _socket_in_environ() -> None:
    from gunicorn.http import wsgi

    assert '"gunicorn.socket"' in inspect.getsource(wsgi), "no gunicorn.socket in the environ"


def _parse_errors() -> None:
    from gunicorn.http import errors

    names = (
        "UnsupportedTransferCoding",
        "LimitRequestLine",
        "LimitRequestHeaders",
        "ExpectationFailed",
        "ForbiddenProxyRequest",
        "ConfigurationProblem",
        "ParseException",
        "InvalidResponseHeader",
        "InvalidResponseHeaderName",
    )
    missing = [n for n in names if not isinstance(getattr(errors, n, None), type)]
    assert not missing, f"gunicorn.http.errors has no {missing}"


def _request_counting() -> None:
    """What `handle_request` counts and decides keep-alive by, as ThreadWorker() sets it; the
    app as `Worker.load_wsgi` stores it."""
    from gunicorn.config import Config
    from gunicorn.workers import base, gthread

    worker = gthread.ThreadWorker(0, os.getppid(), [], None, 30, Config(), logging.getLogger())
    try:
        counts = {a: getattr(worker, a, None) for a in ("nr", "max_requests", "max_keepalived")}
        assert all(isinstance(v, int) for v in counts.values()), counts
    finally:
        worker.tmp.close()
    assert "self.wsgi = " in inspect.getsource(base.Worker.load_wsgi), "load_wsgi sets no wsgi"


def _request_limits() -> None:
    from gunicorn.config import Config

    config = Config()
    limits = (config.limit_request_line, config.limit_request_fields,
              config.limit_request_field_size)  # fmt: skip
    assert all(type(limit) is int and limit >= 0 for limit in limits), limits


def _server_software() -> None:
    import gunicorn

    assert f"gunicorn/{gunicorn.__version__}" == gunicorn.SERVER_SOFTWARE


def _config_properties() -> None:
    from gunicorn.config import Config

    config = Config()
    assert not config.is_ssl and config.suppress_ragged_eofs in (True, False)


def _listener_per_worker() -> None:
    """With reuse_port the master binds nothing and each worker gets its own sockets at fork."""
    from gunicorn.arbiter import Arbiter

    start, spawn = inspect.getsource(Arbiter.start), inspect.getsource(Arbiter.spawn_worker)
    assert "reuse_port" in start, "Arbiter.start binds a shared listener whatever reuse_port"
    assert "worker.sockets = sock.create_sockets(" in spawn, "workers get no listener of their own"


def _bind_checks_certfile_only_exists() -> None:
    """create_sockets(conf, log) tests certfile with os.path.exists and loads nothing from it;
    contexts come from conf.ssl_context (a directory as certfile is then enough)."""
    from gunicorn import sock

    source = inspect.getsource(sock.create_sockets)
    assert "os.path.exists(conf.certfile)" in source, "the certfile check changed"
    assert "load_cert_chain" not in source, "create_sockets loads the certificate itself"
    takes("gunicorn.sock.create_sockets", "conf", "log")()


def _stop_disables_accept() -> None:
    """The graceful stop begins with set_accept_enabled(False), after the loop sees alive False."""
    from gunicorn.workers import gthread

    run = inspect.getsource(gthread.ThreadWorker.run)
    loop_end = run.index("while self.alive:")
    assert "self.set_accept_enabled(False)" in run[loop_end:], "no accept switch-off at stop"
    takes(f"{GTHREAD}.ThreadWorker.set_accept_enabled", "self", "enabled")()


def _worker_sockets() -> None:
    """Worker(...).sockets is the listener list given; a listener is a BaseSocket."""
    from gunicorn import sock
    from gunicorn.config import Config
    from gunicorn.workers import gthread

    listeners: list[object] = []
    worker = gthread.ThreadWorker(
        0, os.getppid(), listeners, None, 30, Config(), logging.getLogger()
    )
    try:
        assert worker.sockets is listeners
    finally:
        worker.tmp.close()
    assert callable(sock.BaseSocket.close) and "self.sock = " in inspect.getsource(sock.BaseSocket)


GTHREAD = "gunicorn.workers.gthread"
INTERNALS = [
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker",
        subclasses(f"{GTHREAD}.ThreadWorker", "gunicorn.workers.base.Worker"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.nr_conns, keepalived_conns, poller, alive",
        _worker_attributes,
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.accept(listener)",
        takes(f"{GTHREAD}.ThreadWorker.accept", "self", "listener"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.on_client_socket_readable(conn, client)",
        takes(f"{GTHREAD}.ThreadWorker.on_client_socket_readable", "self", "conn", "client"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.murder_pending()",
        takes(f"{GTHREAD}.ThreadWorker.murder_pending", "self"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.handle_error(req, client, addr, exc)",
        takes(f"{GTHREAD}.ThreadWorker.handle_error", "self", "req", "client", "addr", "exc"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.finish_request(conn, fs)",
        takes(f"{GTHREAD}.ThreadWorker.finish_request", "self", "conn", "fs"),
    ),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.enqueue_req(conn)",
        takes(f"{GTHREAD}.ThreadWorker.enqueue_req", "self", "conn"),
    ),
    Internal("gunicorn", f"{GTHREAD}.ThreadWorker.handle(conn)", _thread_blocks_socket),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.method_queue.defer(callback, *args)",
        _method_queue_defers,
    ),
    Internal("gunicorn", f"{GTHREAD}.TConn(cfg, sock, client, server)", _connection_shape),
    Internal("gunicorn", f"{GTHREAD}.TConn.init", _initialized_connection_kept),
    Internal("gunicorn", "gunicorn.http.get_parser(cfg, sock, client)", _parser_unreads),
    Internal(
        "gunicorn", "gunicorn.sock.ssl_context(conf)", takes("gunicorn.sock.ssl_context", "conf")
    ),
    Internal("gunicorn", "gunicorn.http.errors", _parse_errors),
    Internal(
        "gunicorn",
        f"{GTHREAD}.ThreadWorker.wsgi, nr, max_requests, max_keepalived",
        _request_counting,
    ),
    Internal(
        "gunicorn",
        "gunicorn.config.Config.limit_request_line, limit_request_fields, limit_request_field_size",
        _request_limits,
    ),
    Internal("gunicorn", "gunicorn.SERVER_SOFTWARE", _server_software),
    Internal("gunicorn", "gunicorn.config.Config.is_ssl, suppress_ragged_eofs", _config_properties),
    Internal("gunicorn", "environ['gunicorn.socket']", _socket_in_environ),
    Internal("gunicorn", "gunicorn.arbiter.Arbiter.spawn_worker", _listener_per_worker),
    Internal(
        "gunicorn", "gunicorn.sock.create_sockets(conf, log)", _bind_checks_certfile_only_exists
    ),
    Internal(
        "gunicorn", f"{GTHREAD}.ThreadWorker.set_accept_enabled(enabled)", _stop_disables_accept
    ),
    Internal("gunicorn", "gunicorn.workers.base.Worker.sockets", _worker_sockets),
]


@pytest.mark.parametrize("internal", rows(INTERNALS))
def test_gunicorn_internal_still_there(internal: Internal) -> None:
    verify(internal)
