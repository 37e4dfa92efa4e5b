"""`dragate crds`: the CustomResourceDefinitions dragate ships, for `kubectl apply -f -`.

Prints every CRD as one YAML stream: the policy kinds (Tenant, DeviceClassPolicy,
LegacyResourceMapping, Settings) made from the loader's schema, the PolicyReport and
ClusterPolicyReport CRDs, and the TenantUsage ledger's. `--write DIR` writes them as files
instead (one per CRD, `<plural>.yaml`): how webhook/defaults/crds/ and charts/dragate/crds/
are regenerated after a policy kind changes. Exit 0; 2 when DIR cannot be written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from webhook.cli import exits
from webhook.policy.policycrds import crd_texts


@click.command("crds")
@click.option(
    "--write",
    "folders",
    multiple=True,
    metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write each CRD to DIR/<plural>.yaml instead of printing them (repeat for more).",
)
def command(folders: tuple[Path, ...]) -> None:
    """Print the CRDs of the policy kinds, PolicyReports and the quota ledger."""
    texts = crd_texts()
    if not folders:
        click.echo("---\n".join(texts.values()), nl=False)
        sys.exit(exits.OK)
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in texts.items():
                (folder / name).write_text(text, encoding="utf-8")
        except OSError as err:
            click.echo(f"dragate: cannot write {folder}: {err.strerror or err}", err=True)
            sys.exit(exits.BAD_INPUT)
        click.echo(f"dragate: wrote {len(texts)} CRDs to {folder}", err=True)
    sys.exit(exits.OK)
