"""One place says which Kubernetes minors dragate targets, and reads a version written by a
person (`--kube-version`) or by an API server (`/version`)."""

from __future__ import annotations

import pytest

from webhook.types.kubeversions import (
    NEWEST,
    SUPPORTED,
    UnsupportedKubeVersion,
    nearest_supported,
    supported_minor,
)


def test_the_supported_minors_are_1_35_to_1_37_newest_last() -> None:
    assert SUPPORTED == ("1.35", "1.36", "1.37")
    assert NEWEST == "1.37"


READ = {
    "minor": ("1.36", "1.36"),
    "with-v": ("v1.35", "1.35"),
    "with-patch": ("1.37.2", "1.37"),
    "git-version": ("v1.36.3+k3s1", "1.36"),
    "spaces": (" 1.37 ", "1.37"),
}


@pytest.mark.parametrize(("text", "minor"), READ.values(), ids=READ)
def test_a_supported_version_reads_as_its_minor(text: str, minor: str) -> None:
    assert supported_minor(text) == minor


REFUSED = {
    "too-old": "1.34",
    "too-new": "1.38",
    "garbage": "latest",
    "empty": "",
    "major-only": "1",
    "major-2": "2.35",
}


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED)
def test_an_unsupported_version_names_the_supported_ones(text: str) -> None:
    with pytest.raises(UnsupportedKubeVersion, match=r"supported: 1\.35, 1\.36, 1\.37"):
        supported_minor(text)


NEAREST = {
    "older": (("1", "30"), "1.35"),
    "newer": (("1", "40"), "1.37"),
    "supported": (("1", "36"), "1.36"),
    "eks-plus": (("1", "36+"), "1.36"),
    "garbage-minor": (("1", "x"), "1.37"),
}


@pytest.mark.parametrize(("live", "minor"), NEAREST.values(), ids=NEAREST)
def test_a_live_version_maps_to_the_nearest_supported_minor(
    live: tuple[str, str], minor: str
) -> None:
    assert nearest_supported(*live) == minor
