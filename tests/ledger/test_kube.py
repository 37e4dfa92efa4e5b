"""KubeLedger starts no thread of its own: its grant loops are the composer's to start
(`webhook.assembly`), and until they run it admits nothing from a grant. Against an
unreachable API server: what is asserted is what the ledger starts, not what it stores (the
stored side is tests/e2e/test_kube_ledger*.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from webhook.kube.api import KubeApi
from webhook.ledger.grants import GrantBook
from webhook.ledger.kube import KubeLedger
from webhook.types import FactsUnavailable

GPU = "gpu.nvidia.com"
KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def unreachable(tmp_path: Path) -> KubeApi:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    return KubeApi.from_kubeconfig(str(kubeconfig))


@pytest.mark.parametrize("grants", [True, False], ids=["quota-grants", "no-quota-grants"])
def test_a_reservation_starts_no_thread(tmp_path: Path, grants: bool) -> None:
    """The first reservation writes (here: fails to), whether or not the ledger has grants:
    with grants, no loop was started that would write what a grant admitted."""
    before = set(threading.enumerate())
    book = GrantBook("replica-a/1") if grants else None
    ledger = KubeLedger(unreachable(tmp_path), budget=0.3, grants=book)
    with pytest.raises(FactsUnavailable):
        ledger.reserve("team-a", {"claim:team-a/c": {GPU: 1}}, {GPU: 4})
    assert {t.name for t in set(threading.enumerate()) - before} == set()
    assert (ledger.loops is not None) is grants
    assert ledger.loops is None or not ledger.loops.running()


def test_grant_loops_run_from_start_to_stop(tmp_path: Path) -> None:
    ledger = KubeLedger(unreachable(tmp_path), grants=GrantBook("replica-a/1"))
    assert ledger.loops is not None
    ledger.loops.start()
    try:
        names = {t.name for t in threading.enumerate()}
        assert {"ledger-flusher", "ledger-wants"} <= names
        assert ledger.loops.running()
    finally:
        ledger.close(timeout=1.0)
    alive = {t.name for t in threading.enumerate() if t.is_alive()}
    assert not {"ledger-flusher", "ledger-wants"} & alive
