"""A repository as people keep one: manifests beside a Helm chart, package.json and CI files.

`dragate lint`, `check` and `migrate` walk such a tree; the files that are no Kubernetes object
must be skipped and counted, not refused.
"""

from __future__ import annotations

from pathlib import Path

FOREIGN = {
    "charts/gpu/Chart.yaml": "apiVersion: v2\nname: gpu\nversion: 0.1.0\n",
    "charts/gpu/values.yaml": "replicas: 1\nresources:\n  limits:\n    nvidia.com/gpu: 1\n",
    "charts/gpu/values-prod.yaml": "replicas: 3\n",
    "charts/gpu/templates/deployment.yaml": (
        "{{- if .Values.enabled }}\napiVersion: apps/v1\nkind: Deployment\n"
        "metadata:\n  name: {{ .Release.Name }}\n{{- end }}\n"
    ),
    "package.json": '{"name": "site", "version": "1.0.0"}\n',
    "ports.json": "[8080, 8443]\n",
    "kustomization.yaml": "resources:\n- deploy/claim.yaml\n",
    ".github/workflows/ci.yml": "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
    ".gitlab-ci.yml": "stages: [test]\ntest:\n  script: [make test]\n",
    ".pre-commit-config.yaml": "repos:\n- repo: local\n  hooks: []\n",
}
"""Files a walk skips: each holds no Kubernetes object (path -> text)."""

WALKED_FOREIGN = [name for name in FOREIGN if not name.startswith(".github/")]
"""The foreign files a walk reads and counts as skipped: `.github/` is a hidden directory,
never entered."""

CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: one-gpu
  namespace: team-a
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: {device_class}
"""

FLAT_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: flat
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.nvidia.com
"""
"""A claim in the v1beta1 shape under v1: a `request-shape` lint error, denied by `check`
(the pipeline cannot read it)."""

LEGACY_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: legacy
spec:
  containers:
  - name: main
    image: cuda
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def repository(root: Path, device_class: str = "gpu.nvidia.com") -> Path:
    """The foreign files and one clean claim in `deploy/claim.yaml`."""
    return write(root, {**FOREIGN, "deploy/claim.yaml": CLAIM.format(device_class=device_class)})


DEVICE_CLASSES = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: mig.nvidia.com
"""
"""The NVIDIA driver's classes, as a snapshot (`--state`) or among the inputs."""

TYPO_TENANT = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata:
  name: team-a
spec:
  namespaces: [team-a]
  allowedDeviceClasses: [gpu.nvdia.com]
"""

TYPO_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
  namespace: elsewhere
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - name: big
          deviceClassName: gpu.nvdia.com
"""
