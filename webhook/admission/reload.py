"""Policy hot reload: poll the policy files (and the cluster's policy objects), swap a valid
new set in, keep the last good one.

Readers call `holder.get()`, which reads one attribute; the watcher replaces that attribute
with a new immutable snapshot in one assignment, so a review sees either the old set or the
new one, never a mix. Polling (mtime, size and inode, then a content digest) works the same
on every file system, including Kubernetes ConfigMap mounts that swap a symlink. Policy
objects are watched by caches; `changes` fingerprints them (names and resourceVersions), and
until they have been listed once there is no set to serve: `get` raises FactsUnavailable, and
the review answers as it does without cluster facts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from webhook.admission import metrics
from webhook.policy.loading import files_under
from webhook.types import FactsUnavailable, PolicySet

log = logging.getLogger("dragate.reload")
T = TypeVar("T")
Loader = Callable[[Sequence[str]], PolicySet]
Work = Callable[[], T]


class Runner(Protocol):
    """Runs a reload's reading and compiling somewhere (`offloop.off_loop` when serving)."""

    def __call__(self, work: Work[T]) -> T: ...


def here(work: Work[T]) -> T:
    """Runs it on the caller: the CLI, tests."""
    return work()


Fingerprint = tuple[tuple[str, int, int, int], ...]


@dataclass(frozen=True)
class PolicyStatus:
    """What /readyz reports: the set being served and, when stale, why the newer one failed."""

    digest: str
    loaded_at: float
    errors: tuple[str, ...] = ()

    @property
    def stale(self) -> bool:
        return bool(self.errors)


@dataclass(frozen=True)
class _Snapshot:
    policies: PolicySet | None  # None until policy objects were first listed
    status: PolicyStatus


NOT_LOADED = "policies not loaded yet"


class PolicyHolder:
    """The policy set being served; `get` is the `Context.policies` callable."""

    def __init__(
        self,
        paths: Sequence[str],
        loader: Loader,
        initial: PolicySet | None = None,
        *,
        fallback: PolicySet | None = None,
        changes: Callable[[], Hashable] | None = None,
        runner: Runner = here,
    ):
        """`fallback` (the set the gunicorn master loaded) is served, as stale, when the files
        cannot be loaded now: a worker restarted while they are broken or gone keeps serving
        instead of failing to boot, which would make gunicorn stop the whole server.
        `changes`: a cheap fingerprint of whatever else the loader reads (policy objects).
        `runner` runs a reload's digest and compilation: off the serving loop when serving,
        so reviews go on being answered while thousands of Tenants compile."""
        self._paths = tuple(paths)
        self._runner = runner
        self._loader = loader
        self._changes = changes or (lambda: None)
        self._fingerprint: Fingerprint = fingerprint(self._paths)
        self._tried_digest = content_digest(self._paths)
        self._tried_changes = self._changes()
        errors: list[str] = []
        policies: PolicySet | None
        try:
            policies = initial if initial is not None else loader(self._paths)
        except FactsUnavailable as err:  # objects not listed: the files alone are not the set
            policies, errors = None, [str(err)]
        except Exception as err:
            if fallback is None:
                raise
            policies, errors = fallback, _problems(err)
            log.error("policies cannot be loaded; serving the set the server started with",
                      extra={"errors": errors})  # fmt: skip
        digest = policies.digest if policies is not None else ""
        self._snapshot = _Snapshot(policies, PolicyStatus(digest, time.time(), tuple(errors)))
        _record(success=not errors, policies=policies)

    def get(self) -> PolicySet:
        policies = self._snapshot.policies
        if policies is None:
            raise FactsUnavailable(f"{NOT_LOADED}: {'; '.join(self.status.errors)}")
        return policies

    @property
    def loaded(self) -> PolicySet | None:
        """The set being served, or None before the first load (no exception)."""
        return self._snapshot.policies

    @property
    def status(self) -> PolicyStatus:
        return self._snapshot.status

    def poll(self) -> bool:
        """Reload when the files or objects changed (or nothing is loaded yet); True when a
        new set was swapped in."""
        changes = self._changes()
        if changes != self._tried_changes or self._snapshot.policies is None:
            self._tried_changes = changes
            self._fingerprint = fingerprint(self._paths)
            self._tried_digest = self._runner(lambda: content_digest(self._paths))
            return self._load()
        current = fingerprint(self._paths)
        if current == self._fingerprint:
            return False
        self._fingerprint = current
        digest = self._runner(lambda: content_digest(self._paths))
        if digest == self._tried_digest:
            return False  # touched, not changed
        self._tried_digest = digest
        return self._load()

    def _load(self) -> bool:
        try:
            policies = self._runner(lambda: self._loader(self._paths))
        except Exception as err:  # PolicyError, and anything a half-written file provokes
            errors = _problems(err)
            if tuple(errors) != self.status.errors:  # said once, not at every poll
                log.error("policy reload failed; serving the last good set",
                          extra={"errors": errors})  # fmt: skip
            self._snapshot = _Snapshot(self._snapshot.policies, _stale(self.status, errors))
            _record(success=False)
            return False
        self._snapshot = _Snapshot(policies, PolicyStatus(policies.digest, time.time()))
        left_out = len(policies.not_enforced)
        log.info("policies reloaded", extra={"digest": policies.digest, "notEnforced": left_out})
        _record(success=True, policies=policies)
        return True


def _stale(previous: PolicyStatus, errors: list[str]) -> PolicyStatus:
    return PolicyStatus(previous.digest, previous.loaded_at, tuple(errors))


def _problems(err: Exception) -> list[str]:
    problems = getattr(err, "problems", None)
    if problems:
        return [str(p) for p in problems]
    return [f"{type(err).__name__}: {err}"]


def _record(*, success: bool, policies: PolicySet | None = None) -> None:
    """The reload gauges; a failed reload leaves the count of `policies` left out as the set
    still served had it."""
    metrics.RELOAD_SUCCESS.set(1 if success else 0)
    if success:
        metrics.RELOAD_TIMESTAMP.set(time.time())
    if policies is not None:
        metrics.NOT_ENFORCED.set(len(policies.not_enforced))


def watched_files(paths: Sequence[str]) -> list[Path]:
    """The files a reload reads: each file given, and policy files under each directory."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(_files_under(path))
        else:
            files.append(path)
    return files


def _files_under(directory: Path) -> list[Path]:
    """A directory removed while we walk it has no files; the next load says so clearly."""
    try:
        return files_under(directory)
    except OSError:
        return []


def fingerprint(paths: Sequence[str]) -> Fingerprint:
    """Cheap change detection: (name, mtime_ns, size, inode) of every policy file."""
    entries = []
    for file in watched_files(paths):
        try:
            st = file.stat()
        except OSError:
            continue
        entries.append((str(file), st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(entries)


def content_digest(paths: Sequence[str]) -> str:
    """SHA-256 over names and contents; equal digests mean nothing to reload."""
    digest = hashlib.sha256()
    for file in watched_files(paths):
        try:
            data = file.read_bytes()
        except OSError:
            continue
        digest.update(str(file).encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


class PolicyWatcher:
    """A daemon thread per worker process polling the holder; started after fork, lazily."""

    def __init__(self, holder: PolicyHolder, interval: float = 1.0) -> None:
        self._holder = holder
        self._interval = interval
        self._lock = threading.Lock()
        self._pid = 0
        self._stop = threading.Event()

    def ensure_running(self) -> None:
        """Start the thread once in this process (a forked child has no thread of its parent)."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="policy-watcher", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._holder.poll()
            except Exception:  # a watcher that dies silently would freeze policies forever
                log.exception("policy watcher iteration failed")


def policy_report(holder: PolicyHolder) -> dict[str, object]:
    """What is served: digest, freshness, and the policy objects left out with their reasons."""
    status, policies = holder.status, holder.loaded
    state = "unloaded" if policies is None else "stale" if status.stale else "current"
    report: dict[str, object] = {
        "state": state,
        "digest": status.digest,
        "loadedAt": status.loaded_at,
        "errors": list(status.errors),
    }
    if policies is not None:
        report["objects"] = len(policies.objects)
        report["notEnforced"] = [f"{n.kind}/{n.name}: {n.message}" for n in policies.not_enforced]
        if not (policies.tenants or policies.class_policies):
            report["note"] = "nothing to enforce: no Tenant or DeviceClassPolicy is loaded"
    return report
