"""`kubectl dragate`: the kubectl plugin (console script `kubectl-dragate`) that explains
quota and Pending Pods from live cluster state.

`usage` shows each tenant's quota as the ledger holds it; `why POD` says what keeps a Pod
from running, `why resourceclaim/NAME` what a claim is allocated to or why it cannot be, each
line citing the object behind it. Both read only (GET requests through
`KubeApi`), with the kubeconfig and context kubectl would use.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from webhook.cli.clusterfacts import ClusterFacts
from webhook.cli.refusals import explain_workload
from webhook.cli.usagerows import UsageRow, holders_text, usage_rows
from webhook.cli.why import explain, explain_claim, pod_tenant
from webhook.cli.whyfindings import Finding
from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.policy.schema import PolicyError

NAME = "kubectl-dragate"
POLICIES = click.option(
    "--policies",
    "policy_paths",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="read Tenant quotas from these files or folders, not from the cluster",
)
USAGE_COLUMNS = ("TENANT", "CLASS", "LIMIT", "USED", "PENDING", "FREE", "TOP HOLDERS")


@dataclass
class Target:
    """The cluster and namespace a command looks at; the API made when first needed."""

    make_api: Callable[[], KubeApi]
    namespace: str | None  # -n; None: the context's
    all_namespaces: bool
    output: str
    context_namespace: Callable[[], str]

    def facts(self, policies: Sequence[Path] = ()) -> ClusterFacts:
        return ClusterFacts(self.make_api(), policies)

    def current_namespace(self) -> str:
        return self.namespace or self.context_namespace()


TARGET_OPTIONS = (
    click.option("--kubeconfig", type=click.Path(dir_okay=False), help="kubeconfig file"),
    click.option("--context", help="kubeconfig context to use"),
    click.option("-n", "--namespace", help="the namespace (default: the context's)"),
    click.option("-A", "--all-namespaces", is_flag=True, help="every tenant"),
    click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]),
                 default="table", help="human table (default), or json / yaml"),
)  # fmt: skip


def target_options(command: Callable[..., None]) -> Callable[..., None]:
    """kubectl's flags, on each subcommand: `kubectl dragate why POD -n NS` as kubectl reads
    it; they become the `Target` the command gets."""

    def run(
        ctx: click.Context,
        *,
        kubeconfig: str | None,
        context: str | None,
        namespace: str | None,
        all_namespaces: bool,
        output: str,
        **rest: Any,
    ) -> None:
        target = Target(
            lambda: KubeApi.from_kubeconfig(kubeconfig, context), namespace, all_namespaces,
            output, lambda: KubeApi.kubeconfig_namespace(kubeconfig, context),
        )  # fmt: skip
        if ctx.obj is not None:  # a test's API
            target.make_api, target.context_namespace = lambda: ctx.obj, lambda: "default"
        command(target, **rest)

    run.__doc__ = command.__doc__
    decorated: Callable[..., None] = click.pass_context(run)
    for option in reversed(TARGET_OPTIONS):
        decorated = option(decorated)
    return decorated


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """kubectl dragate: dragate's quota and Pending Pods, explained from the cluster."""


@main.command("usage")
@click.argument("tenant", required=False)
@POLICIES
@target_options
def usage(target: Target, tenant: str | None, policy_paths: tuple[Path, ...]) -> None:
    """Per tenant and class: limit, used, pending, free and the largest holders."""
    facts = target.facts(policy_paths)
    with _reading():
        rows = [
            r for t in _tenants(facts, target, tenant) for r in usage_rows(t, facts.records(t.name))
        ]
    if target.output != "table":
        _dump([r.as_json() for r in rows], target.output)
        return
    click.echo(_table([USAGE_COLUMNS, *(_usage_cells(r) for r in rows)]), nl=False)


def _tenants(facts: ClusterFacts, target: Target, name: str | None) -> list[Any]:
    """TENANT when named; with -n (and no -A), the namespace's tenant; else every tenant."""
    if name is None and target.namespace and not target.all_namespaces:
        found = pod_tenant(facts, target.namespace)
        return [found] if found is not None else []
    tenants = facts.policies().tenants
    chosen = [t for t in tenants if name is None or t.name == name]
    if name is not None and not chosen:
        raise click.ClickException(
            f"no Tenant {name!r} (known: {', '.join(t.name for t in tenants) or 'none'})"
        )
    return sorted(chosen, key=lambda t: t.name)


def _usage_cells(row: UsageRow) -> tuple[str, ...]:
    free = "-" if row.free is None else str(row.free)
    limit = "-" if row.limit is None else str(row.limit)
    return (row.tenant, row.device_class, limit, str(row.used), str(row.pending), free,
            holders_text(row.holders))  # fmt: skip


@main.command("why")
@click.argument("name", required=False)
@click.option("--claim", help="explain this ResourceClaim (same as resourceclaim/NAME)")
@POLICIES
@target_options
def why(target: Target, name: str | None, claim: str | None,
        policy_paths: tuple[Path, ...]) -> None:  # fmt: skip
    """Why POD is Pending, or why a ResourceClaim (resourceclaim/NAME, --claim) is not
    allocated: quota, claims and their feasibility, the scheduler's own word."""
    kind, found_name = _why_target(name, claim)
    facts = target.facts(policy_paths)
    namespace = target.current_namespace()
    with _reading():
        findings = _why_findings(facts, kind, namespace, found_name)
    if target.output != "table":
        _dump([f.as_json() for f in findings], target.output)
        return
    click.echo("".join(_finding_text(f) for f in findings), nl=False)


KINDS = {
    **dict.fromkeys(("resourceclaim", "resourceclaims", "resourceclaim.resource.k8s.io"),
                    "ResourceClaim"),
    **dict.fromkeys(("pod", "pods", "po", ""), "Pod"),
    **dict.fromkeys(("deployment", "deployments", "deploy"), "Deployment"),
    **dict.fromkeys(("replicaset", "replicasets", "rs"), "ReplicaSet"),
    **dict.fromkeys(("job", "jobs"), "Job"),
    **dict.fromkeys(("statefulset", "statefulsets", "sts"), "StatefulSet"),
    **dict.fromkeys(("daemonset", "daemonsets", "ds"), "DaemonSet"),
}  # fmt: skip
"""The kinds `why` explains, by every name kubectl reads for them."""


def _why_target(name: str | None, claim: str | None) -> tuple[str, str]:
    """(kind, name) from `POD`, `pod/NAME`, `resourceclaim/NAME`, `--claim NAME`, or a
    workload that creates Pods (`replicaset/NAME`, `job/NAME`...), the forms kubectl reads."""
    if (name is None) == (claim is None):
        raise click.UsageError("name one Pod (POD or pod/NAME), one claim (resourceclaim/NAME) "
                               "or one workload (replicaset/NAME, job/NAME)")  # fmt: skip
    if claim is not None:
        return "ResourceClaim", claim
    kind, _, rest = str(name).rpartition("/")
    if kind.lower() not in KINDS:
        known = "deployment, replicaset, job, statefulset, daemonset"
        raise click.UsageError(f"{kind!r}: why explains a pod, a resourceclaim or a workload "
                               f"that creates Pods ({known})")  # fmt: skip
    return KINDS[kind.lower()], rest


def _why_findings(facts: ClusterFacts, kind: str, namespace: str, name: str) -> list[Finding]:
    read = {"ResourceClaim": facts.claim, "Pod": facts.pod}.get(kind)
    found = read(namespace, name) if read else facts.workload(kind, namespace, name)
    if found is None:
        raise click.ClickException(f"{kind} {namespace}/{name} not found")
    if kind == "ResourceClaim":
        return explain_claim(facts, found)
    return explain(facts, found) if kind == "Pod" else explain_workload(facts, kind, found)


def _finding_text(finding: Finding) -> str:
    return f"{finding.cause}: {finding.message}\n    ({finding.source})\n"


class _reading:
    """API and policy errors as one line and exit 1, never a traceback."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        if isinstance(error, ApiError | Unreachable | PolicyError):
            raise click.ClickException(str(error)) from error


def _dump(data: list[dict[str, object]], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


def _table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded as `kubectl get` pads them: three spaces after the widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    return "".join(line + "\n" for line in lines)


def entry() -> None:
    """The `kubectl-dragate` console script: kubectl runs it as `kubectl dragate`."""
    main(prog_name="kubectl dragate")


if __name__ == "__main__":  # the krew launcher: python3 -m webhook.cli.kubectlplugin
    entry()
