"""The rewrite-policy keeper: keeps what `dragate rewrite-policy` prints applied in the cluster.

Opt-in (`dragate serve --keep-rewrite-policy`; the chart's `rewritePolicy.keep`). Applied from
git, the policy's binding can name a namespace before its templates exist there, and it goes
stale when tenants change; kept from the serving policies it follows them. Each pass:

1. makes what `rewrite_policy` makes of the policies being served and the DeviceClasses
   (a resource served natively stays off it);
2. binds it only to namespaces that exist, are not terminating, and hold every template the
   policy names, creating missing ones first: a namespace whose templates cannot be made
   stays with the mutating webhook, never with a policy naming templates that are not there;
3. applies the policy, then the binding, with server-side apply (field manager `dragate`;
   an unchanged object is not written), first unbinding the namespaces the new binding
   leaves out (they hold the old policy's templates, not necessarily the new one's); when
   nothing is left to rewrite it deletes the binding, then the policy. Templates stay: Pods
   made earlier name them, and the template keeper keeps them.

An object of the same name without dragate's managed-by label is never touched (the pass
fails, naming it). The keeper writes the policy and binding in the version discovery
(`/apis/admissionregistration.k8s.io`) says the API server serves them in: v1 where served
(1.36 on), else v1beta1 (1.35 with the feature gate and runtime-config); where it serves
neither, it writes nothing and says so once. A pass runs when what it would apply changes (a
policy reload, a namespace appearing, a DeviceClass), checked every `tick` seconds from the
caches, and every `interval` seconds regardless, which repairs drift (an edited or deleted
binding); a failed pass is retried with backoff.

Every replica has one, but only the one holding the Lease (`leading`, see
`kube.background`) runs passes; a replica that takes the Lease over runs one at once. Were
two to overlap while the Lease changes hands, they agree: they apply the same objects, and an
apply that changes nothing writes nothing. Only during a rolling update to different policies
may an old and a new leader alternate, at most one write each per `interval`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from webhook.kube.api import APPLY, ApiError, Backoff, Unreachable
from webhook.kube.background import BackgroundLoop, always
from webhook.kube.templates import is_managed, is_terminating
from webhook.rewrite.admissionpolicy import (
    NAME,
    NAMESPACE_NAME_LABEL,
    RewritePolicy,
    in_version,
    restricted,
    rewrite_policy,
)
from webhook.rewrite.mappings import native_resources
from webhook.types import FactsUnavailable, Object, PolicySet

log = logging.getLogger("dragate.kube.policykeeper")

GROUP_NAME = "admissionregistration.k8s.io"
GROUP = f"/apis/{GROUP_NAME}"
VERSIONS = ("v1", "v1beta1")
"""The versions the keeper writes in, the one it prefers first."""
POLICIES = "mutatingadmissionpolicies"
BINDINGS = "mutatingadmissionpolicybindings"
FIELD_MANAGER = "dragate"
REQUEST_TIMEOUT = 5.0


class Foreign(Exception):
    """An object of the keeper's name exists and is not dragate's: it is left alone."""


class Requester(Protocol):
    """`KubeApi.request`: the keeper's only way to the API server besides the caches."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Object | None = None,
        timeout: float | None = None,
        content_type: str = ...,
    ) -> dict[str, Any]: ...


class PolicyStore(Protocol):
    """What the keeper reads from `KubeState`'s caches, and its template writer."""

    def namespace(self, name: str) -> Object | None: ...

    def template(self, namespace: str, name: str) -> Object | None: ...

    def device_classes(self) -> Mapping[str, Object]: ...

    def post_template(self, namespace: str, template: Object, timeout: float) -> None: ...


class RewritePolicyKeeper(BackgroundLoop):
    """Applies the rewrite policy for the current policies; `reconcile` is one pass."""

    thread_name = "rewrite-policy-keeper"

    def __init__(
        self,
        store: PolicyStore,
        api: Requester,
        policies: Callable[[], PolicySet],
        *,
        own_namespace: str = "",
        exempt_users: frozenset[str] = frozenset(),
        tick: float = 2.0,
        interval: float = 30.0,
        leading: Callable[[], bool] = always,
    ) -> None:
        """`own_namespace`, `exempt_users`: the webhook's own, which it passes unevaluated,
        so the policy leaves them alone too. `leading`: whether to run passes now."""
        super().__init__(leading)
        self.store, self.api, self.policies = store, api, policies
        self.own_namespace, self.exempt_users = own_namespace, exempt_users
        self.tick, self.interval = tick, interval
        self.applied: RewritePolicy | None = None
        self.status = "starting"
        self.last_error = ""
        self.writes = 0
        self._made: tuple[PolicySet, frozenset[str], RewritePolicy | None] | None = None
        self._passed_for: tuple[RewritePolicy | None, tuple[str, ...]] = (None, ())
        self._version = ""  # the served version, once discovery found one
        self._passed_at = float("-inf")
        self._retry_at = float("-inf")
        self._backoff = Backoff(first=min(1.0, interval), ceiling=interval)

    # ---------------------------------------------------------------- what

    def _wanted_now(self) -> tuple[RewritePolicy | None, tuple[str, ...]]:
        """The policy for the current policies, and those of its namespaces that exist now:
        cheap enough to ask every tick (no object is built or compared while unchanged).

        Raises FactsUnavailable while the caches cannot answer."""
        policies = self.policies()
        native = native_resources(self.store.device_classes().values())
        if self._made is None or self._made[0] is not policies or self._made[1] != native:
            made = rewrite_policy(policies, native_resources=native, exempt_users=self.exempt_users)
            self._made = (policies, native, made)
        made = self._made[2]
        if made is None:
            return None, ()
        return made, tuple(n for n in made.namespaces if self._usable(n))

    def _usable(self, namespace: str) -> bool:
        if namespace == self.own_namespace:
            return False
        found = self.store.namespace(namespace)
        return found is not None and not is_terminating(found)

    # ---------------------------------------------------------------- work

    def reconcile(self, *, force: bool = True) -> str:
        """One pass; returns the status it leaves: applied, partial, absent or not-served.

        Without `force` it returns at once while nothing it would apply has changed. Raises
        ApiError, Unreachable, FactsUnavailable, Foreign."""
        made, live = self._wanted_now()
        if not force and self._unchanged(made, live):
            return self.status
        self.status = self._pass(restricted(made, live) if made is not None else None)
        self._passed_for, self._passed_at = (made, live), time.monotonic()
        if self.status != "partial":  # partial keeps the template error that made it so
            self.last_error = ""
        return self.status

    def _pass(self, wanted: RewritePolicy | None) -> str:
        self.applied = None
        if not self._api_served():
            return "not-served"
        if wanted is None:
            self._remove()
            return "absent"
        wanted = in_version(wanted, f"{GROUP_NAME}/{self._version}")
        self.applied = wanted
        bound = restricted(wanted, self._with_templates(wanted))
        if bound is None:
            self._remove()
            return "partial"
        binding = self._narrow_first(bound)
        policy = bound.objects[0]
        policies = self._path(POLICIES)
        self._apply(policies, policy, self._get(policies, str(policy["metadata"]["name"])))
        self._apply(self._path(BINDINGS), bound.objects[1], binding)
        return "applied" if bound == wanted else "partial"

    def _narrow_first(self, bound: RewritePolicy) -> Object | None:
        """Before a new policy goes in, unbind the namespaces it will not bind: they hold the
        old policy's templates, not necessarily its own. So at every moment each bound
        namespace holds every template of the policy in force. Returns the binding as
        stored after it (None when there is none)."""
        bindings = self._path(BINDINGS)
        found = self._get(bindings, NAME)
        if found is None or _bound_namespaces(found) <= set(bound.namespaces):
            return found
        narrowed = restricted(bound, _bound_namespaces(found))
        if narrowed is None:
            self._delete(bindings)
            return None
        return self._apply(bindings, narrowed.objects[1], found)

    def _unchanged(self, made: RewritePolicy | None, live: tuple[str, ...]) -> bool:
        if self.status == "not-served":
            return True  # asked again at the next forced pass
        done = self.status in ("applied", "partial", "absent")
        return done and self._passed_for[0] is made and self._passed_for[1] == live

    def _api_served(self) -> bool:
        """Whether the API server serves the policy kinds in a version the keeper writes,
        that version kept once found."""
        if not self._version:
            listed = {v.get("version") for v in self._discover(GROUP).get("versions") or ()}
            self._version = next((v for v in VERSIONS if v in listed and self._serves(v)), "")
            if not self._version and self.status != "not-served":
                log.info("the API server serves no MutatingAdmissionPolicy v1 or v1beta1: not kept")
        return bool(self._version)

    def _serves(self, version: str) -> bool:
        found = self._discover(f"{GROUP}/{version}")
        return POLICIES in {r.get("name") for r in found.get("resources") or ()}

    def _discover(self, path: str) -> dict[str, Any]:
        """A discovery document; empty where the API server serves none."""
        try:
            return self.api.request("GET", path, timeout=REQUEST_TIMEOUT)
        except ApiError as error:
            if error.status != 404:
                raise
            return {}

    def _path(self, resource: str) -> str:
        return f"{GROUP}/{self._version}/{resource}"

    def _with_templates(self, wanted: RewritePolicy) -> list[str]:
        """The namespaces holding every template `wanted` names, creating missing ones."""
        missing: set[str] = set()
        for template in wanted.templates:
            namespace, name = template["metadata"]["namespace"], template["metadata"]["name"]
            if namespace in missing or self.store.template(namespace, name) is not None:
                continue
            try:
                self.store.post_template(namespace, template, REQUEST_TIMEOUT)
            except (ApiError, Unreachable) as error:
                missing.add(namespace)
                self.last_error = f"template {namespace}/{name}: {error}"
                log.warning(
                    "rewrite policy: cannot create ResourceClaimTemplate %s", self.last_error
                )
        return [n for n in wanted.namespaces if n not in missing]

    def _apply(self, collection: str, obj: Object, current: Object | None) -> Object:
        """Server-side apply `obj` over `current` (as `_get` read it); the object stored."""
        name = str(obj["metadata"]["name"])
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        applied = self.api.request(
            "PATCH", f"{collection}/{name}", query=query, body=obj,
            timeout=REQUEST_TIMEOUT, content_type=APPLY,
        )  # fmt: skip
        if _version(applied) != _version(current):
            self.writes += 1
            log.info("rewrite policy: applied %s %s", obj["kind"], name)
        return applied

    def _remove(self) -> None:
        for collection in (self._path(BINDINGS), self._path(POLICIES)):
            if self._get(collection, NAME) is not None:
                self._delete(collection)

    def _delete(self, collection: str) -> None:
        try:
            self.api.request("DELETE", f"{collection}/{NAME}", timeout=REQUEST_TIMEOUT)
        except ApiError as error:
            if error.status != 404:
                raise
        self.writes += 1
        log.info("rewrite policy: deleted %s/%s", collection, NAME)

    def _get(self, collection: str, name: str) -> Object | None:
        """The object as stored, None when absent; raises Foreign when it is not dragate's."""
        try:
            found = self.api.request("GET", f"{collection}/{name}", timeout=REQUEST_TIMEOUT)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        if not is_managed(found):
            raise Foreign(f"{collection}/{name} exists without the label managed-by=dragate")
        return found

    # ----------------------------------------------------------- lifecycle

    def _loop(self) -> None:
        while self._running():
            self.step()
            self._sleep(self.tick)

    def step(self) -> None:
        """What the loop does each tick: a pass when due, its failure logged and backed off."""
        now = time.monotonic()
        if now < self._retry_at:
            return
        try:
            self.reconcile(force=now - self._passed_at >= self.interval)
            self._backoff.reset()
        except FactsUnavailable as error:  # the caches have not listed yet
            self._failed(now, f"waiting for the caches: {error}", logging.INFO)
        except (ApiError, Unreachable, Foreign) as error:
            self._failed(now, f"{type(error).__name__}: {error}", logging.WARNING)
        except Exception:  # the loop must survive a bug in one pass
            log.exception("rewrite policy pass failed")
            self._failed(now, "internal error", logging.DEBUG)

    def _failed(self, now: float, message: str, level: int) -> None:
        self.status, self.last_error = "error", message
        self._retry_at = now + self._backoff.next()
        log.log(level, "rewrite policy not kept: %s", message)


def _bound_namespaces(binding: Object) -> set[str]:
    """The namespaces a stored binding names; {"*"} when it selects some other way."""
    selector = ((binding.get("spec") or {}).get("matchResources") or {}).get("namespaceSelector")
    expressions = (selector or {}).get("matchExpressions") or []
    if len(expressions) != 1 or (selector or {}).get("matchLabels"):
        return {"*"}
    ours = (
        expressions[0].get("key") == NAMESPACE_NAME_LABEL and expressions[0].get("operator") == "In"
    )
    return {str(v) for v in expressions[0].get("values") or ()} if ours else {"*"}


def _version(obj: Object | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
