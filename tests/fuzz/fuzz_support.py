"""Shared pieces of the fuzz tests: hypothesis profiles, strategies and answer checks.

Profiles (pick with `DRAGATE_FUZZ_PROFILE`):
  ci    the default: derandomized (the same cases every run, so CI never flakes), no example
        database, a few thousand cases over all fuzz tests in well under a minute;
  long  random, 40x the examples of `ci` (>= 100,000 cases in total), for a run in the
        background: `DRAGATE_FUZZ_PROFILE=long python -m pytest tests/fuzz -q`.
Each test asks for `fuzz_settings(n)`: n examples under `ci`, 40 n under `long`.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

PROFILE = os.environ.get("DRAGATE_FUZZ_PROFILE", "ci")
LONG_FACTOR = 40
_COMMON: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
}
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("long", derandomize=False, print_blob=True, **_COMMON)


def fuzz_settings(examples: int) -> settings:
    """`examples` cases under the ci profile, LONG_FACTOR times as many under `long`."""
    factor = LONG_FACTOR if PROFILE == "long" else 1
    return settings(settings.get_profile(PROFILE), max_examples=examples * factor)


# --------------------------------------------------------------------------- plain values

TENANT_NAMESPACES = ("ml-research", "ml-research-batch", "inference", "gpu-operator")
NAMESPACES = (*TENANT_NAMESPACES, "default", "kube-system", "sandbox-1")
CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "other.example.com")
V1, V1BETA2, V1BETA1 = "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"
VERSIONS = (V1, V1BETA2, V1BETA1)
SELECTORS = (
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'",
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].uuid == 'GPU-1'",
    "device.driver == 'gpu.nvidia.com'",
    "(((",
    "",
)
NASTY_TEXT = (
    "a\nb",
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "\x00",
    "\x85\u2028\u2029",
    "ü" * 300,
    "🚀" * 70,
    "x" * 5000,
    "../../etc/passwd",
    "{suffix}",
    "%s%n",
)

dns_label = st.from_regex(r"\A[a-z]([-a-z0-9]{0,14}[a-z0-9])?\Z")
nasty = st.sampled_from(NASTY_TEXT)
any_text = st.one_of(st.text(max_size=40), nasty)
names = st.one_of(dns_label, dns_label, dns_label, any_text)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
counts: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=-3, max_value=2**40),
    st.sampled_from(["2", "1.5", None, 1.0, True, [], {}]),
)


def sometimes(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`strategy`, or the key left out (None is filtered by `compact`)."""
    return st.one_of(st.just(_ABSENT), strategy)


_ABSENT = object()


def compact(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not _ABSENT}


# --------------------------------------------------------------------------- DRA objects


@st.composite
def request_fields(draw: st.DrawFn) -> dict[str, Any]:
    selectors = draw(st.lists(st.sampled_from(SELECTORS), max_size=2))
    return compact(
        {
            "deviceClassName": draw(sometimes(st.one_of(st.sampled_from(CLASSES), any_text))),
            "count": draw(sometimes(counts)),
            "allocationMode": draw(sometimes(st.sampled_from(["ExactCount", "All", "Some", 3]))),
            "adminAccess": draw(sometimes(st.sampled_from([True, False, "yes"]))),
            "selectors": [{"cel": {"expression": s}} for s in selectors] or _ABSENT,
        }
    )


@st.composite
def device_request(draw: st.DrawFn, version: str) -> dict[str, Any]:
    name = draw(names)
    shape = draw(st.sampled_from(["native", "native", "firstAvailable", "flat", "exactly"]))
    if shape == "firstAvailable":
        subs = draw(st.lists(request_fields(), min_size=0, max_size=3))
        return {"name": name, "firstAvailable": [{"name": draw(names), **s} for s in subs]}
    fields = draw(request_fields())
    if shape == "flat" or (shape == "native" and version == V1BETA1):
        return {"name": name, **fields}
    return {"name": name, "exactly": fields}


@st.composite
def claim_spec(draw: st.DrawFn, version: str) -> dict[str, Any]:
    requests = draw(st.lists(device_request(version), max_size=4))
    devices: dict[str, Any] = {"requests": requests}
    if draw(st.booleans()):
        devices["constraints"] = [{"matchAttribute": draw(any_text)}]
    if draw(st.integers(0, 9)) == 0:
        parameters = draw(json_values)
        devices["config"] = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}]
    return {"devices": devices}


def _meta(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": draw(names), "namespace": draw(st.sampled_from(NAMESPACES))}
    if draw(st.integers(0, 4)) == 0:
        meta["labels"] = draw(st.dictionaries(st.text(max_size=8), any_text, max_size=2))
    return meta


@st.composite
def resource_claim(draw: st.DrawFn) -> dict[str, Any]:
    version = draw(st.sampled_from(VERSIONS))
    return {
        "apiVersion": version,
        "kind": "ResourceClaim",
        "metadata": _meta(draw),
        "spec": draw(claim_spec(version)),
    }


@st.composite
def claim_template(draw: st.DrawFn) -> dict[str, Any]:
    version = draw(st.sampled_from(VERSIONS))
    return {
        "apiVersion": version,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(draw),
        "spec": {"spec": draw(claim_spec(version))},
    }


LEGACY_RESOURCES = (
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-",
    "amd.com/gpu",
    "cpu",
    "memory",
)
GPU_LABELS = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/mig.strategy",
    "nvidia.com/cuda.driver.major",
    "kubernetes.io/arch",
)
quantities = st.one_of(
    st.integers(0, 16),
    st.sampled_from(["1", "2", "8", "0", "500m", "1k", "-1", "abc", "1Gi"]),
)


@st.composite
def container(draw: st.DrawFn, *, valid: bool = False) -> dict[str, Any]:
    # "nvidia.com/mig-" is no valid resource name (the apiserver refuses it after mutation)
    resource = st.sampled_from([r for r in LEGACY_RESOURCES if not (valid and r.endswith("-"))])
    amount = st.integers(1, 8) if valid else quantities
    limits = draw(st.dictionaries(resource, amount, max_size=3))
    out: dict[str, Any] = {"name": draw(dns_label if valid else names), "image": "busybox"}
    if valid:  # extended resources must be whole numbers, equal in requests and limits
        limits = {k: (str(v) if k in ("cpu", "memory") else v) for k, v in limits.items()}
        limits = {k: (f"{v}Gi" if k == "memory" else v) for k, v in limits.items()}
    if bool(limits) or draw(st.booleans()):
        out["resources"] = {"limits": limits}
        if draw(st.booleans()):
            out["resources"]["requests"] = dict(limits)
    if not valid and draw(st.integers(0, 5)) == 0:
        out["resources"] = draw(json_values)
    if draw(st.integers(0, 3)) == 0:
        out["env"] = [{"name": "PASSWORD", "value": "hunter2"}]
    return out


@st.composite
def pod_spec(draw: st.DrawFn, *, valid: bool = False) -> dict[str, Any]:
    containers = draw(st.lists(container(valid=valid), min_size=1, max_size=3))
    if valid:  # container names must be unique
        for i, c in enumerate(containers):
            c["name"] = f"{c['name'][:50]}-{i}"
    spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        spec["initContainers"] = draw(st.lists(container(valid=valid), max_size=2))
        if valid:
            for i, c in enumerate(spec["initContainers"]):
                c["name"] = f"init-{i}"
    if draw(st.booleans()):
        values = st.sampled_from(["NVIDIA-A100-SXM4-80GB", "81920", "ampere", "mixed", "550"])
        labels = st.dictionaries(st.sampled_from(GPU_LABELS), values, max_size=3)
        spec["nodeSelector"] = draw(labels)
    if draw(st.integers(0, 3)) == 0:
        spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    if draw(st.integers(0, 3)) == 0:
        expression = {
            "key": draw(st.sampled_from(GPU_LABELS)),
            "operator": draw(st.sampled_from(["In", "NotIn", "Exists"])),
            "values": ["NVIDIA-A100-SXM4-80GB"],
        }
        if expression["operator"] == "Exists":
            del expression["values"]
        terms = [{"matchExpressions": [expression]}] * draw(st.integers(1, 2))
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}
        }  # fmt: skip
    if draw(st.integers(0, 3)) == 0:
        spec["resourceClaims"] = [{"name": "existing", "resourceClaimTemplateName": "t"}]
        resources = spec["containers"][0].get("resources")
        resources = resources if isinstance(resources, dict) else {}
        spec["containers"][0]["resources"] = {**resources, "claims": [{"name": "existing"}]}
    return spec


WORKLOAD_KINDS = (
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
)


def wrap(
    api_version: str, kind: str, name: str, namespace: str, spec: dict[str, Any]
) -> dict[str, Any]:
    """A pod spec inside a workload of `kind`, with the fields its schema requires."""
    meta = {"name": name, "namespace": namespace}
    template = {"metadata": {"labels": {"app": "x"}}, "spec": spec}
    body: dict[str, Any]
    if kind == "Pod":
        body = spec
    elif kind == "CronJob":
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
        template["spec"] = {**spec, "restartPolicy": "Never"}
    elif kind == "Job":
        template["spec"] = {**spec, "restartPolicy": "Never"}
        body = {"template": template}
    else:
        body = {"selector": {"matchLabels": {"app": "x"}}, "template": template}
        if kind == "StatefulSet":
            body["serviceName"] = "svc"
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": body}


@st.composite
def workload(draw: st.DrawFn, *, valid: bool = False) -> dict[str, Any]:
    api_version, kind = draw(st.sampled_from(WORKLOAD_KINDS))
    name = draw(dns_label if valid else names)
    namespace = draw(st.sampled_from(NAMESPACES))
    return wrap(api_version, kind, name, namespace, draw(pod_spec(valid=valid)))


def namespace_objects() -> list[dict[str, Any]]:
    """The namespaces of the example policies' tenants, plus a labelled and a sandbox one."""
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": {}}}
        for n in NAMESPACES
    ]
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "team-x", "labels": {"dragate.io/tenant": "ml-research"}}})  # fmt: skip
    return objects


dra_objects = st.one_of(resource_claim(), claim_template(), workload())


# --------------------------------------------------------------------------- reviews

RESOURCES = {
    "Pod": ("", "v1", "pods"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims"),
    "ResourceClaimTemplate": ("resource.k8s.io", "v1", "resourceclaimtemplates"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
    "Namespace": ("", "v1", "namespaces"),
}


def review_of(
    obj: Mapping[str, Any], uid: str, operation: str = "CREATE", **extra: Any
) -> dict[str, Any]:
    """The AdmissionReview the apiserver would send for `obj`."""
    kind = str(obj.get("kind", "Pod"))
    group, version, resource = RESOURCES.get(kind, ("", "v1", "things"))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "operation": operation,
        "namespace": meta.get("namespace", "") if isinstance(meta, dict) else "",
        "name": meta.get("name", "") if isinstance(meta, dict) else "",
        "object": None if operation == "DELETE" else obj,
        "oldObject": obj if operation in ("UPDATE", "DELETE") else None,
        "dryRun": False,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        **extra,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


uids = st.one_of(st.uuids().map(str), st.text(min_size=1, max_size=30), nasty)


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    obj = draw(dra_objects)
    operation = draw(st.sampled_from(["CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT"]))
    extra: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        extra["dryRun"] = True
    if draw(st.integers(0, 6)) == 0:
        extra["subResource"] = draw(st.sampled_from(["status", "resize", "ephemeralcontainers"]))
    return review_of(obj, draw(uids), operation, **extra)


@st.composite
def mutated(  # noqa: PLR0911  (one return per kind of change reads best)
    draw: st.DrawFn, document: Any, depth: int = 0, *, huge: bool = True
) -> Any:
    """`document` with one random change somewhere: replaced, removed, retyped or inflated."""
    here = draw(st.integers(0, 5)) == 0 or not isinstance(document, dict | list) or depth > 12
    if not here:
        if isinstance(document, dict) and document:
            key = draw(st.sampled_from(sorted(document, key=str)))
            return {**document, key: draw(mutated(document[key], depth + 1, huge=huge))}
        if isinstance(document, list) and document:
            i = draw(st.integers(0, len(document) - 1))
            changed = draw(mutated(document[i], depth + 1, huge=huge))
            return [*document[:i], changed, *document[i + 1 :]]
    change = draw(st.sampled_from(["replace", "remove", "retype", "inflate", "nest", "keep"]))
    if change == "replace":
        return draw(json_values)
    if change == "remove":
        return _REMOVED
    if change == "retype":
        return draw(st.sampled_from([None, 0, -1, "", "x", [], {}, True, 1.5, [document]]))
    if change == "inflate":
        scale = 1 if huge else 50
        return draw(
            st.sampled_from(
                ["x" * (100_000 // scale), "ü" * (20_000 // scale), list(range(5000 // scale))]
            )
        )
    if change == "nest":
        return nest(document, draw(st.integers(10, 400 if huge else 40)))
    return document


_REMOVED = object()


def drop_removed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_removed(v) for k, v in value.items() if v is not _REMOVED}
    if isinstance(value, list):
        return [drop_removed(v) for v in value if v is not _REMOVED]
    return None if value is _REMOVED else value


def nest(value: Any, depth: int) -> Any:
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def deep_json(depth: int, leaf: str = '"x"') -> str:
    """`depth` nested arrays and objects as text (json.dumps would itself recurse too deep)."""
    opens = "".join('{"a":' if i % 2 else "[" for i in range(depth))
    closes = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return opens + leaf + closes


# --------------------------------------------------------------------------- checks


class Errors(logging.Handler):
    """Every record at ERROR or above (tracebacks included) logged under `dragate`."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[str]:
        found = [self.format(r) for r in self.records]
        self.records.clear()
        return found


_AUDIT_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_answer(status: int, body: bytes, sent: Any, *, mutate: bool) -> dict[str, Any] | None:
    """Assert the reply is a valid AdmissionReview for `sent`, or a 400 with a JSON message."""
    assert status in (200, 400), (status, body[:500])
    document = json.loads(body)
    assert isinstance(document, dict)
    if status == 400:
        assert isinstance(document.get("message"), str) and document["message"], document
        assert len(document["message"]) <= 2048, len(document["message"])
        return None
    assert document["apiVersion"] == "admission.k8s.io/v1" and document["kind"] == "AdmissionReview"
    response = document["response"]
    assert response["uid"] == sent["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    for warning in response.get("warnings", []):
        assert isinstance(warning, str) and 0 < len(warning) <= 120, warning
        assert not _CONTROL.search(warning), repr(warning)
    for key, value in response.get("auditAnnotations", {}).items():
        assert len(key) <= 63 and _AUDIT_KEY.match(key), key
        assert isinstance(value, str)
    if not response["allowed"]:
        assert response["status"]["code"] == 403
        message = response["status"]["message"]
        assert isinstance(message, str) and message and not _CONTROL.search(message), message
        assert "patch" not in response
    if "patch" in response:
        assert mutate and response["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(response["patch"], validate=True))
        assert isinstance(patch, list) and patch
        # a JSON round trip copies what the webhook read (copy.deepcopy recurses thrice as deep)
        target = json.loads(json.dumps(sent["request"]["object"]))
        jsonpatch.apply_patch(target, patch, in_place=True)
    else:
        assert "patchType" not in response
    return dict(response)


def printable(text: str) -> bool:
    return all(ch in string.printable or ord(ch) > 0x9F for ch in text)


Poster = Callable[[str, bytes], tuple[int, bytes]]
