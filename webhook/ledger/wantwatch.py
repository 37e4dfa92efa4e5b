"""The watch that tells a process holding quota grants that another process wants them back.

A request refused only because other processes hold grants writes a want (`wants`), which
labels its TenantUsage wanted (`tenantusage.WANTED_LABEL`). Each process that takes part in
grants watches only the wanted TenantUsages (an `Informer` with that label selector, so the
API server sends nothing for the others): an object whose records carry another owner's
live want makes the process give its grant of that tenant back at once
(`grants.GrantBook.wanted`), instead of at its next write or when it goes idle
(`grantstate.STANDING_SECONDS`). Only liveness rests on this watch: grants and holders stay
within the limit whatever it sees, since every write is a compare-and-swap.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from webhook.kube.api import KubeApi
from webhook.kube.background import BackgroundLoop
from webhook.kube.informer import Informer, Resource
from webhook.ledger import wants
from webhook.ledger.grants import GrantBook
from webhook.ledger.tenantusage import COLLECTION, WANTED_SELECTOR
from webhook.types import Object

WANTED = Resource("TenantUsage", COLLECTION, WANTED_SELECTOR)


class WantWatch(BackgroundLoop):
    """Gives the book's grants back when another process wants their tenant's capacity;
    started with the ledger's other loops (`grantloops.GrantLoops`)."""

    thread_name = "ledger-wants"

    def __init__(
        self, api: KubeApi, book: GrantBook, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__()
        self.book = book
        self.clock = clock
        self.informer = Informer(api, WANTED, listener=self._seen)

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self.informer.restart_watch()  # a quiet watch would block the thread until it ends
        super().stop(timeout)

    def _loop(self) -> None:
        self.informer.run(self._stop)

    def _seen(self, kind: str, obj: Object) -> None:
        if kind == "RELISTED":  # the list that (re)starts the watch: every wanted tenant
            for listed in self.informer.items():
                self._check(listed)
        elif kind in ("ADDED", "MODIFIED"):
            self._check(obj)

    def _check(self, obj: Object) -> None:
        spec = obj.get("spec") or {}
        text, tenant = spec.get("records"), spec.get("tenant")
        if not isinstance(text, str) or not isinstance(tenant, str):
            return
        if wants.wanting(text, self.clock()) - {self.book.owner}:
            self.book.wanted(tenant)
