"""`dragate migrate --write` in documents per second, against a plain ruamel.yaml round trip.

Two corpora of commented manifests, as teams keep them in git:

* `all-legacy`: every document is a GPU workload that must be rewritten (Deployments,
  Jobs, StatefulSets and CronJobs asking for `nvidia.com/gpu` or a MIG slice): the worst case.
* `mix`: a repository where 10% of the documents are GPU workloads, among CPU Deployments,
  Services, ConfigMaps, Ingresses and ServiceAccounts that stay byte-identical.

Both sides read and write the same files; each repeat times migrate and then the round trip on
fresh copies, and the figures are the medians over the repeats (the ratio: the median of each
repeat's ratio, migrate's speed over the round trip's). Each repeat also times `dragate migrate
--check` on the tree migrate just wrote: the CI gate's steady state, a repository already
migrated, where nothing changes, and `dragate check` and `dragate lint` reading the corpus
(exit 0 or 1, findings; an error fails the bench).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from timing import timed

from webhook.cli import main as cli_main
from webhook.cli.migrate import command as migrate_command

CORPORA = ("all-legacy", "mix")
REPEATS = 3

DEPLOYMENT_GPU = """\
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
"""
JOB_MIG = """\
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
"""
STATEFULSET_GPU = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}-serve   # inference, one GPU per replica
  namespace: ml-serving
spec:
  serviceName: {name}-serve
  replicas: 2
  selector: {{matchLabels: {{app: {name}-serve}}}}
  template:
    metadata: {{labels: {{app: {name}-serve}}}}
    spec:
      containers:
      - name: server
        image: "registry.example.com/ml/serve:2.{index}"
        ports: [{{containerPort: 8000}}]
        resources:
          requests: {{cpu: "4", nvidia.com/gpu: 1}}
          limits: {{nvidia.com/gpu: 1}}
"""
CRONJOB_GPU = """\
# nightly fine-tuning
apiVersion: batch/v1
kind: CronJob
metadata: {{name: {name}-nightly, namespace: ml-research}}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: tune
            image: registry.example.com/ml/tune:0.{index}
            resources:
              limits:
                nvidia.com/gpu: 4   # a whole node
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: web
spec:
  ports:
  - {{port: 80, targetPort: 8080}}   # http
  selector: {{app: {name}}}
"""
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}-config, namespace: web}}
data:
  config.yaml: |
    workers: 4
    # a comment inside a literal block
"""
DEPLOYMENT_CPU = """\
# {name}: web frontend ({index})
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: web
  labels: {{app: {name}}}
spec:
  replicas: 3   # scaled by the HPA
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web/{name}:1.{index}
        ports: [{{containerPort: 8080}}]
        resources:
          requests: {{cpu: 250m, memory: 256Mi}}
          limits: {{memory: 512Mi}}
"""
INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: {name}, namespace: web}}
spec:
  rules:
  - host: {name}.example.com
    http:
      paths:
      - {{path: /, pathType: Prefix, backend: {{service: {{name: {name}, port: {{number: 80}}}}}}}}
"""
SERVICE_ACCOUNT = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}   # used by the web pods
  namespace: web
"""

ALL_DOCUMENTS = (
    DEPLOYMENT_GPU,
    JOB_MIG,
    STATEFULSET_GPU,
    CRONJOB_GPU,
    SERVICE,
    CONFIGMAP,
    DEPLOYMENT_CPU,
    INGRESS,
    SERVICE_ACCOUNT,
)
FILES: dict[str, tuple[tuple[str, ...], ...]] = {
    "all-legacy": ((DEPLOYMENT_GPU, JOB_MIG, STATEFULSET_GPU, CRONJOB_GPU),),
    # 10 documents, one of them a GPU workload (a Deployment or, every other group, a Job)
    "mix": (
        (DEPLOYMENT_GPU, SERVICE),
        (DEPLOYMENT_CPU, SERVICE, CONFIGMAP),
        (DEPLOYMENT_CPU, SERVICE, INGRESS),
        (CONFIGMAP, SERVICE_ACCOUNT),
    ),
}


def _group(corpus: str, index: int) -> list[list[str]]:
    """One group of files, as lists of documents, for the `index`th group of `corpus`."""
    files = [list(docs) for docs in FILES[corpus]]
    if corpus == "mix" and index % 2:
        files[0][0] = JOB_MIG
    return files


def write_tree(directory: Path, documents: int, corpus: str = "all-legacy") -> int:
    """Files holding about `documents` documents; returns how many documents were written."""
    directory.mkdir(parents=True, exist_ok=True)
    per_group = sum(len(f) for f in FILES[corpus])
    written = 0
    for index in range(max(1, documents // per_group)):
        name = f"app-{index:05d}"
        for number, docs in enumerate(_group(corpus, index)):
            text = "---\n".join(d.format(name=name, index=index) for d in docs)
            (directory / f"{name}-{number}.yaml").write_text(text)
            written += len(docs)
    return written


def migrate(directory: Path) -> None:
    """The real command, in this process (stdout/stderr discarded)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        migrate_command.main(["--write", str(directory)], standalone_mode=False)


def check(directory: Path) -> None:
    """`dragate migrate --check`: exit 0 on a migrated tree (anything else is a bench bug)."""
    code = _cli(["migrate", "--check", str(directory)])
    assert code == 0, f"migrate --check on a migrated tree: exit {code}"


def reading(command: str) -> Callable[[Path], None]:
    """`dragate check` or `dragate lint` on a tree: exit 0 or 1 (findings), never an error."""

    def run(directory: Path) -> None:
        code = _cli([command, str(directory)])
        assert code in (0, 1), f"dragate {command}: exit {code}"

    return run


def _cli(args: list[str]) -> int:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        try:
            cli_main.main(args, standalone_mode=False)
        except SystemExit as exit_:
            return int(exit_.code or 0)
    return 0


def round_trip(directory: Path) -> None:
    """What any comment-keeping tool pays: ruamel.yaml load_all + dump_all, per file."""
    yaml = YAML()
    for path in sorted(directory.glob("*.yaml")):
        documents = list(yaml.load_all(path.read_text()))
        out = io.StringIO()
        yaml.dump_all(documents, out)
        path.write_text(out.getvalue())


def measure(tmp: Path, documents: int, corpus: str, repeats: int = REPEATS) -> dict[str, Any]:
    """Medians over `repeats` of migrate and the round trip, timed on fresh copies."""
    source = tmp / f"src-{corpus}-{documents}"
    count = write_tree(source, documents, corpus)
    seconds: dict[str, list[float]] = {
        "migrate": [],
        "ruamel_round_trip": [],
        "check_migrated": [],
        "check": [],
        "lint": [],
    }
    for _ in range(repeats):
        for name in ("check", "lint"):
            seconds[name].append(timed(lambda n=name: reading(n)(source)))  # type: ignore[misc]
        for name, work in (("migrate", migrate), ("ruamel_round_trip", round_trip)):
            copy = tmp / f"{name}-{corpus}-{documents}"
            shutil.copytree(source, copy)
            seconds[name].append(timed(lambda w=work, c=copy: w(c)))  # type: ignore[misc]
            if name == "migrate":
                seconds["check_migrated"].append(timed(lambda c=copy: check(c)))  # type: ignore[misc]
            shutil.rmtree(copy)
    shutil.rmtree(source)
    results: dict[str, Any] = {"corpus": corpus, "documents": count, "repeats": repeats}
    for name, values in seconds.items():
        results[f"{name}_s"] = round(statistics.median(values), 3)
        results[f"{name}_docs_per_s"] = round(count / statistics.median(values), 1)
    ratios = [r / m for m, r in zip(seconds["migrate"], seconds["ruamel_round_trip"], strict=True)]
    results["ratio"] = round(statistics.median(ratios), 3)
    return results


def curve(tmp: Path, sizes: tuple[int, ...], repeats: int = REPEATS) -> list[dict[str, Any]]:
    """Both corpora at every size: one row per (corpus, size)."""
    write_tree(tmp / "warm", 8)
    migrate(tmp / "warm")  # imports and caches, not measured
    return [measure(tmp, n, corpus, repeats) for corpus in CORPORA for n in sizes]
