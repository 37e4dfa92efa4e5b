"""The image's root filesystem: Debian packages, a venv with dragate, compiled bytecode.

Everything comes from the lock files (verified by sha256); the image's own Python, run in a
chroot, creates the venv, installs the wheels (offline) and compiles the bytecode, so paths
and the interpreter are the ones the container will see.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fetch import fetch

VENV = "/opt/dragate"
PYTHON = "/usr/bin/python3.11"
UID = 65532
# Only what a running server never reads: manuals, changelogs, lintian overrides.
PRUNE = ("usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale")
SHELLS = ("bin/sh", "bin/bash", "bin/dash", "usr/bin/sh", "usr/bin/bash", "usr/bin/dash")
PASSWD = (
    f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"nonroot:x:{UID}:{UID}:nonroot:/home/nonroot:/usr/sbin/nologin\n"
)
GROUP = f"root:x:0:\nnonroot:x:{UID}:\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\nservices: files\nprotocols: files\n"


def read_lock(path: Path) -> list[tuple[str, str]]:
    """(url, sha256) pairs of a lock file, either format (debian.lock or requirements)."""
    pins = []
    for line in path.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if "--hash=sha256:" in line:
            digest = line.split("--hash=sha256:", 1)[1].split()[0]
            pins.append((line.rsplit("# ", 1)[1].strip(), digest))
        else:
            url, digest = line.split()
            pins.append((url, digest))
    return pins


def source_date_epoch(debian_lock: Path) -> int:
    found = re.search(r"^# source-date-epoch (\d+)$", debian_lock.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"{debian_lock}: no '# source-date-epoch N' line")
    return int(found[1])


def control_paragraph(deb: Path) -> str:
    """The package's control file as a dpkg status entry (what SBOM scanners read)."""
    fields = subprocess.run(["dpkg-deb", "--field", str(deb)], check=True,
                            capture_output=True, text=True).stdout.rstrip("\n")  # fmt: skip
    first, rest = fields.split("\n", 1)
    return f"{first}\nStatus: install ok installed\n{rest}\n"


def install_debs(root: Path, debs: list[Path]) -> None:
    paragraphs = {}
    for deb in debs:
        subprocess.run(["dpkg-deb", "--extract", str(deb), str(root)], check=True)
        paragraph = control_paragraph(deb)
        paragraphs[paragraph.split("\n", 1)[0]] = paragraph
    status = root / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text("\n".join(paragraphs[name] for name in sorted(paragraphs)))


def prune(root: Path) -> None:
    for relative in PRUNE:
        shutil.rmtree(root / relative, ignore_errors=True)
    for changelog in sorted((root / "usr/share/doc").glob("*/changelog*")):
        changelog.unlink(missing_ok=True)
    shells = [s for s in SHELLS if (root / s).exists() or (root / s).is_symlink()]
    if shells:
        raise SystemExit(f"the root filesystem has a shell: {shells}")


def write_etc(root: Path) -> None:
    (root / "etc/passwd").write_text(PASSWD)
    (root / "etc/group").write_text(GROUP)
    (root / "etc/nsswitch.conf").write_text(NSSWITCH)
    # Mount points of the chart's volumes exist in the image: the root is read-only.
    for directory, mode in (
        ("tmp", 0o1777),
        ("home/nonroot", 0o755),
        ("dev/shm", 0o1777),
        ("proc", 0o555),
        ("sys", 0o555),
        ("etc/dragate/tls", 0o755),
        ("etc/dragate/policies", 0o755),
        ("etc/dragate/git", 0o755),
    ):
        (root / directory).mkdir(parents=True, exist_ok=True)
        (root / directory).chmod(mode)
    os.chown(root / "home/nonroot", UID, UID)


def in_chroot(root: Path, *argv: str, epoch: int) -> None:
    env = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "SOURCE_DATE_EPOCH": str(epoch), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0"}  # fmt: skip
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    subprocess.run([chroot, str(root), *argv], check=True, env=env)


def build_dragate_wheel(repo: Path, wheelhouse: Path, work: Path, epoch: int) -> None:
    """setuptools from the lock builds the wheel (offline) from a copy of the sources."""
    source = work / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(repo / "webhook", source / "webhook", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PIP_CONFIG_FILE": os.devnull}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--find-links", str(wheelhouse), "--wheel-dir", str(wheelhouse),
                    str(source)], check=True, env=env)  # fmt: skip


def install_python(root: Path, wheelhouse: Path, requirements: Path, epoch: int) -> None:
    """venv + every locked wheel + dragate, by the image's Python, offline; then bytecode."""
    shutil.copytree(wheelhouse, root / "tmp/wheels")
    pins = [line.split()[0] for line in requirements.read_text().splitlines()
            if line and not line.startswith("#")]  # fmt: skip
    (root / "tmp/wheels/pins.txt").write_text("\n".join([*pins, "dragate"]) + "\n")
    pip = next(p.name for p in wheelhouse.glob("*.whl") if p.name.startswith("pip-"))
    in_chroot(root, PYTHON, "-m", "venv", "--without-pip", VENV, epoch=epoch)
    in_chroot(root, f"{VENV}/bin/python", f"/tmp/wheels/{pip}/pip", "install", "-q",
              "--no-index", "--find-links", "/tmp/wheels", "--no-compile", "--no-cache-dir",
              "--disable-pip-version-check", "-r", "/tmp/wheels/pins.txt", epoch=epoch)  # fmt: skip
    shutil.rmtree(root / "tmp/wheels")
    # unchecked-hash: the files never change in an image, so no stat or hash at import.
    in_chroot(root, PYTHON, "-m", "compileall", "-q", "-f", "-j", "1", "--invalidation-mode",
              "unchecked-hash", "/usr/lib/python3.11", f"{VENV}/lib/python3.11/site-packages",
              epoch=epoch)  # fmt: skip


def build_rootfs(repo: Path, image_dir: Path, root: Path, downloads: Path, work: Path) -> int:
    """Fills `root`; returns the SOURCE_DATE_EPOCH the layer's timestamps are clamped to."""
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or source_date_epoch(image_dir / "debian.lock"))
    debs = [fetch(url, digest, downloads) for url, digest in read_lock(image_dir / "debian.lock")]
    install_debs(root, debs)
    prune(root)
    write_etc(root)
    wheelhouse = work / "wheels"
    wheelhouse.mkdir()
    for lock in ("requirements.lock", "build-requirements.lock"):
        for url, digest in read_lock(image_dir / lock):
            wheel = fetch(url, digest, downloads)
            shutil.copy(wheel, wheelhouse / url.rsplit("/", 1)[-1])
    build_dragate_wheel(repo, wheelhouse, work, epoch)
    for tool in ("setuptools-",):
        for wheel in wheelhouse.glob(f"{tool}*.whl"):
            wheel.unlink()
    install_python(root, wheelhouse, image_dir / "requirements.lock", epoch)
    return epoch
