"""Values-driven Helm charts: the GPU count lives in `values.yaml`, a template renders it.

Most public charts write `resources: {{- toYaml .Values.resources | nindent 12 }}`, so no
template holds a legacy request and the values file holds no object. A chart migrates whole
when both change together: the values map a template renders as a container's `resources`
loses its legacy entries and gains `claims: [{name: gpu}]`; a sibling values entry (`gpuClaim`
beside `resources`) holds the DRA request (`deviceClassName`, `count`, MIG `selectors`) the
rewriter makes of them; every pod spec that renders the map gets a `resourceClaims` entry
(under `{{- if $.Values.gpuClaim }}`, just above its `containers:`, so inside whatever guard
the workload has); a new template file renders one ResourceClaimTemplate per values entry,
named after the release. Template actions reading the count
(`index .Values.resources.limits "nvidia.com/gpu"`) are pointed at the new entry. Anything the
plan cannot place leaves the chart as it is, and its requests stay listed as left.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.files.roundtrip import parse_stream
from webhook.files.yamlio import YamlError
from webhook.rewrite import rewrite_object
from webhook.types import LegacyResourceMapping

CLAIMS_FILE = "dragate-gpu-claims.yaml"
CLAIM = "gpu"
_VALUES_PATH = r"\$?\.Values\.(?P<path>[A-Za-z_][\w.]*)"
_CONSUMER = re.compile(
    r"^(?P<ind>[ \t]*)resources:[ \t]*\n[ \t]*\{\{-?\s*(?:toYaml\s+"
    + _VALUES_PATH
    + r"|"
    + _VALUES_PATH.replace("path", "piped")
    + r"\s*\|\s*toYaml)\s*\|\s*n?indent\s+\d+\s*\}\}[ \t]*$",
    re.M,
)
_POD_LIST = re.compile(r"^(?P<ind>[ \t]*)(?:init)?[cC]ontainers:[ \t]*(?:#.*)?$")


@dataclass(frozen=True)
class Read:
    """A template action that reads a migrated count, now from `expression`: its line in the
    template as it was, and as it is migrated."""

    line: int
    new_line: int
    name: str
    expression: str


@dataclass
class ChartPlan:
    """What a chart becomes: the new values text, changed templates, the claims file."""

    values: str
    templates: dict[str, str] = field(default_factory=dict)
    claims: str = ""
    reads: dict[str, list[Read]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    """One values map rendered as `resources`, and what replaces its legacy entries."""

    path: tuple[str, ...]
    resources: dict[str, Any]
    request: dict[str, Any]
    names: tuple[str, ...]

    @property
    def key(self) -> tuple[str, ...]:
        last = self.path[-1]
        return (*self.path[:-1], "gpuClaim" if last == "resources" else f"{last}GpuClaim")

    @property
    def values_ref(self) -> str:
        return "$.Values." + ".".join(self.key)

    @property
    def template_name(self) -> str:
        parts = [re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in self.key[:-1]]
        return "-".join([*parts, CLAIM])


def plan_chart(
    values: str,
    templates: Mapping[str, str],
    mappings: Sequence[LegacyResourceMapping],
    native: frozenset[str] = frozenset(),
) -> ChartPlan:
    """The chart with every values map a template renders as `resources` migrated; an
    unchanged `values` when none can be."""
    try:
        stream = parse_stream(values, "values.yaml")
    except YamlError:
        return ChartPlan(values)
    data = stream.docs[0].data if len(stream.docs) == 1 else None
    if not isinstance(data, dict):
        return ChartPlan(values)
    entries = _entries(data, _consumed(templates), mappings, native)
    placed = [e for e in entries if _placeable(e, templates)]
    if not placed:
        return ChartPlan(values)
    stream.update(0, _new_values(data, placed))
    plan = ChartPlan(stream.text(), claims=claims_file(placed))
    for name, text in templates.items():
        _edit_template(plan, name, text, placed)
    return plan


def _consumed(templates: Mapping[str, str]) -> set[tuple[str, ...]]:
    """The values paths some template renders whole as a container's `resources`."""
    found: set[tuple[str, ...]] = set()
    for text in templates.values():
        for match in _CONSUMER.finditer(text):
            found.add(tuple((match["path"] or match["piped"]).split(".")))
    return found


def _entries(
    data: dict[str, Any],
    paths: set[tuple[str, ...]],
    mappings: Sequence[LegacyResourceMapping],
    native: frozenset[str],
) -> list[_Entry]:
    entries = []
    for path in sorted(paths):
        found = _at(data, path)
        entry = _migrated(path, found, mappings, native) if isinstance(found, dict) else None
        if entry is not None:
            entries.append(entry)
    return entries


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _migrated(
    path: tuple[str, ...],
    resources: dict[str, Any],
    mappings: Sequence[LegacyResourceMapping],
    native: frozenset[str],
) -> _Entry | None:
    """The rewriter's own answer for a container asking for `resources`: one claim holding one
    request, or None (nothing legacy, denied, warned about, several resources)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "values"},
        "spec": {"containers": [{"name": "c", "resources": copy.deepcopy(resources)}]},
    }
    result = rewrite_object(pod, mappings, native_resources=native)
    if not result.changed or result.denied or len(result.templates) != 1:
        return None
    requests = result.templates[0]["spec"]["spec"]["devices"]["requests"]
    if len(requests) != 1 or "exactly" not in requests[0]:
        return None
    new = dict(result.object["spec"]["containers"][0]["resources"])
    new["claims"] = [{"name": CLAIM}]
    names = tuple(n for n in _legacy_names(resources) if n not in _legacy_names(new))
    return _Entry(path, new, dict(requests[0]["exactly"]), names)


def _legacy_names(resources: dict[str, Any]) -> list[str]:
    return [
        str(name)
        for kind in ("limits", "requests")
        if isinstance(resources.get(kind), dict)
        for name in resources[kind]
    ]


def _new_values(data: dict[str, Any], entries: list[_Entry]) -> dict[str, Any]:
    new = copy.deepcopy(data)
    for entry in entries:
        parent = _at(new, entry.path[:-1]) if len(entry.path) > 1 else new
        parent[entry.path[-1]] = entry.resources
        parent[entry.key[-1]] = entry.request
    return new


def _placeable(entry: _Entry, templates: Mapping[str, str]) -> bool:
    """Every template rendering the map has a pod spec to take the claim, and none names a
    `resourceClaims` of its own or already uses the sibling key."""
    for text in templates.values():
        spots = _spots(text, entry)
        if spots is None:
            return False
        if spots and ("resourceClaims:" in text or ".".join(entry.key) in text):
            return False
    return True


def _spots(text: str, entry: _Entry) -> list[int] | None:
    """The `containers:` lines (0-based) of the pod specs rendering `entry`, or None when one
    cannot be found or takes no new lines (an action trimming what follows it)."""
    lines = text.split("\n")
    spots: set[int] = set()
    for match in _CONSUMER.finditer(text):
        if tuple((match["path"] or match["piped"]).split(".")) != entry.path:
            continue
        spot = _pod_list(lines, text.count("\n", 0, match.start()), len(match["ind"]))
        if spot is None or (spot and lines[spot - 1].rstrip().endswith("-}}")):
            return None
        spots.add(spot)
    return sorted(spots)


def _pod_list(lines: list[str], line: int, indent: int) -> int | None:
    """The `containers:` line holding the container whose `resources:` is at `line`: above the
    container's item (`- `, less indented), the first key no more indented than its dash."""
    dash = None
    for index in range(line - 1, -1, -1):
        text = lines[index]
        stripped = text.strip()
        if not stripped or stripped.startswith(("#", "{{")):
            continue
        column = len(text) - len(text.lstrip())
        if dash is None and column < indent and stripped.startswith("- "):
            dash = column
        elif dash is not None and column <= dash and not stripped.startswith("- "):
            return index if _POD_LIST.match(text) else None
    return None


def _edit_template(plan: ChartPlan, name: str, text: str, entries: list[_Entry]) -> None:
    lines = text.split("\n")
    spots = sorted((s, e) for e in entries for s in _spots(text, e) or [])
    reads: list[Read] = []
    for index in range(len(lines)):
        moved = index + 1 + len(_CLAIM_LINES) * sum(s <= index for s, _ in spots)
        for entry in entries:
            lines[index], found = _rewire(lines[index], entry)
            reads.extend(Read(index + 1, moved, n, entry.values_ref + ".count") for n in found)
    for spot, entry in reversed(spots):
        lines[spot:spot] = _claim_lines(lines[spot], entry)
    if spots or reads:
        plan.templates[name] = "\n".join(lines)
        plan.reads[name] = reads


_CLAIM_LINES = (
    "{{{{- if {ref} }}}}",
    "resourceClaims:",
    "  - name: {claim}",
    "    resourceClaimTemplateName: {{{{ $.Release.Name }}}}-{name}",
    "{{{{- end }}}}",
)


def _claim_lines(containers: str, entry: _Entry) -> list[str]:
    ind = containers[: len(containers) - len(containers.lstrip())]
    fields = {"ref": entry.values_ref, "claim": CLAIM, "name": entry.template_name}
    return [ind + line.format(**fields) for line in _CLAIM_LINES]


def _rewire(line: str, entry: _Entry) -> tuple[str, list[str]]:
    """`line` with each `index .Values.<path>.limits "<name>"` reading `entry`'s count."""
    found: list[str] = []
    base = re.escape(".Values." + ".".join(entry.path))
    for name in entry.names:
        pattern = rf"index\s+\$?{base}\.(?:limits|requests)\s+\"{re.escape(name)}\""
        line, count = re.subn(pattern, entry.values_ref + ".count", line)
        found.extend([name] * count)
    return line, found


def claims_file(entries: list[_Entry]) -> str:
    """The template file rendering one ResourceClaimTemplate per migrated values entry."""
    return "".join(_claim_template(e) for e in entries)


def _claim_template(entry: _Entry) -> str:
    ref = entry.values_ref.replace("$.", ".", 1)
    return f"""\
{{{{- if {ref} }}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {{{{ .Release.Name }}}}-{entry.template_name}
  labels:
    app.kubernetes.io/instance: {{{{ .Release.Name | quote }}}}
    app.kubernetes.io/managed-by: {{{{ .Release.Service | quote }}}}
spec:
  spec:
    devices:
      requests:
        - name: {CLAIM}
          exactly:
            {{{{- toYaml {ref} | nindent 12 }}}}
{{{{- end }}}}
"""


@dataclass
class ChartWork:
    """The plans of every chart among the files walked, by file: new texts (the claims files
    among them, which do not exist yet) and the reads pointed at the new values entries."""

    texts: dict[str, str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    reads: dict[str, list[Read]] = field(default_factory=dict)


def plan_charts(
    files: Sequence[str],
    read: Callable[[str], str],
    mappings: Sequence[LegacyResourceMapping],
    native: frozenset[str],
) -> ChartWork:
    """Plan each chart whose `values.yaml` is among `files` (a `Chart.yaml` beside it), with
    its templates among `files`; `read` gives a file's text."""
    work = ChartWork()
    for values in files:
        root = Path(values).parent
        claims = root / "templates" / CLAIMS_FILE
        if Path(values).name != "values.yaml" or not (root / "Chart.yaml").is_file():
            continue
        if claims.exists():
            continue
        templates = [f for f in files if Path(f).parent.is_relative_to(root / "templates")]
        plan = plan_chart(read(values), {f: read(f) for f in templates}, mappings, native)
        if plan.claims:
            work.texts.update({values: plan.values, **plan.templates, str(claims): plan.claims})
            work.created.append(str(claims))
            work.reads.update(plan.reads)
    return work
