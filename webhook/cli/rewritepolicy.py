"""`dragate rewrite-policy`: the legacy rewrite as a MutatingAdmissionPolicy, to apply from git.

Prints the policy, its binding and the ResourceClaimTemplates it names (one document each,
ready for `kubectl apply -f -`), generated from the policy directory's LegacyResourceMappings
and Tenants (webhook/rewrite/admissionpolicy.py says which Pods it takes). The webhook stays
in place for every other Pod. Exit 0 with the documents, 1 when the policies leave nothing the
policy could rewrite (no document printed), 2 on bad input. With `--check FILE` (a rendering
kept in git) it prints nothing and exits 1 when FILE is not what it would print now, naming
each object missing, changed or no longer generated: the CI gate after a change to tenants or
mappings. The policy and binding are written in the `admissionregistration.k8s.io` version
the target minor (`--kube-version`, default the newest) serves: v1 from 1.36, v1beta1 in 1.35.
"""

from __future__ import annotations

import json
import sys

import click
from ruamel.yaml import YAML

from webhook.cli import exits
from webhook.cli.inputs import (
    POLICIES_OPTION,
    kube_version_option,
    policy_set,
    snapshot,
    state_option,
)
from webhook.files.manifests import read_manifests
from webhook.policy.target import kube_version
from webhook.rewrite.admissionpolicy import (
    MAX_COUNT,
    NAME,
    RewritePolicy,
    api_version_for,
    rewrite_policy,
)
from webhook.rewrite.mappings import native_resources
from webhook.types import Object
from webhook.types.kubeversions import NEWEST, SUPPORTED

NOTHING = (
    "dragate: nothing to rewrite in the API server: no resource mapped by exact name without "
    "a selector whose action is Rewrite, or no tenant listing a namespace that rewrites"
)


@click.command("rewrite-policy")
@POLICIES_OPTION
@state_option("Cluster objects; a DeviceClass serving a resource natively keeps it off the policy.")
@click.option(
    "--exempt-user",
    "exempt_users",
    multiple=True,
    metavar="USER",
    help="A username whose Pods are never rewritten, e.g. the webhook's service account (repeat).",
)
@click.option(
    "--max-count",
    default=MAX_COUNT,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Most devices per container the policy rewrites (one template per count).",
)
@kube_version_option(
    f"Kubernetes minor the cluster runs ({', '.join(SUPPORTED)}; default {NEWEST}): the policy is"
    " written in admissionregistration.k8s.io/v1 from 1.36, v1beta1 for 1.35."
)
@click.option("--name", default=NAME, show_default=True, help="The policy's and binding's name.")
@click.option(
    "-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True
)
@click.option(
    "--check",
    "check_file",
    metavar="FILE",
    help="Print nothing; exit 1 when FILE (YAML or JSON) is not what would be printed now.",
)
def command(  # noqa: PLR0917  (click passes options by keyword)
    policies_dir: str | None, state_file: str | None, exempt_users: tuple[str, ...],
    max_count: int, name: str, output: str, check_file: str | None,
) -> None:  # fmt: skip
    """Print the MutatingAdmissionPolicy that rewrites legacy GPU Pods in the API server."""
    policies = policy_set(policies_dir)
    native = native_resources(snapshot(state_file).device_classes().values())
    made = rewrite_policy(
        policies, native_resources=native, exempt_users=frozenset(exempt_users),
        name=name, max_count=max_count, api_version=api_version_for(kube_version()),
    )  # fmt: skip
    if check_file is not None:
        sys.exit(_check(check_file, made))
    if made is None:
        click.echo(NOTHING, err=True)
        sys.exit(exits.FINDINGS)
    documents = [*made.objects, *made.templates]
    if output == "json":
        listed = {"apiVersion": "v1", "kind": "List", "items": documents}
        click.echo(json.dumps(listed, indent=2))
    else:
        yaml = YAML(typ="safe", pure=True)
        yaml.default_flow_style = False
        yaml.width = 4096  # the CEL stays on one line per expression
        yaml.dump_all(documents, sys.stdout)
    sys.exit(exits.OK)


def _check(path: str, made: RewritePolicy | None) -> int:
    """Each object of `path` against what would be printed, by kind, namespace and name."""
    found = read_manifests([path])
    for problem in found.problems:
        click.echo(f"error: {problem}", err=True)
    if found.problems:
        return exits.BAD_INPUT
    committed = {_identity(d.data): d.data for d in found.documents}
    generated = [*made.objects, *made.templates] if made is not None else []
    wanted = {_identity(o): json.loads(json.dumps(o)) for o in generated}
    stale = [f"{path}: {key} is missing" for key in wanted if key not in committed]
    stale += [f"{path}: {key} differs" for key in wanted if key in committed
              and committed[key] != wanted[key]]  # fmt: skip
    stale += [f"{path}: {key} is no longer generated" for key in committed if key not in wanted]
    for line in stale:
        click.echo(line, err=True)
    if stale:
        click.echo(
            f"dragate: {path} is stale; regenerate it with `dragate rewrite-policy`", err=True
        )
    return exits.FINDINGS if stale else exits.OK


def _identity(obj: Object) -> str:
    metadata = obj.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj.get('kind')} {where}{metadata.get('name')}"
