"""A line of `kubectl dragate why`'s answer, and the object identity each line cites."""

from __future__ import annotations

from dataclasses import dataclass

from webhook.types import Object


@dataclass(frozen=True)
class Finding:
    """One line of the answer: `blocking` when it keeps the Pod from being scheduled."""

    cause: str  # quota | claim | feasibility | node | allocated | counters | scheduler |
    # binding | denied | warned | ...
    source: str  # the object it comes from, `Kind namespace/name`
    message: str
    blocking: bool = False

    def as_json(self) -> dict[str, object]:
        return {"cause": self.cause, "source": self.source, "message": self.message,
                "blocking": self.blocking}  # fmt: skip


def identity(obj: Object) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))
