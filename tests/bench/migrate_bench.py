"""`dragate migrate --write` in documents per second, against a plain ruamel.yaml round trip.

The manifests are what teams keep in git: commented Deployments and Jobs asking for
`nvidia.com/gpu`, next to Services and ConfigMaps that stay byte-identical. Both sides read
and write the same files; the ratio is migrate's speed over the round trip's.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from timing import timed

from webhook.cli.migrate import command as migrate_command

DOCS_PER_FILE = 4
MANIFEST = """\
# {name}: training job owned by team ml ({index})
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: ml-research   # quota: ml-research
  labels: {{app: {name}, tier: "gpu"}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB   # translated to a CEL selector
      containers:
      - name: trainer
        image: registry.example.com/ml/trainer:1.{index}
        args: ["--epochs", "10"]
        resources:
          limits:
            nvidia.com/gpu: 2    # two whole GPUs
            memory: 64Gi
      - name: sidecar
        image: registry.example.com/ml/metrics:1.0
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: ml-research
spec:
  ports:
  - {{port: 80, targetPort: 8080}}   # http
  selector: {{app: {name}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}-eval
  namespace: ml-research
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: eval
        image: registry.example.com/ml/eval:1.{index}
        resources:
          limits: {{nvidia.com/mig-1g.10gb: 1}}   # one MIG slice
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}-config, namespace: ml-research}}
data:
  config.yaml: |
    epochs: 10
    # a comment inside a literal block
"""


def write_tree(directory: Path, documents: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(max(1, documents // DOCS_PER_FILE)):
        name = f"job-{index:05d}"
        (directory / f"{name}.yaml").write_text(MANIFEST.format(name=name, index=index))
    return directory


def migrate(directory: Path) -> None:
    """The real command, in this process (stdout/stderr discarded)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        migrate_command.main(["--write", str(directory)], standalone_mode=False)


def round_trip(directory: Path) -> None:
    """What any comment-keeping tool pays: ruamel.yaml load_all + dump_all, per file."""
    yaml = YAML()
    for path in sorted(directory.glob("*.yaml")):
        documents = list(yaml.load_all(path.read_text()))
        out = io.StringIO()
        yaml.dump_all(documents, out)
        path.write_text(out.getvalue())


def measure(tmp: Path, documents: int) -> dict[str, Any]:
    source = write_tree(tmp / f"src-{documents}", documents)
    count = len(list(source.glob("*.yaml"))) * DOCS_PER_FILE
    results: dict[str, Any] = {"documents": count}
    for name, work in (("migrate", migrate), ("ruamel_round_trip", round_trip)):
        copy = tmp / f"{name}-{documents}"
        shutil.copytree(source, copy)
        seconds = timed(lambda w=work, c=copy: w(c))  # type: ignore[misc]
        results[f"{name}_s"] = round(seconds, 3)
        results[f"{name}_docs_per_s"] = round(count / seconds, 1)
        shutil.rmtree(copy)
    baseline = results["ruamel_round_trip_docs_per_s"]
    results["ratio"] = round(results["migrate_docs_per_s"] / baseline, 3)
    return results


def curve(tmp: Path, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    migrate(write_tree(tmp / "warm", 8))  # imports and caches, not measured
    return [measure(tmp, n) for n in sizes]
