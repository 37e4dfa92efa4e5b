"""Rendering the chart in charts/dragate with the real helm binary of the e2e toolchain:
the `helm` runner, the rendered documents, and small readers of what they hold."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dragate"
NAMESPACE = "dragate-system"
RELEASE = "dragate"
FULLNAME = "dragate"  # the release name contains the chart name
CONTROLLER = f"{FULLNAME}-controller"  # the controller role's Deployment, account and roles

Doc = dict[str, Any]


# --- helm ----------------------------------------------------------------------------------------


class Helm:
    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        result = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, timeout=120,
            check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def values_args(self, values: dict[str, Any] | None) -> list[str]:
        if not values:
            return []
        path = self.home / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.json"
        path.write_text(json.dumps(values))
        return ["-f", str(path)]

    def template(self, values: dict[str, Any] | None = None, *extra: str) -> Rendered:
        result = self.run(
            "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
            *self.values_args(values), *extra,
        )  # fmt: skip
        return Rendered([d for d in yaml.safe_load_all(result.stdout) if d])

    def template_error(self, values: dict[str, Any]) -> str:
        result = self.run(
            "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
            *self.values_args(values), check=False,
        )  # fmt: skip
        assert result.returncode != 0, f"expected helm template to fail for {values}"
        return result.stderr


class Rendered:
    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs

    def kinds(self) -> list[str]:
        return sorted(d["kind"] for d in self.docs)

    def all(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def names(self, kind: str) -> list[str]:
        return sorted(d["metadata"]["name"] for d in self.all(kind))

    def one(self, kind: str, name: str | None = None) -> Doc:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
        return found[0]

    def webhook(self) -> Doc:
        """The webhook role's Deployment."""
        return self.one("Deployment", FULLNAME)

    def controller(self) -> Doc:
        """The controller role's Deployment."""
        return self.one("Deployment", CONTROLLER)

    def has(self, kind: str) -> bool:
        return bool(self.all(kind))


URL_MODE = {
    "deployment": {"enabled": False},
    "webhook": {
        "url": "https://192.0.2.10:9443",
        "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
    },
}
NON_DEFAULT = {
    "certs": {"mode": "certManager"},
    "networkPolicy": {"enabled": True, "controlPlaneCIDRs": ["10.0.0.0/16", "172.16.0.0/12"]},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
    "prometheusRule": {"enabled": True},
    "deployment": {"preStopSleepSeconds": 5},
    "controller": {"replicas": 2},
    "serve": {"maxConnections": 3000, "gracefulTimeoutSeconds": 20},
    "webhook": {"replicas": 5, "validating": {"failurePolicy": "Ignore", "timeoutSeconds": 5}},
}


def container(deployment: Doc, name: str = "dragate") -> Doc:
    found: Doc = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                      if c["name"] == name)  # fmt: skip
    return found


def flags(args: list[str]) -> dict[str, str]:
    """`--name=value` arguments as a dict (bare flags map to "")."""
    out = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            out[name] = value
    return out


def webhooks(rendered: Rendered) -> dict[str, Doc]:
    found = {}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in rendered.all(kind):
            for hook in config["webhooks"]:
                found[hook["name"]] = hook
    return found


def rules_of(role: Doc) -> list[tuple[tuple[str, ...], ...]]:
    return sorted(
        tuple(tuple(sorted(rule.get(key, []))) for key in
              ("apiGroups", "resources", "resourceNames", "verbs"))
        for rule in role["rules"]
    )  # fmt: skip
