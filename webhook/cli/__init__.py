"""The `dragate` command line: one click group, one module per command.

Every command that judges objects goes through `webhook.pipeline.review`, the same entry point
the webhook uses, so CI and the cluster can never disagree.
"""

from __future__ import annotations

import importlib

import click

COMMANDS = {
    "serve": "webhook.cli.serve",
    "check": "webhook.cli.check",
    "migrate": "webhook.cli.migrate",
    "lint": "webhook.cli.lint",
    "test": "webhook.cli.policytest",
    "certs": "webhook.cli.certs",
    "webhook-config": "webhook.cli.webhookconfig",
    "rewrite-policy": "webhook.cli.rewritepolicy",
    "crds": "webhook.cli.crds",
}


class LazyGroup(click.Group):
    """Imports a command's module only when it runs, so `dragate check` never loads Flask."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command: click.Command = importlib.import_module(module).command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dragate")
def main() -> None:
    """dragate: admission webhook and policy engine for Kubernetes DRA."""
