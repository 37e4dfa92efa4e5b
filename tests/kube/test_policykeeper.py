"""RewritePolicyKeeper decisions against an in-memory store and API (the real ones: tests/e2e,
test_policy_keeper.py): what the API server does not serve, templates that cannot be made,
terminating namespaces, native resources, failures backed off."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pytest

from webhook.kube.api import ApiError, Unreachable
from webhook.kube.policykeeper import GROUP, RewritePolicyKeeper
from webhook.rewrite.admissionpolicy import NAME
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    FactsUnavailable,
    LegacyResourceMapping,
    MappingAction,
    Object,
    PolicySet,
    ResourceMapping,
    Tenant,
)

MAPPING = LegacyResourceMapping(
    name="nvidia",
    resources=(ResourceMapping(device_class="gpu.nvidia.com", resource_name="nvidia.com/gpu"),),
)
POLICIES_SET = PolicySet(
    tenants=(Tenant("ml", namespaces=frozenset({"a", "b", "c"})),), mappings=(MAPPING,)
)
WARNING = PolicySet(
    tenants=(Tenant("ml", namespaces=frozenset({"a"}), mapping_action=MappingAction.WARN),),
    mappings=(MAPPING,),
)
KINDS = {"resources": [{"name": "mutatingadmissionpolicies"},
                       {"name": "mutatingadmissionpolicybindings"}]}  # fmt: skip
WEBHOOKS_ONLY = {"resources": [{"name": "mutatingwebhookconfigurations"}]}
SERVED = {"v1": KINDS, "v1beta1": KINDS}
"""Discovery by version: the resources `/apis/admissionregistration.k8s.io/<version>` lists."""
BETA_ONLY = {"v1": WEBHOOKS_ONLY, "v1beta1": KINDS}
POLICIES = f"{GROUP}/v1/mutatingadmissionpolicies"
BINDINGS = f"{GROUP}/v1/mutatingadmissionpolicybindings"


class Store:
    """The caches as dicts; POSTs to namespaces in `refusing` fail."""

    def __init__(self) -> None:
        self.namespaces: dict[str, Object] = {n: {"metadata": {"name": n}} for n in ("a", "b")}
        self.cached: dict[tuple[str, str], Object] = {}
        self.classes: dict[str, Object] = {}
        self.refusing: set[str] = set()
        self.synced = True

    def namespace(self, name: str) -> Object | None:
        self._check()
        return self.namespaces.get(name)

    def template(self, namespace: str, name: str) -> Object | None:
        return self.cached.get((namespace, name))

    def device_classes(self) -> Mapping[str, Object]:
        self._check()
        return self.classes

    def post_template(self, namespace: str, template: Object, timeout: float) -> None:
        if namespace in self.refusing:
            raise ApiError(403, f"forbidden in {namespace}")
        self.cached[(namespace, template["metadata"]["name"])] = template

    def _check(self) -> None:
        if not self.synced:
            raise FactsUnavailable("ResourceSlice cache not synced yet")


class Api:
    """Stored objects by path; server-side apply stores the body and bumps the version."""

    def __init__(self, discovery: dict[str, Object] | None = SERVED) -> None:
        self.discovery = discovery
        self.objects: dict[str, Object] = {}
        self.calls: list[tuple[str, str]] = []
        self.down = False
        self.version = 0

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Object | None = None,
        timeout: float | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        self.calls.append((method, path))
        if self.down:
            raise Unreachable("connection refused")
        if path.startswith(GROUP) and path.count("/") <= 3:
            return self._discover(path.removeprefix(GROUP).strip("/"))
        if method == "PATCH":
            assert body is not None and content_type == "application/apply-patch+yaml"
            return self._apply(path, body)
        if method == "DELETE" and path in self.objects:
            return self.objects.pop(path)
        if method == "GET" and path in self.objects:
            return self.objects[path]
        raise ApiError(404, "not found")

    def _discover(self, version: str) -> dict[str, Any]:
        """The APIGroup (no version) or one version's APIResourceList, as discovery serves them."""
        if self.discovery is None or (version and version not in self.discovery):
            raise ApiError(404, "the server could not find the requested resource")
        if version:
            return dict(self.discovery[version])
        group = "admissionregistration.k8s.io"
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in self.discovery]
        return {"kind": "APIGroup", "name": group, "versions": listed}

    def _apply(self, path: str, body: Object) -> Object:
        stored = self.objects.get(path)
        if stored is None or {**stored, "metadata": {}} != {**body, "metadata": {}}:
            self.version += 1
            metadata = {**body["metadata"], "resourceVersion": str(self.version)}
            self.objects[path] = {**json.loads(json.dumps(body)), "metadata": metadata}
        return self.objects[path]

    def bound(self) -> list[str]:
        spec = self.objects[f"{BINDINGS}/{NAME}"]["spec"]
        return list(spec["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"])


@pytest.fixture
def store() -> Store:
    return Store()


def keeper(store: Store, api: Api, policies: PolicySet = POLICIES_SET) -> RewritePolicyKeeper:
    return RewritePolicyKeeper(store, api, lambda: policies, interval=30.0)


def test_binds_the_namespaces_that_exist_and_writes_nothing_the_second_time(store: Store) -> None:
    api = Api()
    made = keeper(store, api)
    assert made.reconcile() == "applied"
    assert api.bound() == ["a", "b"]  # "c" does not exist
    assert {k[0] for k in store.cached} == {"a", "b"}
    assert api.objects[f"{POLICIES}/{NAME}"]["kind"] == "MutatingAdmissionPolicy"
    assert made.writes == 2
    assert made.reconcile() == "applied" and made.writes == 2
    calls = len(api.calls)
    assert made.reconcile(force=False) == "applied"
    assert len(api.calls) == calls  # unchanged: not even a read


@pytest.mark.parametrize(
    ("refusing", "status", "bound"),
    [
        pytest.param({"b"}, "partial", ["a"], id="one-namespace-refuses-templates"),
        pytest.param({"a", "b"}, "partial", None, id="every-namespace-refuses"),
    ],
)
def test_a_namespace_without_its_templates_is_not_bound(
    store: Store, refusing: set[str], status: str, bound: list[str] | None
) -> None:
    api = Api()
    store.refusing = refusing
    made = keeper(store, api)
    assert made.reconcile() == status
    assert (api.bound() if bound else f"{BINDINGS}/{NAME}" in api.objects) == (bound or False)
    assert "forbidden in" in made.last_error


def test_every_namespace_refusing_removes_what_was_applied(store: Store) -> None:
    api = Api()
    made = keeper(store, api)
    made.reconcile()
    store.cached.clear()
    store.refusing = {"a", "b"}
    assert made.reconcile() == "partial"
    assert api.objects == {}


def test_a_terminating_namespace_is_left_out(store: Store) -> None:
    store.namespaces["b"]["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    api = Api()
    assert keeper(store, api).reconcile() == "applied"
    assert api.bound() == ["a"]


@pytest.mark.parametrize(
    ("discovery", "version"),
    [
        pytest.param(SERVED, "v1", id="v1-preferred"),
        pytest.param({"v1": KINDS}, "v1", id="v1-only"),
        pytest.param(BETA_ONLY, "v1beta1", id="beta-only"),
    ],
)
def test_writes_in_the_version_the_api_server_serves(
    store: Store, discovery: dict[str, Object], version: str
) -> None:
    api = Api(discovery)
    assert keeper(store, api).reconcile() == "applied"
    written = sorted(p for m, p in api.calls if m == "PATCH")
    assert written == [
        f"{GROUP}/{version}/mutatingadmissionpolicies/{NAME}",
        f"{GROUP}/{version}/mutatingadmissionpolicybindings/{NAME}",
    ]
    stored = {o["apiVersion"] for o in api.objects.values()}
    assert stored == {f"admissionregistration.k8s.io/{version}"}


@pytest.mark.parametrize(
    "discovery",
    [
        pytest.param(None, id="group-not-served"),
        pytest.param({"v1": WEBHOOKS_ONLY}, id="kind-missing"),
        pytest.param({"v1": WEBHOOKS_ONLY, "v1alpha1": KINDS}, id="only-alpha"),
    ],
)
def test_not_served_writes_nothing_and_asks_again_only_when_forced(
    store: Store, discovery: dict[str, Object] | None
) -> None:
    api = Api(discovery)
    made = keeper(store, api)
    assert made.reconcile() == "not-served"
    assert {m for m, _ in api.calls} == {"GET"} and store.cached == {}
    asked = len(api.calls)
    assert made.reconcile(force=False) == "not-served"
    assert len(api.calls) == asked
    api.discovery = SERVED
    assert made.reconcile() == "applied"


@pytest.mark.parametrize(
    ("policies", "classes"),
    [
        pytest.param(WARNING, {}, id="tenant-warns"),
        pytest.param(
            POLICIES_SET,
            {"gpu": {"spec": {"extendedResourceName": "nvidia.com/gpu"}}},
            id="served-natively-by-a-device-class",
        ),
        pytest.param(PolicySet(tenants=POLICIES_SET.tenants), {}, id="no-mapping"),
    ],
)
def test_nothing_to_rewrite_removes_binding_then_policy(
    store: Store, policies: PolicySet, classes: dict[str, Object]
) -> None:
    api = Api()
    keeper(store, api).reconcile()
    assert api.objects
    store.classes = classes
    made = keeper(store, api, policies)
    assert made.reconcile() == "absent"
    assert api.objects == {}
    deletes = [path for method, path in api.calls if method == "DELETE"]
    assert deletes == [f"{BINDINGS}/{NAME}", f"{POLICIES}/{NAME}"]


def test_a_foreign_object_is_reported_and_kept(store: Store) -> None:
    api = Api()
    foreign = {"metadata": {"name": NAME, "labels": {MANAGED_BY_LABEL: "gitops"}}, "spec": {}}
    api.objects[f"{POLICIES}/{NAME}"] = foreign
    made = keeper(store, api)
    made.step()
    assert made.status == "error"
    assert "exists without the label managed-by=dragate" in made.last_error
    assert api.objects == {f"{POLICIES}/{NAME}": foreign}


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        pytest.param("api", "Unreachable: connection refused", id="api-down"),
        pytest.param("caches", "waiting for the caches", id="caches-not-synced"),
    ],
)
def test_a_failed_pass_is_retried_after_a_backoff(store: Store, breaks: str, message: str) -> None:
    api = Api()
    api.down = breaks == "api"
    store.synced = breaks != "caches"
    made = keeper(store, api)
    made.step()
    assert (made.status, message in made.last_error) == ("error", True)
    calls = len(api.calls)
    made.step()  # within the backoff: nothing is tried
    assert len(api.calls) == calls
    api.down, store.synced = False, True
    made._retry_at = 0.0  # the backoff has passed
    made.step()
    assert (made.status, made.last_error) == ("applied", "")
    assert api.objects[f"{BINDINGS}/{NAME}"]["metadata"]["labels"] == {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE
    }


def test_the_webhook_s_own_namespace_and_user_are_left_to_it(store: Store) -> None:
    """The webhook passes requests in its own namespace and from its own user unevaluated;
    the policy must not rewrite them either."""
    api = Api()
    user = "system:serviceaccount:b:dragate"
    made = RewritePolicyKeeper(store, api, lambda: POLICIES_SET, own_namespace="b",
                               exempt_users=frozenset({user}))  # fmt: skip
    assert made.reconcile() == "applied"
    assert api.bound() == ["a"]
    conditions = api.objects[f"{POLICIES}/{NAME}"]["spec"]["matchConditions"]
    assert any(user in c["expression"] for c in conditions)


class Recording(Api):
    """An Api that also notes each binding's namespaces as it is applied."""

    def __init__(self) -> None:
        super().__init__()
        self.bindings: list[list[str] | str] = []

    def _apply(self, path: str, body: Object) -> Object:
        if path.startswith(BINDINGS):
            expression = body["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            self.bindings.append(list(expression[0]["values"]))
        elif path.startswith(POLICIES):
            self.bindings.append("policy")
        return super()._apply(path, body)


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        pytest.param(None, ["policy", ["a", "c"]], id="nothing-bound"),
        pytest.param(["a"], ["policy", ["a", "c"]], id="growing"),
        pytest.param(["a", "b"], [["a"], "policy", ["a", "c"]], id="b-leaves-c-joins"),
        pytest.param(["b"], ["deleted", "policy", ["a", "c"]], id="none-kept"),
        pytest.param("selector", ["deleted", "policy", ["a", "c"]], id="bound-some-other-way"),
    ],
)
def test_namespaces_leaving_are_unbound_before_the_new_policy_goes_in(
    store: Store, stored: list[str] | str | None, expected: list[object]
) -> None:
    """Each namespace bound at any moment holds the templates of the policy in force: one
    that stays bound has both policies' templates, one that joins is bound after the policy."""
    store.namespaces["c"] = {"metadata": {"name": "c"}}
    api = Recording()
    if stored is not None:
        selector: Object = (
            {"matchLabels": {"team": "ml"}} if stored == "selector"
            else {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                        "operator": "In", "values": stored}]}
        )  # fmt: skip
        api.objects[f"{BINDINGS}/{NAME}"] = {
            "metadata": {"name": NAME, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
            "spec": {"matchResources": {"namespaceSelector": selector}},
        }
    tenants = (Tenant("ml", namespaces=frozenset({"a", "c"})),)
    made = keeper(store, api, PolicySet(tenants=tenants, mappings=(MAPPING,)))
    assert made.reconcile() == "applied"
    deleted = ["deleted"] if ("DELETE", f"{BINDINGS}/{NAME}") in api.calls else []
    assert deleted + api.bindings == expected
    assert api.bound() == ["a", "c"]
    assert api.calls.count(("GET", f"{BINDINGS}/{NAME}")) == 1  # read once, narrowing or not


@pytest.mark.parametrize(
    ("leading", "calls"), [(False, False), (True, True)], ids=["follower", "leader"]
)
def test_a_started_keeper_passes_only_while_leading(
    store: Store, leading: bool, calls: bool
) -> None:
    """A follower's keeper asks the API server nothing; once it leads it applies at once."""
    api, lead = Api(), [leading]
    made = RewritePolicyKeeper(store, api, lambda: POLICIES_SET, tick=0.01, leading=lambda: lead[0])
    made.start()
    try:
        time.sleep(0.2)
        assert bool(api.calls) is calls
        lead[0] = True
        made.wake()  # as Leadership.on_change does
        ends = time.monotonic() + 1.0
        while made.status != "applied" and time.monotonic() < ends:
            time.sleep(0.01)
        assert made.status == "applied" and api.bound() == ["a", "b"]
    finally:
        made.stop()
