"""Policies stored as Kubernetes objects (the dragate.io CRDs), loaded beside policy files.

Files and objects go through the same schema, compiler and cross-document rules as a policy
directory, with one difference in what a mistake costs. A broken file keeps the whole last
good set serving (the author is at the keyboard, and CI should have refused it). A broken
object is the only copy of that policy in the cluster, stored while dragate's own admission
check was down or bypassed: it is left out alone, every other policy is enforced, and the
object's status says why. Files come first, then objects oldest first, so a clash (the same
name in a file and an object, a namespace claimed by two tenants, a second Settings) rejects
the newcomer and never the policy already in force.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from webhook.files.yamlio import Document
from webhook.policy.kinds import KINDS
from webhook.policy.loading import (
    Loaded,
    cross_document_problems,
    digest_of,
    policy_set_of,
    read_all,
    read_document,
    read_texts,
)
from webhook.policy.schema import PolicyError, PolicyProblem, Report
from webhook.types import JSON, Object, ObjectVerdict, PolicySet, Source

NOT_YET_CREATED = "\uffff"
"""Sorts after every timestamp: an object without one is the newest."""
NOT_A_POLICY = "not a policy kind"
KEPT_METADATA = ("name", "labels", "annotations")
"""What a policy object's metadata carries into the schema; the rest is the API server's."""


def object_source(obj: Object) -> Source:
    """How a policy object is named in messages: `Tenant/team-a` (no line: it has no file)."""
    return Source(f"{obj.get('kind', '?')}/{_name(obj)}")


def policy_body(obj: Object) -> JSON:
    """The object as a policy document: its spec, and metadata without server-set fields."""
    metadata = obj.get("metadata")
    body: dict[str, JSON] = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    if isinstance(metadata, dict):
        body["metadata"] = {k: metadata[k] for k in KEPT_METADATA if k in metadata}
    return body


def load_with_objects(paths: Sequence[str | Path], objects: Iterable[Object]) -> PolicySet:
    """The policy files under `paths` and the cluster's policy `objects`, as one set."""
    problems: list[PolicyProblem] = []
    texts, _ = read_texts(paths, problems)
    if problems:
        raise PolicyError(problems)
    return load_combined(texts, objects)


def load_combined(texts: Sequence[tuple[str, str]], objects: Iterable[Object]) -> PolicySet:
    """Files (all or nothing: PolicyError) plus every object that loads and does not clash;
    the others are listed in `not_enforced`."""
    file_problems: list[PolicyProblem] = []
    from_files = read_all(list(texts), file_problems)
    if file_problems:
        raise PolicyError(file_problems)
    ordered = sorted(objects, key=_age)
    accepted, rejected = _read_objects(ordered, from_files)
    digest = digest_of([*(text for _, text in texts), *map(_canonical, ordered)])
    policies = policy_set_of([*from_files, *accepted], digest)
    left_out = {(v.kind, v.name): v for v in rejected}
    verdicts = (left_out.get(_key(o)) or _verdict(o, ()) for o in ordered)
    return replace(policies, objects=tuple(verdicts))


def check_object(obj: Object, current: Iterable[Object]) -> tuple[PolicyProblem, ...]:
    """Why `obj` would not be enforced beside the `current` objects (empty: it would be).

    Admission asks this before the object is stored; objects of the same kind and name in
    `current` are the ones it replaces. Only `obj` goes through the schema and compiler: the
    others are read for their names and namespaces alone, so the answer costs one object's
    load however many policies the cluster holds."""
    doc = Document(policy_body(obj), object_source(obj))
    report = Report(doc)
    loaded = read_document(doc, report)
    if report.problems or loaded is None:
        return tuple(report.problems) or (PolicyProblem(doc.source, "kind", NOT_A_POLICY),)
    entries = sorted([*(o for o in current if _key(o) != _key(obj)), obj], key=_age)
    named = [loaded if o is obj else _named(o) for o in entries]
    clashes = _by_file(cross_document_problems([n for n in named if n is not None]))
    return tuple(clashes.get(doc.source.file, ()))


def _named(obj: Object) -> Loaded | None:
    """An object as the cross-document rules see it (kind, name, namespaces), not compiled."""
    body = policy_body(obj)
    kind, name = _key(obj)
    if kind not in KINDS or not name or not isinstance(body.get("spec", {}), dict):
        return None
    return Loaded(kind, name, None, Document(body, object_source(obj)))


def _read_objects(
    objects: Sequence[Object], files: list[Loaded]
) -> tuple[list[Loaded], list[ObjectVerdict]]:
    """Each object read alone, then all of them checked against each other and the files at
    once. An object clashing only with one rejected itself is rejected too (conservative, and
    it loads on the next change once the first is fixed)."""
    read, problems = _read_alone(objects)
    clashes = _by_file(cross_document_problems([*files, *(loaded for _, loaded in read)]))
    problems.update(
        (_key(o), clashes[str(object_source(o))]) for o, _ in read if _clashed(o, clashes)
    )
    accepted = [loaded for o, loaded in read if _key(o) not in problems]
    return accepted, [_verdict(o, problems[_key(o)]) for o in objects if _key(o) in problems]


def _read_alone(
    objects: Sequence[Object],
) -> tuple[list[tuple[Object, Loaded]], dict[tuple[str, str], Sequence[PolicyProblem]]]:
    """Each object through the schema on its own: those that load, and the others' problems."""
    read: list[tuple[Object, Loaded]] = []
    problems: dict[tuple[str, str], Sequence[PolicyProblem]] = {}
    for obj in objects:
        doc = Document(policy_body(obj), object_source(obj))
        report = Report(doc)
        loaded = read_document(doc, report)
        if report.problems or loaded is None:
            problems[_key(obj)] = report.problems or [
                PolicyProblem(doc.source, "kind", NOT_A_POLICY)
            ]
        else:
            read.append((obj, loaded))
    return read, problems


def _by_file(problems: Iterable[PolicyProblem]) -> dict[str, list[PolicyProblem]]:
    found: dict[str, list[PolicyProblem]] = {}
    for problem in problems:
        found.setdefault(problem.source.file, []).append(problem)
    return found


def _clashed(obj: Object, clashes: dict[str, list[PolicyProblem]]) -> bool:
    return str(object_source(obj)) in clashes


def _verdict(obj: Object, problems: Sequence[PolicyProblem]) -> ObjectVerdict:
    message = "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems)
    return ObjectVerdict(str(obj.get("kind")), _name(obj), _generation(obj), message)


def _name(obj: Object) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def _generation(obj: Object) -> int:
    metadata = obj.get("metadata")
    value = metadata.get("generation", 0) if isinstance(metadata, dict) else 0
    return value if isinstance(value, int) else 0


def _age(obj: Object) -> tuple[str, str, str]:
    metadata = obj.get("metadata")
    created = str(metadata.get("creationTimestamp", "")) if isinstance(metadata, dict) else ""
    return created or NOT_YET_CREATED, str(obj.get("kind", "")), _name(obj)


def _key(obj: Object) -> tuple[str, str]:
    return str(obj.get("kind", "")), _name(obj)


def _canonical(obj: Object) -> str:
    return json.dumps(policy_body(obj), sort_keys=True, separators=(",", ":"))
