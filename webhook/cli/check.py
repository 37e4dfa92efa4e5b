"""`dragate check`: what would the cluster say to these manifests? (the CI gate)

Each object goes through the webhook's own pipeline in order — mutate, then validate the
mutated object — and admitted objects count toward quota for the ones after them, as they
would if applied one by one. DeviceClasses among the manifests join the snapshot's before any
object is judged, so a claim naming a class that exists in neither is warned about wherever
the class stands. A directory is walked as `webhook.files.manifests.walk` walks it:
files there that hold no Kubernetes object are skipped and counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from webhook.assembly import offline_context
from webhook.cli import exits
from webhook.cli.inputs import (
    EXCLUDE_OPTION,
    KUBE_VERSION_OPTION,
    POLICIES_OPTION,
    UsageError,
    policy_set,
    policy_set_in,
    snapshot,
    state_option,
)
from webhook.cli.report import RENDERERS, Row
from webhook.files.manifests import STDIN, read_manifests
from webhook.files.yamlio import Document
from webhook.kube.snapshot import SnapshotState
from webhook.lint import Known
from webhook.lint.objects import POLICY_API_VERSION
from webhook.lint.rules.deviceclasses import check_class_names
from webhook.pipeline import Context, admit, request_from_object
from webhook.policy.policysets import nearest_policy_dir
from webhook.types import Action, Object, PolicySet


@click.command("check")
@KUBE_VERSION_OPTION
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
@EXCLUDE_OPTION
@click.argument("manifests", nargs=-1, required=True, metavar="MANIFEST...")
def command(  # noqa: PLR0917  (click passes options by keyword)
    policies_dir: str | None,
    state_file: str | None,
    namespace: str,
    output: str,
    exclude: tuple[str, ...],
    manifests: tuple[str, ...],
) -> None:
    """Admit each object in MANIFEST... as the webhook would and print the verdicts.

    A directory is searched recursively for *.yaml, *.yml, *.json; files there that hold no
    Kubernetes object are skipped. Without --policies, the policies are those of the nearest
    directory above the manifests that holds policy files, else the built-in examples. Exit 0
    when all are allowed (under a Warn or Audit policy too), 1 when some are denied, 2 on bad
    input.
    """
    policies = policy_set(policies_dir) if policies_dir else _nearest_policies(manifests)
    state = snapshot(state_file)
    context = offline_context(lambda: policies, state)
    found = read_manifests(manifests, exclude=exclude, skip_foreign=True)
    for doc in found.documents:
        if doc.data.get("kind") == "DeviceClass":
            state.add(doc.data)
    for problem in found.problems:  # before the table: a file not judged is read first
        click.echo(f"error: {problem}", err=True)
    rows = [_admit(doc, context, state, namespace) for doc in found.documents]
    click.echo(RENDERERS[output](rows), nl=False)
    if found.skipped:
        click.echo(_skipped(len(found.skipped)), err=output != "text")
    sys.exit(_exit_code(rows, bool(found.problems)))


BUILT_IN = "built-in example policies (give --policies DIR for your own)"


def _nearest_policies(manifests: tuple[str, ...]) -> PolicySet:
    """The set of the nearest policy directory above the manifests, as `lint` groups policy
    files, else the built-in examples; stderr says which. Manifests below two different
    policy directories (two clusters) are a usage error: which cluster is meant is unsaid."""
    found = {nearest_policy_dir(_start(Path(m))) for m in manifests if m != STDIN}
    if len(found) > 1:
        listed = ", ".join(sorted(str(d or "none") for d in found))
        raise UsageError(
            f"the manifests lie below different policy directories ({listed}); give --policies DIR"
        )
    directory = next(iter(found), None)
    if directory is None:
        click.echo(f"dragate: no --policies: judged with the {BUILT_IN}", err=True)
        return policy_set(None)
    click.echo(f"dragate: no --policies: judged with the policies in {directory}", err=True)
    return policy_set_in(directory)


def _start(manifest: Path) -> Path:
    return manifest if manifest.is_dir() else manifest.parent


def _skipped(count: int) -> str:
    return f"{count} file{'' if count == 1 else 's'} skipped: not Kubernetes objects"


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
        warnings=(*applied.warnings, *_policy_warnings(doc.data, state)),
        patched=applied.mutation.patched,
        tenant=decision.tenant or applied.mutation.decision.tenant,
        source=str(doc.source),
        audit=tuple(str(v.reason) for v in decision.violations if v.mode == Action.AUDIT),
        modes=tuple(dict.fromkeys(v.mode.value.lower() for v in decision.violations)),
    )


def _policy_warnings(obj: Object, state: SnapshotState) -> tuple[str, ...]:
    """A dragate policy among the manifests that names a DeviceClass that does not exist.

    The webhook does not review policies; claims and templates are warned by the pipeline.
    """
    if obj.get("apiVersion") != POLICY_API_VERSION:
        return ()
    known = Known(frozenset(state.device_classes()))
    return tuple(
        f"dragate: {f.dotted_path()}: {f.message} ({f.fix})" for f in check_class_names(obj, known)
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
