"""The CRDs of the policy kinds agree with the loader on every field, and the shipped files are
exactly what the generator makes now (regenerating them is the fix: the failure says how).

The API server's half of the agreement (the same documents judged by the real kube-apiserver)
is tests/e2e/test_crds.py; both read the table in tests/policy/crd_documents.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
import yaml
from policy.crd_documents import CASES, FULL, Case

from webhook.policy.celspec import Cel
from webhook.policy.kinds import CLASS_POLICY, KINDS, Kind
from webhook.policy.loading import PolicyError, parse_policies
from webhook.policy.openapi import anchored, schema_of
from webhook.policy.policycrds import SHAPES, crd_files, crd_texts, policy_crd
from webhook.policy.schema import Bool, Int, ListOf, MapOf, Obj, OneOf, Spec, Str

REPO = Path(__file__).resolve().parents[2]
SHIPPED = [REPO / "webhook" / "defaults" / "crds", REPO / "charts" / "dragate" / "crds"]
REGENERATE = "dragate crds --write webhook/defaults/crds --write charts/dragate/crds"


# --- the files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", SHIPPED, ids=["package", "chart"])
def test_shipped_files_are_the_generator_s_output(folder: Path) -> None:
    made = crd_texts()
    shipped = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.yaml")}
    assert sorted(shipped) == sorted(made), f"{folder}: files differ; run `{REGENERATE}`"
    for name, text in made.items():
        assert shipped[name] == text, f"{folder}/{name} is stale; run `{REGENERATE}`"


def test_every_policy_kind_has_a_cluster_scoped_crd() -> None:
    assert set(SHAPES) == set(KINDS)
    files = crd_files()
    for name in KINDS:
        [crd] = [c for c in files.values() if c["spec"]["names"]["kind"] == name]
        assert crd["spec"]["group"] == "dragate.io" and crd["spec"]["scope"] == "Cluster"
        [version] = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", 1, 1)
        assert version["subresources"] == {"status": {}}
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        assert {"conditions", "observedGeneration"} <= set(status)


# --- every field of the loader, with its type ----------------------------------------------------


def fields_of(spec: Spec, path: str) -> Iterator[tuple[str, Spec]]:
    """Every (path, spec) below `spec`: `spec.quota[].maxDevices`, `...matchLabels{}`."""
    yield path, spec
    if isinstance(spec, Obj):
        for name, field in spec.fields.items():
            yield from fields_of(field, f"{path}.{name}")
    elif isinstance(spec, ListOf):
        yield from fields_of(spec.item, f"{path}[]")
    elif isinstance(spec, MapOf):
        yield from fields_of(spec.value, f"{path}{{}}")


def schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    for step in re.findall(r"\w+|\[\]|\{\}", path):
        if step == "[]":
            schema = schema["items"]
        elif step == "{}":
            schema = schema["additionalProperties"]
        else:
            assert step in schema.get("properties", {}), f"{path}: no {step} in the CRD"
            schema = schema["properties"][step]
    return schema


def expected_type(spec: Spec) -> str:
    for kinds, name in (((Str, OneOf, Cel), "string"), ((Int,), "integer"), ((Bool,), "boolean"),
                        ((ListOf,), "array"), ((Obj, MapOf), "object")):  # fmt: skip
        if isinstance(spec, kinds):
            return name
    raise AssertionError(f"unknown spec {spec!r}")


def shipped_schema(kind: str) -> dict[str, Any]:
    plural = SHAPES[kind].plural
    crd = yaml.safe_load((SHIPPED[0] / f"{plural}.yaml").read_text(encoding="utf-8"))
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


LOADER_FIELDS = [
    (kind, path, spec)
    for kind, k in KINDS.items()
    for path, spec in fields_of(k.document.fields["spec"], "spec")
]


@pytest.mark.parametrize(("kind", "path", "spec"), LOADER_FIELDS,
                         ids=[f"{k}:{p}" for k, p, _ in LOADER_FIELDS])  # fmt: skip
def test_every_loader_field_is_in_the_shipped_crd(kind: str, path: str, spec: Spec) -> None:
    at = schema_at(shipped_schema(kind), path)
    assert at["type"] == expected_type(spec), path
    if isinstance(spec, OneOf):
        assert at["enum"] == [str(c) for c in spec.choices], path
    if isinstance(spec, Int):
        assert at["minimum"] == spec.minimum, path
    if isinstance(spec, Str) and spec.pattern is not None:
        assert at["pattern"] == anchored(spec.pattern), path
    if isinstance(spec, Obj):
        assert at.get("required", []) == list(spec.required), path
        assert not set(at["properties"]) - set(spec.fields), f"{path}: fields the loader refuses"
        rules = [(r.expression, r.message) for r in spec.rules]
        assert [(v["rule"], v["message"]) for v in at.get("x-kubernetes-validations", [])] == rules


def test_the_document_requires_what_the_loader_requires() -> None:
    for kind, k in KINDS.items():
        required = [name for name in k.document.required if name != "metadata"]
        assert shipped_schema(kind).get("required", []) == required, kind


def objects_of(spec: Spec) -> Iterator[Obj]:
    return (s for _, s in fields_of(spec, "") if isinstance(s, Obj))


def test_every_cross_field_check_has_a_rule_or_says_why_not() -> None:
    """A check added to a kind without CEL for the CRD fails here, not in a cluster."""
    for kind in KINDS.values():
        for obj in objects_of(kind.document):
            if obj.check is not None:
                assert obj.rules or obj.loader_only, (kind.name, sorted(obj.fields))


def test_a_field_added_to_a_kind_reaches_its_crd() -> None:
    """What another change to the kinds does (a `failurePolicy` enum, an `enforcement` field
    with its column) shows up in the generated CRD with no change to the generator."""
    spec = Obj({**CLASS_POLICY.fields, "failurePolicy": OneOf(("Fail", "Ignore")),
                "enforcement": OneOf(("Deny", "Warn", "Audit"))})  # fmt: skip
    document = Obj({**KINDS["DeviceClassPolicy"].document.fields, "spec": spec},
                   required=("metadata", "spec"))  # fmt: skip
    crd = policy_crd(Kind("DeviceClassPolicy", document, KINDS["DeviceClassPolicy"].build),
                     SHAPES["DeviceClassPolicy"])  # fmt: skip
    [version] = crd["spec"]["versions"]
    fields = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert fields["failurePolicy"] == {"type": "string", "enum": ["Fail", "Ignore"]}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["Classes", "Enforcement", "Ready", "Age"]
    today = crd_files()["deviceclasspolicies.yaml"]["spec"]["versions"][0]
    has_field = "enforcement" in CLASS_POLICY.fields
    assert ("Enforcement" in [c["name"] for c in today["additionalPrinterColumns"]]) is has_field


def test_an_unknown_spec_type_is_refused_by_name() -> None:
    class Quantity:
        noun = "a quantity"

        def read(self, value: Any, at: Any, report: Any) -> Any:
            return value

    with pytest.raises(TypeError, match="no OpenAPI schema for Quantity"):
        schema_of(Quantity())


@pytest.mark.parametrize(("spec", "expected"), [
    (ListOf(Str()), "set"),
    (ListOf(OneOf(("a", "b"))), "set"),
    (ListOf(Int()), "atomic"),
    (ListOf(Obj({"k": Str()}, required=("k",)), unique_by=("k",)), "map"),
    (ListOf(Obj({"k": Str()}), unique_by=("k",)), "atomic"),
    (ListOf(Obj({"a": Str(), "b": Str()}, required=("a", "b")), unique_by=("a", "b")), "atomic"),
], ids=["strings", "words", "integers", "keyed", "key-not-required", "two-keys"])  # fmt: skip
def test_list_types(spec: ListOf, expected: str) -> None:
    made = schema_of(spec)
    assert made["x-kubernetes-list-type"] == expected
    assert ("x-kubernetes-list-map-keys" in made) is (expected == "map")


# --- patterns: one text for Python and the API server's RE2 -----------------------------------


PATTERNED = sorted(
    {(path, s) for k in KINDS.values() for path, s in fields_of(k.document, "")
     if isinstance(s, Str) and s.pattern is not None},
    key=lambda item: item[0],
)  # fmt: skip
SAMPLES = ["a", "team-a", "Team_A", "-a", "a-", "a.b", "a..b", "a" * 63, "a" * 64, "group:",
           "group:x", "grou", "group", "g", "x\ny", "system:serviceaccount:ci:runner",
           "system:serviceaccount:ci:a b", "system:serviceaccount:ci", "alice", "",
           " "]  # fmt: skip


@pytest.mark.parametrize(("path", "spec"), PATTERNED, ids=[p for p, _ in PATTERNED])
def test_patterns_match_alike_in_python_and_re2(path: str, spec: Str) -> None:
    assert spec.pattern is not None
    go = re2.compile(anchored(spec.pattern))
    for sample in SAMPLES:
        assert bool(go.search(sample)) is bool(spec.pattern.fullmatch(sample)), (path, sample)


# --- the documents table: the loader's half ---------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_loader_judges_the_documents_table(case: Case) -> None:
    text = yaml.safe_dump(case.document())
    try:
        parse_policies(text, f"{case.id}.yaml")
        loaded = True
    except PolicyError:
        loaded = False
    assert loaded is case.loads, case.id


def covered(spec: Spec, value: Any, path: str) -> Iterator[str]:
    """The loader's field paths (as `fields_of` writes them) a value of `spec` holds."""
    yield path
    if isinstance(spec, Obj):
        for name, inner in value.items():
            yield from covered(spec.fields[name], inner, f"{path}.{name}")
    elif isinstance(spec, ListOf):
        for item in value:
            yield from covered(spec.item, item, f"{path}[]")
    elif isinstance(spec, MapOf):
        for inner in value.values():
            yield from covered(spec.value, inner, f"{path}{{}}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_full_documents_hold_every_loader_field(kind: str) -> None:
    """So every field is spoiled in the table, on the loader and the API server alike. A field
    added to a kind fails here until FULL (tests/policy/crd_documents.py) gives it a value."""
    spec = KINDS[kind].document.fields["spec"]
    wanted = {path for path, _ in fields_of(spec, "spec")}
    missing = wanted - set(covered(spec, FULL[kind], "spec"))
    assert not missing, f"give these a value in FULL[{kind!r}]: {sorted(missing)}"


def test_loader_only_cases_are_ones_the_loader_refuses() -> None:
    for case in CASES:
        assert not (case.loads and case.loader_only), case.id
    assert {c.kind for c in CASES} == set(KINDS)
