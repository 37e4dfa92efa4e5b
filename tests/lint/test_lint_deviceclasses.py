"""`unknown-device-class`: class names that do not exist, judged only when classes are known."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import GPU, claim, exactly, template

from webhook.lint import Known, lint_object

RULE = "unknown-device-class"
TYPO = "gpu.nvdia.com"
KNOWN = Known(frozenset({GPU, "mig.nvidia.com"}))


def policy(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "dragate.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": "p"},
        "spec": spec,
    }


def unknown(obj: dict[str, Any], known: Known = KNOWN) -> list[tuple[str, str]]:
    """(path, fix) of each finding of the rule."""
    return [(f.dotted_path(), f.fix) for f in lint_object(obj, known) if f.rule == RULE]


HINT = f"did you mean '{GPU}'?"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            claim(exactly(device_class=TYPO)),
            [("spec.devices.requests[0].exactly.deviceClassName", HINT)],
        ),
        (
            template(exactly(device_class=TYPO)),
            [("spec.spec.devices.requests[0].exactly.deviceClassName", HINT)],
        ),
        (
            claim(
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "a", "deviceClassName": GPU},
                        {"name": "b", "deviceClassName": TYPO},
                    ],
                }
            ),
            [("spec.devices.requests[0].firstAvailable[1].deviceClassName", HINT)],
        ),
        (
            claim({"name": "gpu", "deviceClassName": TYPO}, version="v1beta1"),
            [("spec.devices.requests[0].deviceClassName", HINT)],
        ),
        (
            policy("Tenant", namespaces=["a"], allowedDeviceClasses=[GPU, TYPO]),
            [("spec.allowedDeviceClasses[1]", HINT)],
        ),
        (
            policy("Tenant", namespaces=["a"], quota=[{"deviceClassName": TYPO, "maxDevices": 1}]),
            [("spec.quota[0].deviceClassName", HINT)],
        ),
        (
            policy("DeviceClassPolicy", deviceClassNames=[TYPO]),
            [("spec.deviceClassNames[0]", HINT)],
        ),
        (
            policy(
                "LegacyResourceMapping",
                resources=[{"resourceName": "nvidia.com/gpu", "deviceClassName": TYPO}],
            ),
            [("spec.resources[0].deviceClassName", HINT)],
        ),
        (
            claim(exactly(device_class="tpu.example.com")),
            [
                (
                    "spec.devices.requests[0].exactly.deviceClassName",
                    f"use one of: {GPU}, mig.nvidia.com",
                )
            ],
        ),
        (claim(exactly(device_class=GPU)), []),
        (claim(exactly(device_class="")), []),
    ],
    ids=[
        "claim",
        "template",
        "first-available",
        "v1beta1",
        "tenant-allowed",
        "tenant-quota",
        "class-policy",
        "legacy-mapping",
        "nothing-close",
        "known",
        "no-name",
    ],
)
def test_unknown_class_names_are_found(
    obj: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert unknown(obj) == expected


@pytest.mark.parametrize(
    "obj",
    [claim(exactly(device_class=TYPO)), policy("Tenant", allowedDeviceClasses=[TYPO])],
    ids=["claim", "tenant"],
)
def test_no_class_known_means_no_finding(obj: dict[str, Any]) -> None:
    assert unknown(obj, Known()) == []
    assert unknown(obj, KNOWN) != []


def test_the_message_says_what_the_name_does() -> None:
    [finding] = [f for f in lint_object(claim(exactly(device_class=TYPO)), KNOWN) if f.rule == RULE]
    assert finding.severity == "warning"
    assert finding.message == (
        f"DeviceClass '{TYPO}' does not exist; the API server accepts the claim, and no device "
        "is ever allocated for it"
    )
    assert finding.fix == f"did you mean '{GPU}'?"
