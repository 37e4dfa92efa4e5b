"""What every offline command builds the same way: policies, snapshot state, ledger, context.

`check` and `test` (and `serve` without a cluster) must judge exactly as the webhook does, so
they share this construction instead of each wiring the pipeline by hand.
"""

from __future__ import annotations

from pathlib import Path

import click

from webhook.cli import exits
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context
from webhook.sources import offline as sources_offline
from webhook.sources.offline import existing_holds
from webhook.sources.policies import PolicyError, default_policy_dir, load_policies
from webhook.sources.state import SnapshotState, load_state
from webhook.sources.yamlio import YamlError
from webhook.types import PolicySet


class UsageError(click.ClickException):
    """Bad input for a command: printed without a traceback, exit code 2."""

    exit_code = exits.BAD_INPUT


def policy_set(directory: str | None) -> PolicySet:
    """The policies in `directory` (default: the built-in examples), or exit 2 with each problem."""
    path = Path(directory) if directory else default_policy_dir()
    if not path.exists():
        raise UsageError(f"policy directory {path} does not exist")
    try:
        return load_policies([path])
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


def offline_context(policies: PolicySet, state: SnapshotState) -> Context:
    """A pipeline context whose in-memory ledger starts from the claims already in `state`."""
    ledger = MemoryLedger(existing_holds(policies, state))
    return sources_offline.offline_context(lambda: policies, state, ledger)
