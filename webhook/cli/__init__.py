"""The `dragate` command line: one click group, one module per command.

Every command that judges objects goes through `webhook.pipeline.review`, the same entry point
the webhook uses, so CI and the cluster can never disagree.
"""

from __future__ import annotations

import importlib
import sys

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


def patches_gevent(args: list[str]) -> bool:
    """Whether these arguments start a process that serves reviews on gevent's loop."""
    if args[:1] != ["serve"]:
        return False
    role = "all"
    for index, arg in enumerate(args):
        if arg == "--role" and index + 1 < len(args):
            role = args[index + 1]
        elif arg.startswith("--role="):
            role = arg.split("=", 1)[1]
    return role != "controller"


def entry() -> None:
    """The `dragate` console script and `python -m webhook`: `main`, with gevent's monkey
    patching first when the command is `serve`.

    The server's worker is gevent's (webhook/admission/server.py); gevent must patch the
    standard library before anything else imports it, or modules that bound `ssl` or
    `socket` names on import (urllib3, under the kubernetes client) keep blocking calls that
    stall every connection of the worker. Patching here, before the serve command's modules
    load, is the earliest point; every other command runs unpatched, and so does
    `serve --role controller` (a plain process on ordinary threads).
    """
    if patches_gevent(sys.argv[1:]):
        from gevent import monkey  # noqa: PLC0415  (serve only)

        monkey.patch_all()
    main(prog_name="dragate")
