"""Regenerates the image's lock files from the current Debian archive and PyPI.

Run by a maintainer (`image/build.sh lock`), never by a build: a build reads the locks only,
so an image is a function of a commit. The Python pins follow the versions installed in the
running environment (the ones the test suite just passed with) wherever they satisfy
pyproject.toml, so the image ships what was tested.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from fetch import fetch

IMAGE = Path(__file__).resolve().parent
REPO = IMAGE.parent
DEBIAN_LOCK = IMAGE / "debian.lock"
PYTHON_LOCK = IMAGE / "requirements.lock"
BUILD_LOCK = IMAGE / "build-requirements.lock"
# The runtime: Debian's Python and what its C extensions and wheels link against.
# base-files gives /etc/os-release, which SBOM and CVE scanners need to name the distro.
DEBIAN_PACKAGES = ("base-files", "python3.11-minimal", "libpython3.11-stdlib", "libstdc++6",
                   "netbase")  # fmt: skip
BUILD_TOOLS = ("pip", "setuptools")
TARGET = ["--python-version", "3.11", "--implementation", "cp",
          "--abi", "cp311", "--abi", "abi3", "--abi", "none"]  # fmt: skip
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in (36, 35, 34, 31, 28, 27, 26, 24, 17, 12, 5)]
PRINT_URIS = re.compile(r"^'(?P<url>[^']+)' (?P<file>\S+) (?P<size>\d+)")


def debian_uris() -> list[str]:
    """apt's own resolver on an empty package database: the closure of DEBIAN_PACKAGES."""
    with tempfile.TemporaryDirectory() as empty:
        command = ["apt-get", "-qq", "-o", "Dir::State::status=/dev/null",
                   "-o", f"Dir::Cache::archives={empty}", "-o", "APT::Install-Recommends=false",
                   "install", "--print-uris", "-y", *DEBIAN_PACKAGES]  # fmt: skip
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return sorted(m["url"] for line in output.splitlines() if (m := PRINT_URIS.match(line)))


def lock_debian(downloads: Path) -> None:
    lines = ["# Debian bookworm packages of the image: url sha256 (`image/build.sh lock`)",
             f"# source-date-epoch {int(time.time())}"]  # fmt: skip
    for plain in debian_uris():
        url = plain.replace("http://", "https://", 1)
        digest = hashlib.sha256(fetch(url, None, downloads).read_bytes()).hexdigest()
        lines.append(f"{url} {digest}")
    DEBIAN_LOCK.write_text("\n".join(lines) + "\n")


def installed_versions() -> list[str]:
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                            check=True, capture_output=True, text=True).stdout  # fmt: skip
    return [line for line in freeze.splitlines() if "==" in line]


def resolve(requirements: list[str], constraints: list[str]) -> list[dict[str, str]]:
    """pip's resolver for the image's Python and platform, wheels only; nothing installed."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs, cons, report = Path(tmp, "r.txt"), Path(tmp, "c.txt"), Path(tmp, "report.json")
        reqs.write_text("\n".join(requirements) + "\n")
        cons.write_text("\n".join(constraints) + "\n")
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run",
                        "--ignore-installed", "--only-binary=:all:", *platforms, *TARGET,
                        "--target", str(Path(tmp, "t")), "--report", str(report),
                        "-r", str(reqs), "-c", str(cons)], check=True)  # fmt: skip
        installs = json.loads(report.read_text())["install"]
    return [{"name": i["metadata"]["name"], "version": i["metadata"]["version"],
             "url": i["download_info"]["url"],
             "sha256": i["download_info"]["archive_info"]["hashes"]["sha256"]}
            for i in installs]  # fmt: skip


def write_python_lock(path: Path, title: str, pins: list[dict[str, str]]) -> None:
    lines = [
        f"# {title}",
        "# One wheel per line, usable as `pip install --require-hashes -r`;",
        "# the comment is where image/build.sh fetches it. `image/build.sh lock` rewrites it.",
    ]
    for pin in sorted(pins, key=lambda p: p["name"].lower()):
        pinned = f"{pin['name']}=={pin['version']} --hash=sha256:{pin['sha256']}"
        lines.append(f"{pinned}  # {pin['url']}")
    path.write_text("\n".join(lines) + "\n")


def lock_python() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    installed = installed_versions()
    runtime = resolve(project["project"]["dependencies"], installed)
    write_python_lock(PYTHON_LOCK, "Runtime dependencies of dragate in the image", runtime)
    build = resolve([*project["build-system"]["requires"], "pip"], [])
    build = [pin for pin in build if pin["name"].lower() in BUILD_TOOLS]
    write_python_lock(BUILD_LOCK, "Build tools: pip installs, setuptools builds the wheel", build)


def main(downloads: Path) -> None:
    lock_debian(downloads)
    lock_python()
