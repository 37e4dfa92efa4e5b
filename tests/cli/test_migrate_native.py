"""`migrate`, `lint` and `check` on Pods whose extended resources a DeviceClass maps (KEP-5004).

NVIDIA's own DRA driver demos (tests/cli/data/migrate/kep5004/README.md) keep a plain
`nvidia.com/gpu` for Kubernetes to map: under the default action Auto, `migrate` leaves such a
request alone when it knows the class (from `--state` or its inputs), says so, and reports no
leftover; `--rewrite-native` rewrites it anyway; `lint` does not call it a device-plugin
request; `check` charges it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main

DATA = Path(__file__).parent / "data" / "migrate" / "kep5004"
DEMOS = DATA / "NVIDIA+k8s-dra-driver-gpu" / "demo" / "specs" / "extended-resources"
STATE = DATA / "driver-classes.yaml"


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


CHECKS = [
    pytest.param([DEMOS / "mig-1g-12gb.yaml"], [], 0, "kept: a DeviceClass maps it",
                 id="class-in-the-same-file"),
    pytest.param([DATA / "mig-profile-name.yaml"], [], 0, "nvidia.com/mig-1g.12gb kept",
                 id="mig-profile-name"),
    pytest.param([DEMOS / "gpu-full.yaml"], ["--state", str(STATE)], 0, "kept: a DeviceClass",
                 id="class-from-state"),
    pytest.param([DEMOS / "gpu-full.yaml", DATA / "driver-classes.yaml"], [], 0,
                 "kept: a DeviceClass", id="class-in-another-input"),
    pytest.param([DEMOS / "gpu-full.yaml"], [], 1, "--write migrates it", id="no-class-known"),
    pytest.param([DEMOS / "mig-1g-12gb.yaml"], ["--rewrite-native"], 1, "-> claim",
                 id="rewrite-native-asked"),
]  # fmt: skip


@pytest.mark.parametrize(("files", "flags", "code", "said"), CHECKS)
def test_migrate_keeps_a_request_a_device_class_maps(
    files: list[Path], flags: list[str], code: int, said: str
) -> None:
    exit_code, output = invoke("migrate", "--check", *flags, *map(str, files))
    assert (exit_code, said in output) == (code, True), output
    if code == 0:
        assert " left (" not in output


def test_write_leaves_a_natively_mapped_file_byte_identical(tmp_path: Path) -> None:
    copy = tmp_path / "demo.yaml"
    copy.write_bytes((DEMOS / "mig-1g-12gb.yaml").read_bytes())
    assert invoke("migrate", "--write", str(copy))[0] == 0
    assert copy.read_bytes() == (DEMOS / "mig-1g-12gb.yaml").read_bytes()


def test_standard_input_is_read_once_and_its_classes_count() -> None:
    text = (DEMOS / "mig-1g-12gb.yaml").read_text()
    result = CliRunner().invoke(main, ["migrate", "-"], input=text)
    assert result.exit_code == 0 and result.stdout == text


LINTS = [
    pytest.param([DEMOS / "mig-1g-12gb.yaml"], [], False, id="class-in-the-file"),
    pytest.param([DEMOS / "gpu-full.yaml"], ["--state", str(STATE)], False, id="class-from-state"),
    pytest.param([DEMOS / "gpu-full.yaml"], [], True, id="no-class-known"),
]


@pytest.mark.parametrize(("files", "flags", "warned"), LINTS)
def test_lint_calls_only_an_unmapped_name_a_device_plugin_request(
    files: list[Path], flags: list[str], warned: bool
) -> None:
    _, output = invoke("lint", *flags, *map(str, files))
    assert ("legacy-gpu-request" in output) is warned, output


def test_check_charges_the_natively_mapped_demo_pod(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "t.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: demo}\n"
        "spec:\n  namespaces: [extended-resource-mig-1g12gb]\n  quota:\n"
        "  - {deviceClassName: mig-1g-12gb.gpu.nvidia.com, maxDevices: 0}\n"
    )
    code, output = invoke("check", "--policies", str(policies), str(DEMOS / "mig-1g-12gb.yaml"))
    assert code == 1, output
    assert "used 0 + requested 1 > limit 0" in output
