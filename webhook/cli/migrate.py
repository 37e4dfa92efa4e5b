"""`dragate migrate`: rewrite legacy GPU requests in manifests kept in git.

Black's model: with no flag it is a dry run that says what would change; `--check` makes that a
CI gate (exit 1), `--diff` shows the change, `--write` makes it (atomically, only files that
change). `-` reads standard input and prints the migrated text. This module parses the flags,
loads the mappings and the cluster snapshot, and echoes what the migration
(`webhook.files.migration`) says; the migration decides, and its `Outcome` is the exit code.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from webhook.cli import exits
from webhook.cli.inputs import EXCLUDE_OPTION, KUBE_VERSION_OPTION, snapshot, state_option
from webhook.files.manifests import find_files
from webhook.files.migration import Outcome, Run, migrate_files, migrate_text, skip_rule
from webhook.policy.loading import default_mappings, load_policies
from webhook.rewrite import rewrite_object
from webhook.rewrite.mappings import native_resources
from webhook.types import DragateError, LegacyResourceMapping

__all__ = ["Run", "command", "load_mappings", "migrate_text", "rewrite_object", "skip_rule"]

EXITS = {Outcome.FAILED: exits.BAD_INPUT, Outcome.FINDINGS: exits.FINDINGS}


@click.command("migrate")
@KUBE_VERSION_OPTION
@click.option("--policies", type=click.Path(file_okay=False), help="Policy directory.")
@click.option("--check", "mode", flag_value="check", help="Exit 1 if any file would change.")
@click.option("--diff", "mode", flag_value="diff", help="Print a unified diff.")
@click.option("--write", "mode", flag_value="write", help="Rewrite the files in place.")
@click.option("--templates-out", type=click.Path(dir_okay=False), help="Write templates here.")
@state_option(
    "Snapshot of cluster objects; a name its DeviceClasses map (extendedResourceName) is "
    "kept under the default action Auto, as are those the inputs' DeviceClasses map."
)
@click.option(
    "--rewrite-native",
    is_flag=True,
    help="Rewrite names a DeviceClass maps (KEP-5004) too, instead of keeping them.",
)
@EXCLUDE_OPTION
@click.argument("paths", nargs=-1, required=True)
def command(  # noqa: PLR0917  (click passes options by keyword)
    policies: str | None,
    mode: str | None,
    templates_out: str | None,
    state_file: str | None,
    rewrite_native: bool,
    exclude: tuple[str, ...],
    paths: tuple[str, ...],
) -> None:
    """Rewrite legacy `nvidia.com/gpu` / `nvidia.com/mig-*` requests into DRA claims.

    With no flag: a dry run naming the files that would change (stdin: prints the result).
    A name a DeviceClass maps natively (its `extendedResourceName`, in `--state` or among the
    inputs) is kept, as the default action Auto keeps it at admission, unless
    `--rewrite-native`.
    """
    try:
        mappings = load_mappings(policies)
        state = snapshot(state_file)
    except DragateError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(exits.BAD_INPUT) from None
    run = Run(mappings, mode or "summary", templates_out, skip=skip_rule(mappings))
    run.say, run.rewrite = _say, rewrite_object  # this module's, which tests stand in for
    known = None if rewrite_native else native_resources(state.device_classes().values())
    outcome = migrate_files(run, list(find_files(paths, exclude)), known)
    if outcome is not Outcome.DONE:
        raise SystemExit(EXITS[outcome])


def load_mappings(policies: str | None) -> Sequence[LegacyResourceMapping]:
    """Mappings from the policy files, or the built-in default when none are given."""
    loaded = load_policies([policies]).mappings if policies is not None else ()
    return loaded or default_mappings()


def _say(text: str, *, err: bool = False, nl: bool = True) -> None:
    click.echo(text, err=err, nl=nl)
