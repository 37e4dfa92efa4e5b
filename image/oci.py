"""Packs a root filesystem as a one-layer OCI image layout, byte for byte reproducible.

Entries are sorted, owned by root, timestamps clamped to SOURCE_DATE_EPOCH, gzip without a
name or time; the config carries no build host, date or random id. Same inputs, same digest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from datetime import UTC, datetime
from pathlib import Path

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def _entries(root: Path) -> list[Path]:
    paths = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        base = Path(directory)
        paths.extend(base / name for name in sorted([*dirs, *files]))
    return sorted(paths, key=lambda p: p.relative_to(root).as_posix())


def write_layer_tar(root: Path, out: io.BufferedIOBase, epoch: int) -> None:
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _entries(root):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.mtime = min(int(info.mtime), epoch)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.name in ("home/nonroot",):
                info.uid = info.gid = 65532
            if info.isreg():
                with path.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)


class _Hashing(io.RawIOBase):
    """A write-through file that hashes and counts what passes (the uncompressed diff id)."""

    def __init__(self, inner: io.BufferedIOBase | gzip.GzipFile) -> None:
        self.inner, self.sha, self.size = inner, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sha.update(data)
        self.size += len(data)
        self.inner.write(data)
        return len(data)


def _blob(layout: Path, data: bytes, media_type: str) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs/sha256" / digest).write_bytes(data)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _config(diff_id: str, epoch: int, labels: dict[str, str], runtime: dict[str, object]) -> bytes:
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = {
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {**runtime, "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "image/build.sh"}],
    }  # fmt: skip
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


def pack(root: Path, layout: Path, epoch: int, *, ref: str,
         labels: dict[str, str], runtime: dict[str, object]) -> str:  # fmt: skip
    """Writes the OCI layout; returns the manifest digest (the image's identity)."""
    (layout / "blobs/sha256").mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    compressed = layout / "layer.tmp"
    with (
        compressed.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz,
    ):
        hashing = _Hashing(gz)
        write_layer_tar(root, hashing, epoch)  # type: ignore[arg-type]
    layer = _blob(layout, compressed.read_bytes(), LAYER_TYPE)
    compressed.unlink()
    config = _blob(layout, _config(f"sha256:{hashing.sha.hexdigest()}", epoch, labels, runtime),
                   CONFIG_TYPE)  # fmt: skip
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "config": config,
                "layers": [layer]}  # fmt: skip
    manifest_blob = _blob(layout, json.dumps(manifest, separators=(",", ":")).encode(),
                          MANIFEST_TYPE)  # fmt: skip
    manifest_blob["annotations"] = {"org.opencontainers.image.ref.name": ref}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_blob]}  # fmt: skip
    (layout / "index.json").write_text(json.dumps(index, separators=(",", ":")))
    return str(manifest_blob["digest"])
