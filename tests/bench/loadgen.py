"""Load generators: wrk (keep-alive, TLS, Lua posts the body) or a Python closed loop.

Both hold `connections` keep-alive connections, each sending the next request as soon as the
previous answer arrives (closed loop), and report requests/s and latency percentiles in
microseconds with the same keys. wrk is used when installed (`apt-get install wrk`); the
Python client is the fallback and is itself limited by the GIL beyond a few connections.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from timing import summarize

LUA = r"""
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  io.write("BENCH_JSON ", string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "errors": %d, "non_2xx": %d, '
    .. '"min_us": %.1f, "p50_us": %.1f, "p90_us": %.1f, "p99_us": %.1f, "max_us": %.1f, '
    .. '"mean_us": %.1f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.timeout, e.status,
    latency.min, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
"""


def have_wrk() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(url: str, body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    """One wrk run (one thread: the machine has few cores and the server needs them)."""
    with tempfile.TemporaryDirectory() as tmp:
        script, body_file = Path(tmp, "post.lua"), Path(tmp, "body.json")
        script.write_text(LUA)
        body_file.write_bytes(body)
        command = [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "BENCH_BODY": str(body_file)},
        )
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    result: dict[str, Any] = json.loads(line.removeprefix("BENCH_JSON "))
    result["rps"] = round(result["requests"] / (result["duration_us"] / 1e6), 1)
    result["client"] = "wrk"
    return result


def _connection(url: str) -> http.client.HTTPSConnection:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    host, _, port = url.removeprefix("https://").split("/")[0].partition(":")
    return http.client.HTTPSConnection(host, int(port), context=context, timeout=10)


def _loop(url: str, body: bytes, until: float, samples: list[float], errors: list[int]) -> None:
    """Requests until `until`, and always at least one: a machine too loaded to finish one
    inside the window still yields a (slow) sample rather than an empty curve."""
    path = "/" + url.removeprefix("https://").partition("/")[2]
    conn = _connection(url)
    headers = {"Content-Type": "application/json"}
    try:
        first = True
        while first or time.perf_counter() < until:
            first = False
            started = time.perf_counter_ns()
            conn.request("POST", path, body, headers)
            reply = conn.getresponse()
            reply.read()
            samples.append((time.perf_counter_ns() - started) / 1000)
            if reply.status != 200:
                errors.append(reply.status)
    finally:
        conn.close()


def run_python(url: str, body: bytes, connections: int, seconds: float) -> dict[str, Any]:
    """The fallback: one thread per keep-alive connection, closed loop."""
    samples: list[float] = []
    errors: list[int] = []
    _loop(url, body, time.perf_counter() + min(0.2, seconds / 5), [], [])  # warm-up
    started = time.perf_counter()
    until = started + seconds
    threads = [
        threading.Thread(target=_loop, args=(url, body, until, samples, errors))
        for _ in range(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    result: dict[str, Any] = {"requests": len(samples), "errors": 0, "non_2xx": len(errors)}
    result.update(summarize(samples))
    result["rps"] = round(len(samples) / elapsed, 1)
    result["client"] = "python"
    return result


def load(
    url: str, body: bytes, connections: int, seconds: float, client: str = "auto"
) -> dict[str, Any]:
    """Closed-loop load with `connections` keep-alive connections for `seconds`."""
    use_wrk = client == "wrk" or (client == "auto" and have_wrk())
    return (run_wrk if use_wrk else run_python)(url, body, connections, seconds)
