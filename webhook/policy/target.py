"""The Kubernetes minor this process targets, chosen once (`--kube-version`, or the cluster's
`/version`) and read by everything in the policy layer that differs per minor: rule types
(`kubetypes`) and the CEL functions a rule compiles with (`celspec`). Its own module so both
can read it without importing each other.
"""

from __future__ import annotations

from webhook.types.kubeversions import NEWEST, supported_minor

_target = [NEWEST]


def use_kube_version(minor: str) -> None:
    """Type and compile rules for Kubernetes `minor` from now on in this process (a supported
    one)."""
    _target[0] = supported_minor(minor)


def kube_version() -> str:
    """The minor rules are typed and compiled for: the newest supported unless one was chosen."""
    return _target[0]
