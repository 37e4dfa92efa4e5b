"""The Go CEL oracle (tests/fidelity/cel/oracle): one per Kubernetes minor, asked in one batch.

`DRAGATE_CELORACLE_1_35` (`_1_36`, `_1_37`) names a minor's built binary, and
`DRAGATE_CELORACLE` the newest's (tests/run.sh sets them all); otherwise the build script is
run, which is a no-op when that minor's pinned binary is already in the cache.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from webhook.types.kubeversions import NEWEST, SUPPORTED

ORACLE_DIR = Path(__file__).parent / "oracle"
MINORS = SUPPORTED
"""Every minor dragate targets has its oracle."""


def _given(minor: str) -> str | None:
    names = [f"DRAGATE_CELORACLE_{minor.replace('.', '_')}"]
    if minor == NEWEST:
        names.append("DRAGATE_CELORACLE")
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def oracle_binary(minor: str = NEWEST) -> Path:
    """A minor's oracle, building it (minutes, once per pin) when it is not cached yet."""
    given = _given(minor)
    if given and Path(given).is_file():
        return Path(given)
    built = subprocess.run(
        ["bash", str(ORACLE_DIR / "build.sh"), minor], check=True, capture_output=True, text=True
    )
    return Path(built.stdout.strip().splitlines()[-1])


def module_dirs(binary: Path) -> dict[str, Path]:
    """Module path -> its directory in the Go module cache (from the build's sources.json)."""
    text = (binary.parent / "sources.json").read_text()
    decoder, found, at = json.JSONDecoder(), {}, 0
    while at < len(text.rstrip()):
        module, end = decoder.raw_decode(text, at)
        found[module["Path"]] = Path(module["Dir"])
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    return found


def ask(binary: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The oracle's answer for every request, in order (one process for the whole batch)."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run(
        [str(binary)], input=lines, capture_output=True, text=True, check=True, timeout=600
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(requests), done.stderr[-2000:]
    return answers


def extract(binary: Path, files: list[Path]) -> list[dict[str, Any]]:
    """The CEL expression literals of upstream Go test files: {"file", "line", "expr"}."""
    done = subprocess.run(
        [str(binary), "extract", *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]
