"""KubeState against the real kube-apiserver: sync, watch, resume, relist, fail closed."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from webhook.engine.counting import holder_key, pod_holder_key
from webhook.engine.normalize import claim_spec
from webhook.kube import caches
from webhook.kube.api import KubeApi
from webhook.kube.caches import FactsUnavailable, KubeState

from .cluster import Cluster
from .processes import free_port, wait_for

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"


def claim_yaml(namespace: str, name: str, count: int = 1) -> str:
    return json.dumps(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": count}}
                    ]
                }
            },
        }
    )


def template(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace, "labels": {"dragate.io/managed": "1"}},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 1}}]
                }
            }
        },
    }


@pytest.fixture
def state(cluster: Cluster) -> Iterator[KubeState]:
    live = KubeState.from_kubeconfig(str(cluster.kubeconfig), watch_seconds=2).start()
    assert live.wait_synced(20), live.health()
    yield live
    live.stop(timeout=0)


def test_syncs_and_follows_creates_updates_and_deletes(cluster: Cluster, state: KubeState) -> None:
    cluster.kubectl("create", "namespace", "ks-follow")
    cluster.apply(claim_yaml("ks-follow", "c1", 2))
    wait_for(lambda: len(state.claims_in("ks-follow")) == 1, timeout=10, what="claim seen")
    claim = state.claims_in("ks-follow")[0]
    assert claim["kind"] == "ResourceClaim"
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    assert claim_spec(claim, holder_key(claim)).requests[0].count == 2
    assert state.namespace("ks-follow") is not None

    cluster.kubectl("label", "namespace", "ks-follow", "dragate.io/tenant=team-a")
    wait_for(
        lambda: _labels(state.namespace("ks-follow")).get("dragate.io/tenant") == "team-a",
        timeout=10,
        what="label seen",
    )
    cluster.kubectl("delete", "resourceclaim", "-n", "ks-follow", "c1", "--wait=true")
    wait_for(lambda: not state.claims_in("ks-follow"), timeout=10, what="delete seen")
    assert state.health()["ready"]


@pytest.mark.parametrize("seen_by", ["list", "watch"])
def test_cached_objects_leave_out_managed_fields(cluster: Cluster, seen_by: str) -> None:
    """The API server sends every object with its managedFields; the caches keep none, and a
    relist keeps the cached object of an unchanged resourceVersion."""
    namespace = f"ks-slim-{seen_by}"
    cluster.kubectl("create", "namespace", namespace)
    if seen_by == "list":
        cluster.apply(claim_yaml(namespace, "c1"))
    live = KubeState.from_kubeconfig(str(cluster.kubeconfig), watch_seconds=2).start()
    try:
        assert live.wait_synced(20), live.health()
        if seen_by == "watch":
            cluster.apply(claim_yaml(namespace, "c1"))
        wait_for(lambda: len(live.claims_in(namespace)) == 1, timeout=10, what="claim seen")
        sent = cluster.get_json("resourceclaim", "c1", "-n", namespace, "--show-managed-fields")
        assert sent["metadata"]["managedFields"]
        cached = live.claims_in(namespace)[0]
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["uid"] == sent["metadata"]["uid"]
        assert "managedFields" not in (live.namespace(namespace) or {})["metadata"]
        live._caches["ResourceClaim"].relist()  # unchanged: the cached object itself is kept
        assert live.claims_in(namespace)[0] is cached
    finally:
        live.stop(timeout=0)


def test_broken_watch_resumes_without_relisting(cluster: Cluster, state: KubeState) -> None:
    """A watch cut mid-stream resumes from its resourceVersion: changes in the gap arrive."""
    cache = state._caches["ResourceClaim"]
    relists = cache.relists
    cluster.kubectl("create", "namespace", "ks-resume")
    for number in range(3):
        cache.restart_watch()  # the connection drops
        cluster.apply(claim_yaml("ks-resume", f"in-gap-{number}"))
    wait_for(lambda: len(state.claims_in("ks-resume")) == 3, timeout=10, what="claims seen")
    assert cache.relists == relists
    assert state.synced()


def test_stop_ends_the_watch_threads_at_once(cluster: Cluster) -> None:
    live = KubeState.from_kubeconfig(str(cluster.kubeconfig)).start()
    assert live.wait_synced(20)
    started = time.monotonic()
    live.stop(timeout=2)
    assert time.monotonic() - started < 1.5
    assert not any(thread.is_alive() for thread in live._threads)


def test_unreachable_api_raises_facts_unavailable() -> None:
    configuration = k8s.Configuration()
    configuration.host = f"https://127.0.0.1:{free_port()}"
    dead = KubeState(KubeApi.from_configuration(configuration)).start()
    try:
        assert not dead.wait_synced(1.0)
        with pytest.raises(FactsUnavailable, match="not synced"):
            dead.namespace("default")
        with pytest.raises(FactsUnavailable):
            dead.claims()
        health = dead.health()
        assert not health["ready"]
        assert "Unreachable" in health["kinds"]["Namespace"]["lastError"]
    finally:
        dead.stop(timeout=0)


class Proxy:
    """A TCP forwarder to the API server that the test can cut, as a network partition would."""

    def __init__(self, target: tuple[str, int], port: int) -> None:
        self.target, self.port = target, port
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", port), reuse_port=True)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def cut(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def test_stale_cache_fails_closed_then_recovers(cluster: Cluster) -> None:
    host, port = cluster.server_url.removeprefix("https://").split(":")
    proxy = Proxy((host, int(port)), free_port())
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        str(cluster.kubeconfig), client_configuration=configuration
    )
    configuration.host = f"https://127.0.0.1:{proxy.port}"
    live = KubeState(KubeApi.from_configuration(configuration), stale_after=1.0).start()
    try:
        assert live.wait_synced(20)
        proxy.cut()
        wait_for(lambda: not live.synced(), timeout=10, what="stale")
        with pytest.raises(FactsUnavailable, match="stale"):
            live.namespace("default")
        proxy = Proxy((host, int(port)), proxy.port)
        wait_for(live.synced, timeout=40, what="recovered")
        assert live.namespace("default") is not None
    finally:
        live.stop(timeout=0)
        proxy.cut()


def test_ensure_templates_creates_once_and_never_on_dry_run(
    cluster: Cluster, state: KubeState
) -> None:
    cluster.kubectl("create", "namespace", "ks-templates")
    state.ensure_templates("ks-templates", [template("ks-templates", "dry")], dry_run=True)
    wanted = [template("ks-templates", "gpu-1")]
    state.ensure_templates("ks-templates", wanted, dry_run=False)
    assert state.template("ks-templates", "gpu-1") is not None  # visible at once
    state._caches["ResourceClaimTemplate"]._objects.clear()  # force the AlreadyExists path
    state.ensure_templates("ks-templates", wanted, dry_run=False)
    names = cluster.kubectl(
        "get", "resourceclaimtemplates", "-n", "ks-templates", "-o", "name"
    ).stdout.split()
    assert names == ["resourceclaimtemplate.resource.k8s.io/gpu-1"]


def test_ensure_templates_creates_nothing_when_the_review_has_no_time_left(
    cluster: Cluster, state: KubeState
) -> None:
    """A review with no time left is refused the creation, not answered after the API server
    has given up on it; with time left, the same call creates the template."""
    cluster.kubectl("create", "namespace", "ks-late")
    wanted = [template("ks-late", "gpu-late")]
    with pytest.raises(FactsUnavailable, match="no time left"):
        state.ensure_templates("ks-late", wanted, dry_run=False, seconds=0.0)
    listed = cluster.kubectl("get", "resourceclaimtemplates", "-n", "ks-late", "-o", "name")
    assert listed.stdout.split() == []
    state.ensure_templates("ks-late", wanted, dry_run=False, seconds=1.5)
    assert state.template("ks-late", "gpu-late") is not None


@pytest.mark.parametrize("slow", [False, True], ids=["fast-not-logged", "slow-logged"])
def test_a_slow_template_creation_is_logged_with_what_waited(
    cluster: Cluster, state: KubeState, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch, slow: bool,
) -> None:  # fmt: skip
    """The step a slow rewrite waited on is named in the log (namespace, template, seconds);
    a creation under the threshold writes nothing."""
    namespace = f"ks-slow-{str(slow).lower()}"
    cluster.kubectl("create", "namespace", namespace)
    if slow:
        monkeypatch.setattr(caches, "SLOW_TEMPLATE_SECONDS", 0.0)
    with caplog.at_level(logging.WARNING, logger="dragate.kube"):
        state.ensure_templates(namespace, [template(namespace, "gpu-1")], dry_run=False)
    noted = [r for r in caplog.records if r.name == "dragate.kube"]
    if not slow:
        assert noted == []
        return
    (record,) = noted
    fields = record.fields  # type: ignore[attr-defined]
    assert (fields["namespace"], fields["template"]) == (namespace, "gpu-1")
    assert fields["seconds"] >= 0 and "webhook.ownUsername" in record.getMessage()


def test_ensure_templates_fails_closed_when_the_api_refuses(state: KubeState) -> None:
    with pytest.raises(FactsUnavailable, match="cannot create"):
        state.ensure_templates("no-such-namespace", [template("x", "gpu-1")], dry_run=False)


def test_generated_claim_is_keyed_by_pod_uid_and_pod_claim_name(
    cluster: Cluster, state: KubeState
) -> None:
    """The resourceclaim controller's claim carries the key the Pod's CREATE reserved under."""
    cluster.kubectl("create", "namespace", "ks-generated")
    cluster.apply(json.dumps(template("ks-generated", "one-gpu")))
    cluster.apply(json.dumps(_pod("ks-generated", "trainer", "one-gpu")))
    uid = str(_get(cluster, "pod", "-n", "ks-generated", "trainer")["metadata"]["uid"])
    wait_for(lambda: bool(state.claims_in("ks-generated")), timeout=20, what="generated claim")
    generated = state.claims_in("ks-generated")[0]
    assert holder_key(generated) == pod_holder_key(uid, "gpus") == f"pod:{uid}/gpus"
    from_api = _get(cluster, "resourceclaims", "-n", "ks-generated")["items"]
    assert [holder_key(c) for c in from_api] == [f"pod:{uid}/gpus"]


def _pod(namespace: str, name: str, template_name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpus"}]}}
            ],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template_name}],
        },
    }


def _get(cluster: Cluster, *args: str) -> dict[str, Any]:
    """`kubectl get ... -o json`, parsed (the real kubectl, not our client)."""
    result: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return result


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    meta = (obj or {}).get("metadata") or {}
    return dict(meta.get("labels") or {})
