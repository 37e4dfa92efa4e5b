"""Keeps a ledger honest: rebuilds the truth from existing claims and reconciles every tenant.

The webhook charges quota at admission, before the object exists; only the claims stored in
the cluster say what is really held. Periodically (and at start, and soon after a claim is
deleted) the reconciler counts every claim per tenant (`usage.holds_by_tenant`) and hands
that truth to the ledger, which confirms holders whose object appeared, releases pending
holders whose object never appeared within `PENDING_SECONDS`, and drops holders whose
object is gone. Claims being deleted still count until they are gone. The truth is taken
as seen when the pass began, so a holder whose bound ends while the claims are being walked
is not dropped on that walk.

A claim deleted before a pass confirmed it would otherwise hold its quota until its bound:
the claim informer's deletion event names its holder (`claim_deleted`), and the next pass
drops that holder unless its truth has it again. Nothing else drops a pending holder early:
one whose claim is simply not created yet (the webhook charges before the object exists)
is never named by a deletion.

`last_success` (the time the truth of the last successful pass was seen) tells /readyz and
the metrics how long the ledger has gone without a reconciler.

In a cluster it runs only in the replica holding the Lease (`leading`, see
`kube.background`): one pass per interval for the whole cluster, not one per replica. A
replica that takes the Lease over reconciles at once, so a dead leader's work (a pending
holder whose object never appeared, a deleted claim's holder) is picked up within the lease
time. Overlap is still harmless: every step is a compare-and-swap on the latest stored
records, so two reconcilers with the same truth write the same records, and the second
write is a no-op.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Protocol

from webhook.engine.counting import holder_key
from webhook.kube.background import BackgroundLoop, always
from webhook.ledger.accounting import Holds
from webhook.ledger.gangtruth import add_gang_holds
from webhook.ledger.usage import holder_names, holds_by_tenant
from webhook.types import ClusterState, DragateError, Object, PolicySet

log = logging.getLogger("dragate.ledger.reconciler")

Truth = Callable[[], Mapping[str, Holds]]
"""Per tenant, the holds of every existing object; raises DragateError when unknown."""
Names = Callable[[], Mapping[str, str]]
"""Per holder keyed by a Pod's uid, the Pod's `<namespace>/<name>` (`usage.holder_names`)."""


class Reconcilable(Protocol):
    """A ledger that can be brought in line with the truth (MemoryLedger, KubeLedger)."""

    def reconcile(
        self,
        truth: Mapping[str, Holds],
        names: Mapping[str, str] | None = None,
        *,
        seen_at: float | None = None,
        gone: AbstractSet[str] = frozenset(),
    ) -> None: ...


def claims_truth(policies: Callable[[], PolicySet], state: ClusterState) -> Truth:
    """The truth from the claims in `state`, each counted for the tenant of its namespace,
    and the holders of the gangs it keeps (`gangtruth`)."""

    def truth() -> Mapping[str, Holds]:
        namespaces = {str(n["metadata"]["name"]): n for n in state.namespaces()}
        current = policies()
        holds, notes = holds_by_tenant(current, state.claims(), namespaces)
        for note in notes:
            log.warning("reconcile: %s", note)
        add_gang_holds(current, state, namespaces, holds)
        return holds

    return truth


def claims_names(state: ClusterState) -> Names:
    """The names of the Pods the claims in `state` were generated for, by holder."""
    return lambda: holder_names(state.claims())


class Reconciler(BackgroundLoop):
    """Runs `ledger.reconcile(truth())` every `interval` seconds on a daemon thread, while
    `leading`."""

    thread_name = "reconciler"

    def __init__(
        self,
        ledger: Reconcilable,
        truth: Truth,
        *,
        interval: float = 15.0,
        names: Names | None = None,
        leading: Callable[[], bool] = always,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(leading)
        self.ledger = ledger
        self.truth = truth
        self.names = names
        self.interval = interval
        self.clock = clock
        self.runs = 0
        self.last_error = ""
        self.last_success: float | None = None  # when the last good pass saw its truth
        self._gone: set[str] = set()
        self._gone_lock = threading.Lock()

    def run_once(self) -> bool:
        """One pass; False (and nothing changed) when the truth or the ledger is unavailable.

        Skipping is the safe failure: with an unsynced cache the truth would be "no claims"
        and every confirmed holder would be dropped.
        """
        with self._gone_lock:
            gone, self._gone = self._gone, set()
        seen_at = self.clock()
        try:
            truth = self.truth()
            names = self.names() if self.names is not None else None
            self.ledger.reconcile(truth, names, seen_at=seen_at, gone=gone)
        except DragateError as error:
            self._keep(gone)
            self.last_error = str(error)
            log.warning("reconcile skipped: %s", error)
            return False
        except BaseException:
            self._keep(gone)
            raise
        self.runs += 1
        self.last_error = ""
        self.last_success = seen_at
        return True

    def _keep(self, gone: set[str]) -> None:
        """Put the deletions of a pass that did not happen back for the next one."""
        with self._gone_lock:
            self._gone |= gone

    def poke(self, *_: object) -> None:
        """Run soon; usable as a KubeState claim listener."""
        self.wake()

    def claim_deleted(self, claim: Object) -> None:
        """A claim was deleted: the next pass, run soon, drops its holder unless its truth
        has it again (a pending holder would otherwise wait for its bound)."""
        with self._gone_lock:
            self._gone.add(holder_key(claim))
        self.wake()

    def _loop(self) -> None:
        while self._running():
            try:
                self.run_once()
            except Exception:  # the loop must survive a bug in one pass
                log.exception("reconcile failed")
            self._sleep(self.interval)
