"""The krew archive of `kubectl dragate`: a zip of the `kubectl-dragate` launcher, built
byte for byte the same on every machine (stored, not compressed; fixed times and modes), so
the sha256 in dragate.yaml can be checked against the launcher in git.

    python3 plugins/krew/archive.py kubectl-dragate.zip   # the release asset
"""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHER = "kubectl-dragate"


def archive() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zipped:
        info = zipfile.ZipInfo(LAUNCHER, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = (0o100755 << 16) | 0x20  # a regular executable file
        info.create_system = 3  # unix, so the mode is honoured on extraction
        zipped.writestr(info, (HERE / LAUNCHER).read_bytes())
    return buffer.getvalue()


def sha256() -> str:
    return hashlib.sha256(archive()).hexdigest()


if __name__ == "__main__":
    Path(sys.argv[1]).write_bytes(archive())
    print(sha256())
