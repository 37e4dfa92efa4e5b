"""Instructions per review, counted by callgrind: the profile behind the HTTP figures.

The WSGI app (`ReviewRoutes` over the real pipeline, offline state and a SQLite ledger, the
benchmark's policies and Pods), `pipeline.review` alone and the no-op app are each called
in-process, without gunicorn or TLS (the same for every target), /validate then /mutate. Each
measured call runs inside `itertools.starmap`, so callgrind, told to count only there and to
write a file after each call, gives one count per review; imports, policy loading and a
warm-up of 200 calls per target are not counted:

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=starmap_next \\
        --dump-after=starmap_next --callgrind-out-file=/tmp/ir.out \\
        "$(python -c 'import sys; print(sys.executable)')" tests/bench/instructions.py 20
    python tests/bench/instructions.py --summarize /tmp/ir.out 20 [--json]

(Call the interpreter itself, not a pyenv shim: valgrind would count the shell.) Under
callgrind the start-up takes minutes; the counts do not depend on the machine's load.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGETS = ("route", "pipeline", "noop")
PATHS = ("/validate", "/mutate")
Call = Callable[[int], Any]


def _wsgi(app: Callable[..., Iterable[bytes]], path: str, body: bytes) -> Call:
    def call(_: int) -> bytes:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "QUERY_STRING": "timeout=10s",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "SERVER_NAME": "bench",
            "SERVER_PORT": "443",
            "wsgi.url_scheme": "https",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        sent = app(environ, lambda status, headers: None)
        reply = b"".join(sent)
        getattr(sent, "close", lambda: None)()  # what the server runs after sending it
        return reply

    return call


def _reviewing(parsed: Any, context: Any, mutate: bool) -> Call:
    from webhook import pipeline

    def call(_: int) -> Any:
        return pipeline.review(parsed, context, mutate=mutate)

    return call


def targets() -> list[tuple[str, Call]]:
    import noop_server
    import workload

    from webhook import pipeline
    from webhook.admission import jsonlog
    from webhook.admission.app import create_app
    from webhook.admission.config import AdmissionOptions
    from webhook.admission.reload import PolicyHolder
    from webhook.admission.review import parse_review
    from webhook.assembly import offline_context
    from webhook.kube.snapshot import load_state
    from webhook.ledger.sqlite import SqliteLedger
    from webhook.policy.loading import load_policies

    tmp = Path(tempfile.mkdtemp(prefix="dragate-instructions-"))
    policies = workload.write_policies(tmp / "policies")
    state = workload.write_state(tmp / "state.json")
    jsonlog.configure("info")  # a log line per review, as served; written to /dev/null
    handler = logging.getLogger("dragate").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115
    holder = PolicyHolder([str(policies)], load_policies)
    ledger = SqliteLedger(str(tmp / "ledger.db"))
    context = offline_context(holder.get, load_state(str(state)), ledger)
    app = create_app(context, holder, AdmissionOptions(), pipeline.review)
    found, noop = [], noop_server.noop_app()
    for path, body in workload.review_bodies().items():
        parsed = parse_review(body, "application/json")
        mutate = path == "/mutate"
        found += [
            (f"route{path}", _wsgi(app.wsgi_app, path, body)),
            (f"pipeline{path}", _reviewing(parsed, context, mutate)),
            (f"noop{path}", _wsgi(noop.wsgi_app, path, body)),
        ]
    return found


def measure(count: int) -> None:
    for name, call in targets():
        for i in range(200):
            call(i)
        print(f"measuring {name}", file=sys.stderr, flush=True)
        list(itertools.starmap(call, ((i,) for i in range(count))))


def summarize(prefix: str, count: int) -> dict[str, int]:
    """Median instructions per call of each target, from callgrind's numbered dumps."""
    dumps = sorted(
        Path(prefix).parent.glob(Path(prefix).name + ".*"), key=lambda p: int(p.suffix[1:])
    )
    totals = [
        int(m.group(1))
        if (m := re.search(r"^(?:summary|totals): (\d+)", p.read_text(), re.M))
        else 0
        for p in dumps
    ]
    names = [f"{t}{p}" for p in PATHS for t in TARGETS]
    per_target = count + 1  # the call that ends each starmap is dumped too
    return {
        name: sorted(totals[i * per_target : i * per_target + count])[count // 2]
        for i, name in enumerate(names)
    }


def main() -> None:
    if sys.argv[1:2] == ["--summarize"]:
        medians = summarize(sys.argv[2], int(sys.argv[3]))
        if sys.argv[4:5] == ["--json"]:  # for `run.py --profile`
            print(json.dumps({"instructions": medians}, indent=2))
            return
        for name, median in medians.items():
            print(f"{name:20s} {median:>12,d} instructions per review")
        return
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 20)


if __name__ == "__main__":
    main()
