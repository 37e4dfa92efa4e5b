"""Run an HTTPS admission webhook on loopback and register it with the e2e cluster."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import certs
from .cluster import Cluster
from .processes import LOOPBACK, ManagedProcess, free_port, wait_for

WebhookObject = dict[str, object]

VALIDATE_OPERATIONS = ("CREATE", "UPDATE")
MUTATE_OPERATIONS = ("CREATE",)
EXCLUDED_NAMESPACES = ("kube-system",)


@dataclass
class WebhookServer:
    """A webhook process serving HTTPS on 127.0.0.1 with a certificate from its own CA."""

    process: ManagedProcess
    base_url: str
    ca_bundle_pem: bytes
    cert_dir: Path

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def stop(self) -> None:
        self.process.stop()


def _fill_placeholders(command: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Replace `{host}`, `{port}`, `{cert_dir}`, `{cert_file}`, `{key_file}`, `{ca_file}`."""

    def fill(arg: str) -> str:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        return arg

    return [fill(arg) for arg in command]


def _https_ok(url: str, ca_pem: bytes) -> bool:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)


def start_webhook_server(
    command: Sequence[str],
    workdir: Path,
    *,
    name: str = "webhook",
    ready_path: str = "/healthz",
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> WebhookServer:
    """Start `command`, an HTTPS server, and wait until GET `ready_path` answers 200.

    The placeholders `{host}`, `{port}`, `{cert_dir}`, `{cert_file}`, `{key_file}` and
    `{ca_file}` in `command` are filled in; `cert_dir` holds `tls.crt`, `tls.key` (serving
    certificate for 127.0.0.1 and localhost) and `ca.crt`.
    """
    cert_dir = workdir / f"{name}-certs"
    cert_dir.mkdir(parents=True)
    ca = certs.make_ca(f"{name}-ca")
    ca_file, _ = ca.write(cert_dir, "ca")
    cert_file, key_file = certs.make_serving_cert(ca, (LOOPBACK, "localhost")).write(
        cert_dir, "tls"
    )
    port = free_port()
    values = {
        "host": LOOPBACK,
        "port": str(port),
        "cert_dir": str(cert_dir),
        "cert_file": str(cert_file),
        "key_file": str(key_file),
        "ca_file": str(ca_file),
    }
    process = ManagedProcess(name, _fill_placeholders(command, values), workdir, env)
    server = WebhookServer(process, f"https://{LOOPBACK}:{port}", ca.cert_pem, cert_dir)
    process.wait_ready(lambda: _https_ok(server.url(ready_path), ca.cert_pem), timeout)
    return server


def _rules(operations: Sequence[str]) -> list[WebhookObject]:
    return [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods", "namespaces"],
            "operations": list(operations),
            "scope": "*",
        },
        {
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["*"],
            "resources": ["resourceclaims", "resourceclaimtemplates"],
            "operations": list(operations),
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": list(operations),
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["jobset.x-k8s.io"],
            "apiVersions": ["v1alpha2"],
            "resources": ["jobsets"],
            "operations": list(operations),
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["leaderworkersets"],
            "operations": list(operations),
            "scope": "Namespaced",
        },
        {
            "apiGroups": ["scheduling.k8s.io"],
            "apiVersions": ["v1beta1"],
            "resources": ["podgroups"],
            "operations": list(operations),
            "scope": "Namespaced",
        },
    ]


@dataclass(frozen=True)
class WebhookSettings:
    """Knobs shared by the validating and the mutating webhook."""

    failure_policy: str = "Fail"
    timeout_seconds: int = 10
    validate_operations: Sequence[str] = VALIDATE_OPERATIONS
    mutate_operations: Sequence[str] = MUTATE_OPERATIONS
    excluded_namespaces: Sequence[str] = EXCLUDED_NAMESPACES
    extra: Mapping[str, object] = field(default_factory=dict)  # merged into each webhook


def _webhook(
    name: str, url: str, ca_bundle_pem: bytes, operations: Sequence[str], settings: WebhookSettings
) -> WebhookObject:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_bundle_pem).decode()},
        "rules": _rules(operations),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "matchPolicy": "Equivalent",
        "failurePolicy": settings.failure_policy,
        "timeoutSeconds": settings.timeout_seconds,
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(settings.excluded_namespaces),
                }
            ]
        },
        **settings.extra,
    }


def webhook_configurations(
    name: str,
    validate_url: str | None,
    mutate_url: str | None,
    ca_bundle_pem: bytes,
    settings: WebhookSettings,
) -> list[WebhookObject]:
    """Validating and/or Mutating WebhookConfiguration objects named `name`, with `url` clients."""
    objects: list[WebhookObject] = []
    if validate_url:
        webhook = _webhook(
            "validate.dragate.io",
            validate_url,
            ca_bundle_pem,
            settings.validate_operations,
            settings,
        )
        objects.append(_configuration("ValidatingWebhookConfiguration", name, webhook))
    if mutate_url:
        webhook = _webhook(
            "mutate.dragate.io", mutate_url, ca_bundle_pem, settings.mutate_operations, settings
        )
        webhook["reinvocationPolicy"] = "IfNeeded"
        objects.append(_configuration("MutatingWebhookConfiguration", name, webhook))
    return objects


def _configuration(kind: str, name: str, webhook: WebhookObject) -> WebhookObject:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "dragate-e2e"}},
        "webhooks": [webhook],
    }


@dataclass(frozen=True)
class WebhookRegistration:
    """What `register_webhooks` applied, so it can be removed again."""

    name: str
    kinds: tuple[str, ...]

    def delete(self, cluster: Cluster) -> None:
        for kind in self.kinds:
            cluster.kubectl("delete", kind.lower(), self.name, "--ignore-not-found")


def register_webhooks(
    cluster: Cluster,
    validate_url: str | None,
    mutate_url: str | None,
    ca_bundle_pem: bytes,
    *,
    name: str = "dragate-e2e",
    settings: WebhookSettings | None = None,
) -> WebhookRegistration:
    """Apply the webhook configurations. They take a moment to reach the admission chain:
    follow with `wait_until_webhook_fires`."""
    objects = webhook_configurations(
        name, validate_url, mutate_url, ca_bundle_pem, settings or WebhookSettings()
    )
    manifest = {"apiVersion": "v1", "kind": "List", "items": objects}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    return WebhookRegistration(name, tuple(str(obj["kind"]) for obj in objects))


def wait_until_webhook_fires(
    probe: Callable[[], bool], timeout: float = 30.0, interval: float = 0.5
) -> None:
    """Retry `probe` (e.g. a server-side dry-run that looks for the webhook's warning or
    denial) until it returns True; configurations reach the apiserver's admission chain
    asynchronously. Raises TimeoutError."""
    wait_for(probe, timeout=timeout, interval=interval, what="the webhook to fire")


StartWebhook = Callable[..., WebhookServer]
"""The `start_webhook` fixture: (command, *, name, ready_path, env, timeout) -> WebhookServer."""
RegisterWebhooks = Callable[..., WebhookRegistration]
"""The `register_webhooks` fixture: (validate_url, mutate_url, ca_bundle_pem, *, name,
**WebhookSettings fields) -> WebhookRegistration."""
