"""Downloads by URL into a cache keyed on the content's sha256, verified before use."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

ATTEMPTS = 3


class FetchError(Exception):
    """A download failed or its content does not match the lock."""


def _download(url: str, target: Path) -> None:
    last: Exception | None = None
    for _ in range(ATTEMPTS):
        try:
            with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as out:
                shutil.copyfileobj(response, out)
            return
        except OSError as error:
            last = error
    raise FetchError(f"{url}: {last}")


def fetch(url: str, sha256: str | None, downloads: Path) -> Path:
    """The file at `url`, from the cache when its sha256 is known and already there."""
    downloads.mkdir(parents=True, exist_ok=True)
    name = url.rsplit("/", 1)[-1]
    if sha256 and (cached := downloads / f"{sha256}-{name}").exists():
        return cached
    with tempfile.NamedTemporaryFile(dir=downloads, delete=False) as tmp:
        partial = Path(tmp.name)
    try:
        _download(url, partial)
        actual = hashlib.sha256(partial.read_bytes()).hexdigest()
        if sha256 and actual != sha256:
            raise FetchError(
                f"{url}: sha256 {actual}, the lock says {sha256} (the file changed upstream; "
                "run `image/build.sh lock` and review the diff)"
            )
        final = downloads / f"{actual}-{name}"
        os.replace(partial, final)
        return final
    finally:
        partial.unlink(missing_ok=True)
