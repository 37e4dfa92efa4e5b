"""The Helm chart's own webhook configurations, rendered with `helm template` in url mode, for
benchmarks that must call a webhook exactly as a chart install would (rules, matchConditions,
failure policies, timeouts), scoped to the namespaces they measure."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from .cluster import Cluster
from .webhooks import WebhookObject, WebhookRegistration

CHART = Path(__file__).resolve().parents[2] / "charts" / "dragate"
KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def render(
    helm: Path,
    release: str,
    url: str,
    ca_bundle_pem: bytes,
    *,
    mutating: bool = True,
    settings: Sequence[str] = (),
) -> list[WebhookObject]:
    """charts/dragate's webhook configurations for a webhook served at `url` (url mode: no
    Deployment), named `release`; `settings` are more `--set`s."""
    sets = [
        "deployment.enabled=false",
        f"webhook.url={url}",
        f"webhook.caBundle={base64.b64encode(ca_bundle_pem).decode()}",
        f"webhook.mutating.enabled={str(mutating).lower()}",
        *settings,
    ]
    command = [str(helm), "template", release, str(CHART), "--namespace", release,
               "--show-only", "templates/webhooks.yaml",
               *(arg for value in sets for arg in ("--set", value))]  # fmt: skip
    rendered = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc and doc.get("kind") in KINDS]


def scoped(objects: Sequence[WebhookObject], labels: Mapping[str, str]) -> list[WebhookObject]:
    """The same configurations, each webhook also requiring namespaces with `labels` (the
    chart's own exclusions kept)."""
    out = []
    for obj in objects:
        copy: WebhookObject = json.loads(json.dumps(obj))
        for webhook in copy["webhooks"]:  # type: ignore[attr-defined]
            selector = webhook.setdefault("namespaceSelector", {})
            selector["matchLabels"] = {**selector.get("matchLabels", {}), **labels}
        out.append(copy)
    return out


def apply(cluster: Cluster, objects: Sequence[WebhookObject]) -> WebhookRegistration:
    """Apply rendered configurations (all of one name); delete them with `.delete(cluster)`."""
    manifest = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    names = {str(obj["metadata"]["name"]) for obj in objects}  # type: ignore[index]
    assert len(names) == 1, names
    return WebhookRegistration(names.pop(), tuple(str(obj["kind"]) for obj in objects))
