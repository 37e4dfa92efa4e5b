"""`dragate certs create|renew|show`: a CA and a serving certificate for the webhook Service.

For dev clusters and for teams without cert-manager; see certs/README.md for production
options. Private keys are written 0600 and never printed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import click

from webhook import certificates
from webhook.cli import exits

DirPath = click.Path(path_type=Path, file_okay=False)
T = TypeVar("T")


class BadInput(click.ClickException):
    """A usage or input problem reported with exit code 2, as every dragate command does."""

    exit_code = exits.BAD_INPUT


def state_dir() -> Path:
    """`$XDG_STATE_HOME/dragate`, else `~/.local/state/dragate`: where `serve` keeps dev certs."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dragate"


@click.group("certs")
def command() -> None:
    """Make, renew and inspect the webhook's CA and serving certificate."""


@command.command("create")
@click.option("--out", "out", type=DirPath, required=True, help="Directory to write into.")
@click.option("--service", required=True, help="Service name the apiserver calls.")
@click.option("--namespace", required=True, help="Namespace of that Service.")
@click.option("--dns-name", "dns_names", multiple=True, help="Extra DNS name or IP SAN.")
@click.option("--days", default=365, show_default=True, type=click.IntRange(1, 3650))
@click.option("--ca-days", default=3650, show_default=True, type=click.IntRange(1, 36500))
def create(  # noqa: PLR0917  (click passes options by keyword; this is its signature)
    out: Path, service: str, namespace: str, dns_names: tuple[str, ...], days: int, ca_days: int
) -> None:
    """Write ca.crt, ca.key, tls.crt, tls.key for `<svc>.<ns>.svc`."""
    names = [*certificates.service_names(service, namespace), *dns_names]
    _guard(lambda: certificates.create(out, names, days=days, ca_days=ca_days))
    click.echo(f"wrote {out}/{{ca.crt,ca.key,tls.crt,tls.key}} for {', '.join(names)}")


@command.command("renew")
@click.option("--dir", "directory", type=DirPath, required=True)
@click.option("--rotate-ca", is_flag=True, help="Also make a new CA; writes ca-bundle.crt.")
@click.option("--days", default=365, show_default=True, type=click.IntRange(1, 3650))
@click.option("--ca-days", default=3650, show_default=True, type=click.IntRange(1, 36500))
def renew(directory: Path, rotate_ca: bool, days: int, ca_days: int) -> None:
    """Re-issue tls.crt with the same names; a running `serve` picks it up without restart."""
    _guard(lambda: certificates.renew(directory, days=days, rotate_ca=rotate_ca, ca_days=ca_days))
    click.echo(f"renewed {directory}/tls.crt")
    if rotate_ca:
        click.echo(
            f"new CA in {directory}/ca.crt; publish {directory}/ca-bundle.crt (old + new CA) "
            "as caBundle: dragate webhook-config --cert-dir " + str(directory)
        )


@command.command("show")
@click.option("--dir", "directory", type=DirPath, required=True)
def show(directory: Path) -> None:
    """Subject, issuer, serial, validity and names of each certificate in the directory."""
    infos = _guard(lambda: certificates.describe(directory))
    if not infos:
        raise BadInput(f"no certificates in {directory}")
    now = datetime.now(UTC)
    for info in infos:
        days_left = (info.not_after - now).days
        click.echo(f"{info.file}: {info.subject}{' (CA)' if info.is_ca else ''}")
        click.echo(f"  issuer:  {info.issuer}")
        click.echo(f"  serial:  {info.serial:x}")
        click.echo(f"  expires: {info.not_after.isoformat()} ({days_left} days left)")
        if info.names:
            click.echo(f"  names:   {', '.join(info.names)}")


def _guard(action: Callable[[], T]) -> T:
    try:
        return action()
    except certificates.CertError as err:
        raise BadInput(str(err)) from None
