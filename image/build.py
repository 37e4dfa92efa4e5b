"""Builds dragate's container image without Docker or a base image, cached by input hash.

    python3 image/build.py [build]     build (or reuse) the image; last stdout line: its dir
    python3 image/build.py print-dir   the dir for the current inputs, without building
    python3 image/build.py rootfs DIR  only the root filesystem, into DIR (the Dockerfile)
    python3 image/build.py lock        refresh image/*.lock from Debian and PyPI

The dir holds `oci/` (an OCI image layout: push it with skopeo, crane or oras), `rootfs/`
(the same files unpacked: what the tests chroot into) and `image.json` (digest, sizes).
It is ${DRAGATE_IMAGE_DIR:-~/.cache/dragate/image}/<hash of every input>, so an unchanged
commit never rebuilds. Needs root (chroot), python3 with pip, dpkg-deb, and network access
to deb.debian.org and PyPI on a cold build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import lock
import oci
from rootfs import VENV, build_rootfs

IMAGE = Path(__file__).resolve().parent
REPO = IMAGE.parent
CACHE = Path(os.environ.get("DRAGATE_IMAGE_DIR") or Path.home() / ".cache/dragate/image")
DOWNLOADS = CACHE / "downloads"
SOURCE = "https://github.com/dragate/dragate"
RUNTIME: dict[str, object] = {
    "User": "65532:65532",
    "Entrypoint": [f"{VENV}/bin/dragate"],
    "Cmd": ["serve"],
    "WorkingDir": "/",
    "ExposedPorts": {"8443/tcp": {}},
    "Env": [
        f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG=C.UTF-8",
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTHONUNBUFFERED=1",
        # The offline ledger and generated certificates go to the writable /tmp emptyDir.
        "XDG_STATE_HOME=/tmp/state",
    ],
}


def inputs() -> list[Path]:
    """Every file whose bytes can change the image."""
    files = [p for p in sorted(IMAGE.iterdir()) if p.suffix in (".py", ".lock", ".sh")]
    files += [REPO / "pyproject.toml", REPO / "README.md"]
    files += sorted(p for p in (REPO / "webhook").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts)  # fmt: skip
    return files


def input_hash() -> str:
    digest = hashlib.sha256()
    for path in inputs():
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def tree_size(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def check_lock_covers_dependencies() -> None:
    """A dependency added to pyproject.toml but not locked would fail deep inside pip."""

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    lines = (IMAGE / "requirements.lock").read_text().splitlines()
    locked = {norm(line.split("==")[0]) for line in lines if line and not line.startswith("#")}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d: norm(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in project}
    missing = [d for d, name in names.items() if name not in locked]
    if missing:
        raise SystemExit(f"image/requirements.lock lacks {missing} from pyproject.toml: "
                         "run `image/build.sh lock` and commit the locks")  # fmt: skip


def build(target: Path) -> None:
    check_lock_covers_dependencies()
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as tmp:
        work = Path(tmp)
        root = work / "out/rootfs"
        root.mkdir(parents=True)
        epoch = build_rootfs(REPO, IMAGE, root, DOWNLOADS, work)
        labels = {"org.opencontainers.image.title": "dragate",
                  "org.opencontainers.image.version": version(),
                  "org.opencontainers.image.source": SOURCE,
                  "org.opencontainers.image.licenses": "Apache-2.0"}  # fmt: skip
        digest = oci.pack(
            root, work / "out/oci", epoch, ref=version(), labels=labels, runtime=RUNTIME
        )
        layer = max((work / "out/oci/blobs/sha256").iterdir(), key=lambda p: p.stat().st_size)
        facts = {"digest": digest, "ref": version(), "source_date_epoch": epoch,
                 "compressed_bytes": layer.stat().st_size, "rootfs_bytes": tree_size(root),
                 "build_seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        (work / "out/image.json").write_text(json.dumps(facts, indent=2) + "\n")
        if input_hash() != target.name:
            raise SystemExit("image/build.py: the sources changed during the build; run it again")
        if target.exists():  # another build of the same inputs won
            return
        os.replace(work / "out", target)
    print(f"image {digest} built in {facts['build_seconds']} s", file=sys.stderr)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "build"
    target = CACHE / input_hash()
    if command == "print-dir":
        print(target)
    elif command == "build":
        if not (target / "image.json").exists():
            build(target)
        print(target)
    elif command == "rootfs" and len(argv) == 2:
        with tempfile.TemporaryDirectory() as work:
            Path(argv[1]).mkdir(parents=True)
            build_rootfs(REPO, IMAGE, Path(argv[1]), DOWNLOADS, Path(work))
    elif command == "lock":
        lock.main(DOWNLOADS)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
