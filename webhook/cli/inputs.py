"""What the offline commands read the same way: a policy directory and a snapshot state file.

Bad input exits with code 2 and one message per problem, before any object is judged; the
Context itself is composed in `webhook.assembly`, as for the webhook.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
from click.decorators import FC

from webhook.cli import exits
from webhook.files.yamlio import YamlError
from webhook.kube.snapshot import SnapshotState, load_state
from webhook.policy.loading import PolicyError, default_policy_dir, load_policies
from webhook.policy.policysets import policy_files_in
from webhook.policy.target import use_kube_version
from webhook.types import PolicySet
from webhook.types.kubeversions import NEWEST, SUPPORTED, UnsupportedKubeVersion, supported_minor

POLICIES_OPTION = click.option(
    "--policies",
    "policies_dir",
    metavar="DIR",
    help="Policy directory (default: built-in examples).",
)
"""`--policies DIR` as the offline commands take it, read by `policy_set`."""

EXCLUDE_OPTION = click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="GLOB",
    help="Skip files found in a directory that match GLOB (repeatable): a GLOB without `/` "
    "matches any part of the path below the directory, one with `/` the path from it.",
)
"""`--exclude GLOB` as `lint`, `check` and `migrate` take it (`webhook.files.manifests.walk`)."""


def _kube_version(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Reads `--kube-version` and types rules for it (the newest minor when it is absent)."""
    if value is None:
        use_kube_version(NEWEST)
        return None
    try:
        minor = supported_minor(value)
    except UnsupportedKubeVersion as err:
        raise click.BadParameter(str(err)) from None
    use_kube_version(minor)
    return minor


KUBE_VERSION_HELP = (
    f"Kubernetes minor to type policy rules for ({', '.join(SUPPORTED)}; default {NEWEST})."
)


def kube_version_option(help: str = KUBE_VERSION_HELP) -> Callable[[FC], FC]:
    """`--kube-version MINOR` as the offline commands take it: the target minor of the process
    (`webhook.policy.target.kube_version`); `help` says what else the command takes from it."""
    return click.option(
        "--kube-version", metavar="MINOR", callback=_kube_version, expose_value=False, help=help
    )


KUBE_VERSION_OPTION = kube_version_option()


def state_option(help: str) -> Callable[[FC], FC]:
    """`--state FILE`, read by `snapshot`; `help` says what the command takes from it."""
    return click.option("--state", "state_file", metavar="FILE", help=help)


class UsageError(click.ClickException):
    """Bad input for a command: printed without a traceback, exit code 2."""

    exit_code = exits.BAD_INPUT


def policy_set(directory: str | None) -> PolicySet:
    """The policies in `directory` (default: the built-in examples), or exit 2 with each problem."""
    path = Path(directory) if directory else default_policy_dir()
    if not path.exists():
        raise UsageError(f"policy directory {path} does not exist")
    return _loaded([path])


def policy_set_in(directory: Path) -> PolicySet:
    """The policy set whose directory is `directory`: its own policy files, as `lint` groups
    them (`webhook.policy.policysets`), or exit 2 with each problem."""
    return _loaded(policy_files_in(directory))


def _loaded(paths: list[Path]) -> PolicySet:
    try:
        return load_policies(paths)
    except PolicyError as err:
        problems = "\n".join(f"  {p}" for p in err.problems)
        raise UsageError(f"invalid policies:\n{problems}") from None


def snapshot(path: str | None) -> SnapshotState:
    if path is None:
        return SnapshotState.empty()
    try:
        return load_state(path)
    except YamlError as err:
        raise UsageError(f"state file: {err}") from None
