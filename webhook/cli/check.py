"""`dragate check`: what would the cluster say to these manifests? (the CI gate)

Each object goes through the webhook's own pipeline in order — mutate, then validate the
mutated object — and admitted objects count toward quota for the ones after them, as they
would if applied one by one.
"""

from __future__ import annotations

import sys

import click

from webhook.assembly import offline_context
from webhook.cli import exits
from webhook.cli.inputs import POLICIES_OPTION, policy_set, snapshot, state_option
from webhook.cli.report import RENDERERS, Row
from webhook.files.manifests import read_manifests
from webhook.files.yamlio import Document
from webhook.kube.snapshot import SnapshotState
from webhook.pipeline import Context, admit, request_from_object
from webhook.types import Action, Object


@click.command("check")
@POLICIES_OPTION
@state_option("Snapshot of cluster objects (Namespaces, claims, classes, slices).")
@click.option(
    "--namespace",
    "-n",
    default="default",
    show_default=True,
    help="Namespace for objects that name none.",
)
@click.option(
    "-o", "--output", type=click.Choice(sorted(RENDERERS)), default="text", show_default=True
)
@click.argument("manifests", nargs=-1, required=True, metavar="MANIFEST...")
def command(
    policies_dir: str | None,
    state_file: str | None,
    namespace: str,
    output: str,
    manifests: tuple[str, ...],
) -> None:
    """Admit each object in MANIFEST... as the webhook would and print the verdicts.

    Exit 0 when all are allowed (under a Warn or Audit policy too), 1 when some are denied,
    2 on bad input.
    """
    policies = policy_set(policies_dir)
    state = snapshot(state_file)
    context = offline_context(lambda: policies, state)
    found = read_manifests(manifests)
    rows = [_admit(doc, context, state, namespace) for doc in found.documents]
    click.echo(RENDERERS[output](rows), nl=False)
    for problem in found.problems:
        click.echo(f"error: {problem}", err=True)
    sys.exit(_exit_code(rows, bool(found.problems)))


def _admit(doc: Document, context: Context, state: SnapshotState, namespace: str) -> Row:
    request = request_from_object(doc.data, namespace=namespace)
    applied = admit(request, context)
    if applied.decision.allowed:
        state.add(_with_namespace(applied.final, request.namespace))
    decision = applied.decision
    return Row(
        kind=request.kind,
        namespace=request.namespace,
        name=request.name,
        allowed=decision.allowed,
        reasons=tuple(str(r) for r in decision.reasons),
        warnings=applied.warnings,
        patched=applied.mutation.patched,
        tenant=decision.tenant or applied.mutation.decision.tenant,
        source=str(doc.source),
        audit=tuple(str(v.reason) for v in decision.violations if v.mode == Action.AUDIT),
        modes=tuple(dict.fromkeys(v.mode.value.lower() for v in decision.violations)),
    )


def _with_namespace(obj: Object, namespace: str) -> Object:
    metadata = dict(obj.get("metadata") or {})
    if namespace and obj.get("kind") not in {"Namespace", "DeviceClass", "ResourceSlice"}:
        metadata.setdefault("namespace", namespace)
    return {**obj, "metadata": metadata}


def _exit_code(rows: list[Row], bad_input: bool) -> int:
    if bad_input:
        return exits.BAD_INPUT
    return exits.FINDINGS if any(not r.allowed for r in rows) else exits.OK
