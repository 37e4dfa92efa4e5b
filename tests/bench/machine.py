"""What the numbers were measured on: they mean little without it."""

from __future__ import annotations

import os
import platform
import shutil
import ssl
import subprocess
from importlib import metadata
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            kib = int(meminfo.readline().split()[1])
        return round(kib / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        return 0.0


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def wrk_version() -> str:
    """`wrk -v` prints its version on the first line (and exits 1)."""
    if shutil.which("wrk") is None:
        return "not installed"
    done = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    first = (done.stdout or done.stderr).splitlines()
    return first[0].split(" [")[0] if first else "unknown"


def short(described: dict[str, Any]) -> str:
    """`2 CPUs (AMD EPYC), 23.5 GiB`: what tells one machine's figures from another's."""
    return (
        f"{described.get('nproc')} CPUs ({described.get('cpu_model')}), "
        f"{described.get('memory_gib')} GiB"
    )


def describe() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "gunicorn": _version("gunicorn"),
        "flask": _version("flask"),
        "cel_python": _version("cel-python"),
        "ruamel_yaml": _version("ruamel.yaml"),
        "openssl": ssl.OPENSSL_VERSION,
        "wrk": wrk_version(),
    }
