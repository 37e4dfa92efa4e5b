"""The container image, run the way the chart runs it (see container.py): uid 65532, read-only
root, only the chart's emptyDirs writable, its own network namespace, the server as PID 1.

Also what an image must hold for users and scanners: no shell, the OCI config the chart relies
on, dpkg status and Python dist-info for every locked package.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from builders import V1, claim, exact, request

from .container import ImageConfig, PodSpec
from .pod import REPO, Pod

pytestmark = pytest.mark.image

WRITE_CHECK = """
import errno, json, os, sys
result = {}
for directory in sys.argv[1:]:
    try:
        with open(os.path.join(directory, ".dragate-write-check"), "w") as f:
            f.write("x")
        os.unlink(os.path.join(directory, ".dragate-write-check"))
        result[directory] = "written"
    except OSError as error:
        result[directory] = errno.errorcode[error.errno]
print(json.dumps(result))
"""
WRITABLE = ("/tmp", "/dev/shm")
READ_ONLY = ("/", "/etc", "/home/nonroot", "/opt/dragate/bin",
             "/opt/dragate/lib/python3.11/site-packages/webhook", "/usr/lib/python3.11", "/var",
             "/etc/dragate/tls", "/etc/dragate/policies/..data")  # fmt: skip


def review(obj: dict[str, object]) -> dict[str, object]:
    """An AdmissionReview for a CREATE, as the apiserver sends it."""
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "e7f1c5a0-image-test", "operation": "CREATE", "dryRun": False,
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1",
                         "resource": "resourceclaims"},
            "namespace": metadata["namespace"], "name": metadata["name"], "object": obj,
            "oldObject": None,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        },
    }  # fmt: skip


def test_probes_answer_over_tls(pod: Pod) -> None:
    assert pod.get("/healthz")["status"] == 200
    assert pod.get("/readyz")["status"] == 200


def test_validate_denies_a_claim_over_the_per_claim_limit(pod: Pod) -> None:
    too_big = claim(request(exact(count=9), V1), name="nine-gpus", namespace="ml-research")
    answer = pod.request("POST", "/validate?timeout=3s", review(too_big))
    assert answer["status"] == 200, answer
    response = json.loads(answer["body"])["response"]
    assert response["uid"] == "e7f1c5a0-image-test"
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "8" in response["status"]["message"], response


def test_the_server_runs_as_65532_and_is_pid_1(pod: Pod) -> None:
    status = Path(f"/proc/{pod.pid}/status").read_text()
    assert re.search(r"^Uid:\s+65532\s+65532\s+65532\s+65532$", status, re.MULTILINE), status
    assert re.search(r"^NSpid:\s+\d+\s+1$", status, re.MULTILINE), status
    assert "/opt/dragate/bin/python" in Path(f"/proc/{pod.pid}/cmdline").read_text()


def test_only_the_empty_dirs_are_writable(pod: Pod) -> None:
    result = pod.run_inside("/opt/dragate/bin/python", "-c", WRITE_CHECK, *WRITABLE, *READ_ONLY)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert {d: outcome[d] for d in WRITABLE} == dict.fromkeys(WRITABLE, "written")
    assert {d: outcome[d] for d in READ_ONLY} == dict.fromkeys(READ_ONLY, "EROFS")


def test_the_pod_has_only_loopback(pod: Pod) -> None:
    links = Path(f"/proc/{pod.pid}/net/dev").read_text().splitlines()[2:]
    assert [line.split(":")[0].strip() for line in links] == ["lo"]


def test_sigterm_exits_zero(image_dir: Path, chart_pod: PodSpec,
                            volume_sources: dict[str, Path], tmp_path: Path) -> None:  # fmt: skip
    """Its own pod: the kubelet's SIGTERM (after preStop) must end in exit code 0."""
    own = Pod.start(image_dir, chart_pod, volume_sources, tmp_path)
    try:
        assert own.terminate() == 0, own.process.log_tail()
    finally:
        own.stop()


# --- the image itself -------------------------------------------------------------------


def test_config_is_what_the_chart_expects(image_dir: Path) -> None:
    config = ImageConfig.read(image_dir / "oci")
    assert config.user == "65532:65532"
    assert config.entrypoint == ["/opt/dragate/bin/dragate"] and config.cmd == ["serve"]
    assert config.env["PATH"].startswith("/opt/dragate/bin:")  # the chart's `command: [dragate]`
    assert config.env["PYTHONDONTWRITEBYTECODE"] == "1"


@pytest.mark.parametrize("shell", ["bin/sh", "bin/bash", "bin/dash", "usr/bin/sh", "bin/busybox"])
def test_there_is_no_shell(image_dir: Path, shell: str) -> None:
    path = image_dir / "rootfs" / shell
    assert not path.exists() and not path.is_symlink()


def locked_debs() -> list[str]:
    lines = (REPO / "image/debian.lock").read_text().splitlines()
    return [line.split()[0] for line in lines if line and not line.startswith("#")]


def test_dpkg_status_lists_every_locked_package(image_dir: Path) -> None:
    status = (image_dir / "rootfs/var/lib/dpkg/status").read_text()
    entries = {(m[1], m[2]) for m in re.finditer(r"^Package: (\S+)\n(?:.+\n)*?Version: (\S+)$",
                                                   status, re.MULTILINE)}  # fmt: skip
    without_epoch = {(package, version.split(":")[-1]) for package, version in entries}
    locked = {tuple(unquote(url.rsplit("/", 1)[1]).split("_")[:2]) for url in locked_debs()}
    assert without_epoch == locked


def test_python_dist_info_for_every_locked_wheel(image_dir: Path) -> None:
    site = image_dir / "rootfs/opt/dragate/lib/python3.11/site-packages"
    installed = {p.name.lower() for p in site.glob("*.dist-info")}
    lines = (REPO / "image/requirements.lock").read_text().splitlines()
    pins = [line.split()[0] for line in lines if line and not line.startswith("#")]
    for pin in [*pins, "dragate==0.1.0"]:
        name, version = pin.split("==")
        dist = f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info".lower()
        assert dist in installed, pin


def test_bytecode_is_precompiled_without_timestamps(image_dir: Path) -> None:
    """Read-only root: nothing can be compiled at run time, so everything is compiled now;
    unchecked-hash pycs (flags 0b01) never stat or hash the source at import."""
    root = image_dir / "rootfs"
    for source in ("opt/dragate/lib/python3.11/site-packages/webhook/cli/serve.py",
                   "usr/lib/python3.11/json/decoder.py"):  # fmt: skip
        path = root / source
        pyc = path.parent / "__pycache__" / f"{path.stem}.cpython-311.pyc"
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, (pyc, flags)


def test_versions_agree(image_dir: Path) -> None:
    """pyproject, the OCI ref, the Dockerfile label and the chart's appVersion (its default
    image tag) name one version, so `helm install` pulls what the build tagged."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    built = json.loads((image_dir / "image.json").read_text())["ref"]
    chart = yaml.safe_load((REPO / "charts/dragate/Chart.yaml").read_text())["appVersion"]
    label = re.search(r'org\.opencontainers\.image\.version="([^"]+)"',
                      (REPO / "Dockerfile").read_text())  # fmt: skip
    assert label is not None
    assert {project, built, chart, label[1]} == {project}


def test_umoci_unpacks_the_layout_to_the_same_tree(image_dir: Path, tmp_path: Path) -> None:
    """umoci, an independent OCI implementation, reads the layout: same files as rootfs/,
    and the runtime config the chart relies on (uid, gid, entrypoint)."""
    bundle = tmp_path / "bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{image_dir / 'oci'}:0.1.0", str(bundle)],
                   check=True, capture_output=True)  # fmt: skip
    process = json.loads((bundle / "config.json").read_text())["process"]
    assert process["user"] == {"uid": 65532, "gid": 65532}
    assert process["args"] == ["/opt/dragate/bin/dragate", "serve"]
    differences = subprocess.run(["diff", "-r", "--no-dereference", "-q", str(bundle / "rootfs"),
                                  str(image_dir / "rootfs")], capture_output=True, text=True,
                                 check=False)  # fmt: skip
    assert differences.returncode == 0, differences.stdout[-2000:]
