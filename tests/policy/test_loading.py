"""Policy files: every field read, every mistake reported with its line, all at once."""

from __future__ import annotations

import filecmp
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from webhook.policy.loading import (
    PolicyError,
    PolicyProblem,
    default_mappings,
    default_policy_dir,
    load_policies,
    parse_policies,
)
from webhook.types import (
    Action,
    DeviceClassPolicy,
    FailurePolicy,
    LabelRequirement,
    LabelSelector,
    LegacyResourceMapping,
    MappingAction,
    QuotaLimit,
    ResourceMapping,
    Settings,
    Source,
    Tenant,
    Validation,
)

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "policies"

HEAD = "apiVersion: dragate.io/v1alpha1\n"


def problems(text: str) -> list[str]:
    """The problems `text` has, as the user sees them (file `t.yaml`)."""
    with pytest.raises(PolicyError) as caught:
        parse_policies(dedent(text), "t.yaml")
    return [str(p) for p in caught.value.problems]


# --------------------------------------------------------------------------- happy paths


def test_every_tenant_field_is_read() -> None:
    policies = parse_policies(
        HEAD
        + dedent("""\
        kind: Tenant
        metadata: {name: team-a, labels: {owner: ml}, annotations: {note: ""}}
        spec:
          namespaces: [team-a, team-a-batch]
          namespaceSelector:
            matchLabels: {dragate.io/tenant: team-a}
            matchExpressions:
            - {key: tier, operator: In, values: [gold, silver]}
            - {key: sandbox, operator: DoesNotExist}
          allowedDeviceClasses: [gpu.nvidia.com]
          adminAccess: true
          quota:
          - {deviceClassName: gpu.nvidia.com, maxDevices: 8, maxDevicesPerClaim: 4}
          - {deviceClassName: mig.nvidia.com, maxDevicesPerClaim: 0}
          legacyMappingAction: Warn
        """),
        "t.yaml",
    )
    assert policies.tenants == (
        Tenant(
            name="team-a",
            namespaces=frozenset({"team-a", "team-a-batch"}),
            namespace_selector=LabelSelector(
                {"dragate.io/tenant": "team-a"},
                (
                    LabelRequirement("tier", "In", ("gold", "silver")),
                    LabelRequirement("sandbox", "DoesNotExist"),
                ),
            ),
            allowed_device_classes=frozenset({"gpu.nvidia.com"}),
            admin_access=True,
            quota=(QuotaLimit("gpu.nvidia.com", 8, 4), QuotaLimit("mig.nvidia.com", None, 0)),
            mapping_action=MappingAction.WARN,
            source=Source("t.yaml", 1),
        ),
    )


def test_tenant_defaults() -> None:
    text = HEAD + "kind: Tenant\nmetadata: {name: a}\nspec: {namespaces: [a]}"
    tenant = parse_policies(text).tenants[0]
    assert (tenant.allowed_device_classes, tenant.admin_access, tenant.quota) == (None, False, ())
    assert (tenant.namespace_selector, tenant.mapping_action) == (None, None)


def test_every_device_class_policy_field_is_read() -> None:
    policy = parse_policies(
        HEAD
        + dedent("""\
        kind: DeviceClassPolicy
        metadata: {name: gpu-guardrails}
        spec:
          deviceClassNames: [gpu.nvidia.com, mig.nvidia.com]
          maxCountPerRequest: 4
          allowAllocationModeAll: false
          failurePolicy: Ignore
          validations:
          - expression: "request.count <= 2"
            message: at most two
            action: Warn
          - expression: "!request.adminAccess"
        """),
        "t.yaml",
    ).class_policies[0]
    assert policy == DeviceClassPolicy(
        name="gpu-guardrails",
        device_class_names=frozenset({"gpu.nvidia.com", "mig.nvidia.com"}),
        max_count_per_request=4,
        allow_allocation_mode_all=False,
        validations=(
            Validation("request.count <= 2", "at most two", Action.WARN),
            Validation("!request.adminAccess", "!request.adminAccess", Action.DENY),
        ),
        source=Source("t.yaml", 1),
        failure_policy=FailurePolicy.IGNORE,
    )


def test_device_class_policy_defaults() -> None:
    policy = parse_policies(HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec: {}")
    assert policy.class_policies[0] == DeviceClassPolicy("p", frozenset(), source=Source(line=1))
    assert policy.class_policies[0].failure_policy is FailurePolicy.FAIL


def test_every_mapping_field_is_read() -> None:
    mapping = parse_policies(
        HEAD
        + dedent("""\
        kind: LegacyResourceMapping
        metadata: {name: nvidia}
        spec:
          action: Deny
          resources:
          - {resourceName: nvidia.com/gpu, deviceClassName: gpu.nvidia.com}
          - resourceNamePrefix: nvidia.com/mig-
            deviceClassName: mig.nvidia.com
            selector: "device.attributes['gpu.nvidia.com'].profile == '{suffix}'"
        """),
        "t.yaml",
    ).mappings
    assert mapping == (
        LegacyResourceMapping(
            name="nvidia",
            action=MappingAction.DENY,
            resources=(
                ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu"),
                ResourceMapping(
                    "mig.nvidia.com",
                    resource_name_prefix="nvidia.com/mig-",
                    selector="device.attributes['gpu.nvidia.com'].profile == '{suffix}'",
                ),
            ),
            source=Source("t.yaml", 1),
        ),
    )


def test_every_settings_field_is_read() -> None:
    settings = parse_policies(
        HEAD
        + dedent("""\
        kind: Settings
        metadata: {name: cluster}
        spec:
          denyUnknownNamespaces: true
          feasibility: Deny
          adminAccessEditors: [alice, "group:gpu-admins"]
          exemptNamespaces: [kube-system]
          exemptServiceAccounts: ["system:serviceaccount:kube-system:resourceclaim-controller"]
          gangKinds: [JobSet]
        """)
    ).settings
    assert settings == Settings(
        deny_unknown_namespaces=True,
        feasibility=Action.DENY,
        admin_access_editors=frozenset({"alice", "group:gpu-admins"}),
        exempt_namespaces=frozenset({"kube-system"}),
        exempt_service_accounts=frozenset(
            {"system:serviceaccount:kube-system:resourceclaim-controller"}
        ),
        gang_kinds=frozenset({"JobSet"}),
    )


def test_settings_need_no_spec_and_default_when_absent() -> None:
    assert parse_policies(HEAD + "kind: Settings\nmetadata: {name: s}").settings == Settings()
    assert parse_policies("").settings == Settings()


# --------------------------------------------------------------------------- problems

TENANT = HEAD + "kind: Tenant\nmetadata: {name: team-a}\n"  # spec starts on line 4


POLICY = HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  validations:\n"
MAPPING = HEAD + dedent("""\
    kind: LegacyResourceMapping
    metadata: {name: m}
    spec:
      resources:
      - resourceNamePrefix: nvidia.com/mig-
        deviceClassName: mig.nvidia.com
    """)


def case(name: str, text: str, *expected: str) -> Any:
    """One row of the problem table: a policy text and every problem it must produce."""
    return pytest.param(text, list(expected), id=name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # --- documents, apiVersion, kind, metadata
        case(
            "not-a-mapping",
            "- a list",
            "t.yaml:1: expected a policy document (a mapping with apiVersion, kind, "
            "metadata, spec), got a list",
        ),
        case(
            "apiVersion-missing",
            "kind: Tenant\nmetadata: {name: a}\nspec: {namespaces: [a]}",
            "t.yaml:1: apiVersion: required field is missing",
        ),
        case(
            "apiVersion-wrong",
            "apiVersion: dragate.io/v1\nkind: Tenant\nmetadata: {name: a}\nspec: {namespaces: [a]}",
            't.yaml:1: apiVersion: expected dragate.io/v1alpha1, got "dragate.io/v1" '
            '(did you mean "dragate.io/v1alpha1"?)',
        ),
        case(
            "not-a-dragate-object",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}",
            't.yaml:1: apiVersion: expected dragate.io/v1alpha1, got "apps/v1"',
            "t.yaml:2: kind: expected one of Tenant, DeviceClassPolicy, LegacyResourceMapping, "
            'Settings, got "Deployment"',
        ),
        case(
            "kind-unknown",
            HEAD + "kind: tenant\n",
            "t.yaml:2: kind: expected one of Tenant, DeviceClassPolicy, LegacyResourceMapping, "
            'Settings, got "tenant" (did you mean "Tenant"?)',
        ),
        case(
            "kind-missing",
            HEAD + "metadata: {name: a}",
            "t.yaml:1: kind: required field is missing",
        ),
        case(
            "metadata-missing",
            HEAD + "kind: Tenant\nspec: {namespaces: [a]}",
            "t.yaml:1: metadata: required field is missing",
        ),
        case(
            "name-missing",
            HEAD + "kind: Tenant\nmetadata: {}\nspec: {namespaces: [a]}",
            "t.yaml:3: metadata.name: required field is missing",
        ),
        case(
            "name-invalid",
            HEAD + "kind: Tenant\nmetadata:\n  name: Team_A\nspec: {namespaces: [a]}",
            "t.yaml:4: metadata.name: expected a lowercase DNS name (a-z, 0-9, '-', '.'), "
            'got "Team_A"',
        ),
        case(
            "metadata-unknown-field",
            HEAD + "kind: Tenant\nmetadata: {name: a, nmae: b}\nspec: {namespaces: [a]}",
            't.yaml:3: metadata.nmae: unknown field (did you mean "name"?)',
        ),
        case(
            "top-unknown-field",
            HEAD + "kind: Tenant\nmetadata: {name: a}\nspec: {namespaces: [a]}\nstatus: {}",
            "t.yaml:5: status: unknown field (known fields: apiVersion, kind, metadata, spec)",
        ),
        case(
            "spec-missing",
            HEAD + "kind: Tenant\nmetadata: {name: a}",
            "t.yaml:1: spec: required field is missing",
        ),
        # --- Tenant
        case(
            "quota-unknown-field",
            TENANT + "spec:\n  namespaces: [a]\n  quota:\n  - {deviceClassName: gpu, maxDevice: 3}",
            't.yaml:7: spec.quota[0].maxDevice: unknown field (did you mean "maxDevices"?)',
        ),
        case(
            "quota-not-integer",
            TENANT + "spec:\n  namespaces: [a]\n  quota:\n  - deviceClassName: gpu\n"
            "    maxDevices: eight",
            't.yaml:8: spec.quota[0].maxDevices: expected an integer >= 0, got "eight"',
        ),
        case(
            "quota-negative",
            TENANT + "spec:\n  namespaces: [a]\n  quota:\n  - deviceClassName: gpu\n"
            "    maxDevicesPerClaim: -1",
            "t.yaml:8: spec.quota[0].maxDevicesPerClaim: expected an integer >= 0, got -1",
        ),
        case(
            "quota-float",
            TENANT
            + "spec:\n  namespaces: [a]\n  quota:\n  - {deviceClassName: gpu, maxDevices: 1.5}",
            "t.yaml:7: spec.quota[0].maxDevices: expected an integer >= 0, got 1.5",
        ),
        case(
            "quota-bool",
            TENANT + "spec:\n  namespaces: [a]\n  quota:\n"
            "  - {deviceClassName: gpu, maxDevices: true}",
            "t.yaml:7: spec.quota[0].maxDevices: expected an integer >= 0, got true",
        ),
        case(
            "quota-class-missing",
            TENANT + "spec:\n  namespaces: [a]\n  quota:\n  - {maxDevices: 1}",
            "t.yaml:7: spec.quota[0].deviceClassName: required field is missing",
        ),
        case(
            "quota-same-class-twice",
            TENANT
            + "spec:\n  namespaces: [a]\n  quota:\n  - {deviceClassName: gpu, maxDevices: 1}\n"
            "  - {deviceClassName: gpu, maxDevices: 2}",
            't.yaml:8: spec.quota[1].deviceClassName: "gpu" is listed twice '
            "(first at spec.quota[0].deviceClassName, line 7)",
        ),
        case(
            "quota-not-a-list",
            TENANT + "spec:\n  namespaces: [a]\n  quota: {deviceClassName: gpu}",
            "t.yaml:6: spec.quota: expected a list of quota entries, got a mapping",
        ),
        case(
            "namespaces-not-a-list",
            TENANT + "spec:\n  namespaces: team-a",
            't.yaml:5: spec.namespaces: expected a list of namespace names, got "team-a"',
        ),
        case(
            "namespace-invalid-and-repeated",
            TENANT + "spec:\n  namespaces: [a, Team.B, a]",
            "t.yaml:5: spec.namespaces[1]: expected a namespace name (a-z, 0-9, '-', at most 63 "
            'characters), got "Team.B"',
            't.yaml:5: spec.namespaces[2]: "a" is listed twice (first at spec.namespaces[0], line 5)',  # noqa: E501
        ),
        case(
            "tenant-without-namespaces",
            TENANT + "spec:\n  adminAccess: true",
            "t.yaml:4: spec: a tenant needs namespaces, a namespaceSelector or both",
        ),
        case(
            "tenant-empty-namespaces",
            TENANT + "spec:\n  namespaces: []",
            "t.yaml:4: spec: a tenant needs namespaces, a namespaceSelector or both",
        ),
        case(
            "bool-from-yes",
            TENANT + "spec:\n  namespaces: [a]\n  adminAccess: yes",
            't.yaml:6: spec.adminAccess: expected true or false, got "yes"',
        ),
        case(
            "class-name-invalid",
            TENANT + "spec:\n  namespaces: [a]\n  allowedDeviceClasses: [GPU]",
            "t.yaml:6: spec.allowedDeviceClasses[0]: expected a DeviceClass name "
            "(a-z, 0-9, '-', '.'), "
            'got "GPU"',
        ),
        case(
            "tenant-mapping-action-case",
            TENANT + "spec:\n  namespaces: [a]\n  legacyMappingAction: rewrite",
            "t.yaml:6: spec.legacyMappingAction: expected one of Auto, Rewrite, Native, Warn, "
            'Deny, Ignore, got "rewrite" (did you mean "Rewrite"?)',
        ),
        case(
            "selector-empty",
            TENANT + "spec:\n  namespaceSelector: {}",
            "t.yaml:5: spec.namespaceSelector: an empty selector matches every namespace; "
            "add matchLabels or matchExpressions",
        ),
        case(
            "label-value-not-string",
            TENANT + "spec:\n  namespaceSelector:\n    matchLabels: {tier: 1}",
            "t.yaml:6: spec.namespaceSelector.matchLabels.tier: expected a string, got 1",
        ),
        case(
            "selector-operator-case",
            TENANT + "spec:\n  namespaceSelector:\n    matchExpressions:\n"
            "    - {key: tier, operator: in, values: [a]}",
            "t.yaml:7: spec.namespaceSelector.matchExpressions[0].operator: "
            "expected one of In, NotIn, "
            'Exists, DoesNotExist, got "in" (did you mean "In"?)',
        ),
        case(
            "operator-In-without-values",
            TENANT + "spec:\n  namespaceSelector:\n    matchExpressions:\n"
            "    - {key: tier, operator: In}",
            "t.yaml:7: spec.namespaceSelector.matchExpressions[0].values: operator In needs at least "  # noqa: E501
            "one value",
        ),
        case(
            "operator-Exists-with-values",
            TENANT + "spec:\n  namespaceSelector:\n    matchExpressions:\n"
            "    - {key: tier, operator: Exists, values: [a]}",
            "t.yaml:7: spec.namespaceSelector.matchExpressions[0].values: operator Exists takes no "
            "values",
        ),
        case(
            "selector-typo",
            TENANT + "spec:\n  namespaceSelector:\n    matchLabel: {a: b}",
            "t.yaml:6: spec.namespaceSelector.matchLabel: "
            'unknown field (did you mean "matchLabels"?)',
        ),
        # --- DeviceClassPolicy
        case(
            "max-count-zero",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  maxCountPerRequest: 0",
            "t.yaml:5: spec.maxCountPerRequest: expected an integer >= 1, got 0",
        ),
        case(
            "allocation-mode-all-not-bool",
            HEAD
            + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  allowAllocationModeAll: no",
            't.yaml:5: spec.allowAllocationModeAll: expected true or false, got "no"',
        ),
        case(
            "device-class-names-typo",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  deviceClassName: [a]",
            't.yaml:5: spec.deviceClassName: unknown field (did you mean "deviceClassNames"?)',
        ),
        case(
            "validation-action-unknown",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  validations:\n"
            "  - {expression: 'true', action: Block}",
            't.yaml:6: spec.validations[0].action: expected one of Deny, Warn, Audit, got "Block"',
        ),
        case(
            "validation-expression-missing",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  validations:\n"
            "  - {message: hi}",
            "t.yaml:6: spec.validations[0].expression: required field is missing",
        ),
        case(
            "validation-expression-empty",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  validations:\n"
            "  - {expression: ''}",
            "t.yaml:6: spec.validations[0].expression: "
            'expected a CEL expression (a non-empty string), got ""',
        ),
        case(
            "validation-never-bool",
            POLICY + "  - {expression: 'request.count + 1'}",
            "t.yaml:6: spec.validations[0].expression: does not compile: must evaluate to bool "
            "or the unknown type, not int (column 1)",
        ),
        case(
            "validation-unknown-variable",
            POLICY + "  - {expression: 'req.count > 1'}",
            "t.yaml:6: spec.validations[0].expression: does not compile: "
            "undeclared reference to 'req' (column 1)",
        ),
        case(
            "failure-policy-wrong-case",
            HEAD + "kind: DeviceClassPolicy\nmetadata: {name: p}\nspec:\n  failurePolicy: ignore",
            't.yaml:5: spec.failurePolicy: expected one of Fail, Ignore, got "ignore" '
            '(did you mean "Ignore"?)',
        ),
        case(
            "validation-undefined-request-field",
            POLICY + "  - {expression: 'request.cnt <= 4'}",
            "t.yaml:6: spec.validations[0].expression: does not compile: "
            "undefined field 'cnt' (column 1)",
        ),
        case(
            "validation-undefined-object-field-on-every-kind",
            POLICY + "  - {expression: 'object.spec.nope == 1'}",
            "t.yaml:6: spec.validations[0].expression: does not compile: "
            "undefined field 'nope' (column 1)",
        ),
        case(
            "selector-unknown-variable",
            MAPPING + "    selector: \"request.count == '{suffix}'\"",
            "t.yaml:8: spec.resources[0].selector: does not compile: undeclared reference to "
            """'request' (column 1) (with {suffix} = "1g.10gb")""",
        ),
        # --- LegacyResourceMapping
        case(
            "mapping-resources-missing",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  action: Rewrite",
            "t.yaml:4: spec.resources: required field is missing",
        ),
        case(
            "mapping-action-unknown",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  action: Mutate\n"
            "  resources: []",
            "t.yaml:5: spec.action: expected one of Auto, Rewrite, Native, Warn, Deny, Ignore, "
            'got "Mutate"',
        ),
        case(
            "mapping-both-names",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  resources:\n"
            "  - {resourceName: a/b, resourceNamePrefix: a/, deviceClassName: c}",
            "t.yaml:6: spec.resources[0]: set resourceName or resourceNamePrefix, not both",
        ),
        case(
            "mapping-neither-name",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  resources:\n"
            "  - {deviceClassName: c}",
            "t.yaml:6: spec.resources[0]: set resourceName (exact) or resourceNamePrefix",
        ),
        case(
            "mapping-class-missing",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  resources:\n"
            "  - {resourceName: a/b}",
            "t.yaml:6: spec.resources[0].deviceClassName: required field is missing",
        ),
        case(
            "mapping-same-resource-twice",
            HEAD + "kind: LegacyResourceMapping\nmetadata: {name: m}\nspec:\n  resources:\n"
            "  - {resourceName: a/b, deviceClassName: c}\n"
            "  - {resourceName: a/b, deviceClassName: d}",
            't.yaml:7: spec.resources[1].resourceName: "a/b" is listed twice '
            "(first at spec.resources[0].resourceName, line 6)",
        ),
        # --- Settings
        case(
            "gang-kind-unknown",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec:\n  gangKinds: [Deployment]",
            "t.yaml:5: spec.gangKinds[0]: expected one of Job, JobSet, LeaderWorkerSet, PodGroup, "
            'got "Deployment"',
        ),
        case(
            "feasibility-audit",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec:\n  feasibility: Audit",
            't.yaml:5: spec.feasibility: expected one of Deny, Warn, got "Audit"',
        ),
        case(
            "editor-empty-group",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec:\n  adminAccessEditors: ['group:']",
            't.yaml:5: spec.adminAccessEditors[0]: expected a user name or "group:NAME", '
            'got "group:"',
        ),
        case(
            "service-account-format",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec:\n  exemptServiceAccounts: [default]",
            "t.yaml:5: spec.exemptServiceAccounts[0]: expected "
            '"system:serviceaccount:NAMESPACE:NAME", got "default"',
        ),
        case(
            "settings-typo",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec:\n  denyUnknownNamespace: true",
            "t.yaml:5: spec.denyUnknownNamespace: unknown field (did you mean "
            '"denyUnknownNamespaces"?)',
        ),
        case(
            "spec-null",
            HEAD + "kind: Settings\nmetadata: {name: s}\nspec: null",
            "t.yaml:4: spec: expected a mapping, got null",
        ),
        # --- YAML itself
        case(
            "yaml-syntax",
            "apiVersion: dragate.io/v1alpha1\nkind: [Tenant\n",
            "t.yaml:3: not valid YAML or JSON: while parsing a flow sequence, expected ',' or ']', "
            "but got '<stream end>'",
        ),
    ],
)
def test_problem(text: str, expected: list[str]) -> None:
    assert problems(text) == expected


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            POLICY + "  - {expression: 'request.count <'}",
            "t.yaml:6: spec.validations[0].expression",
        ),
        (
            MAPPING + "    selector: \"device.attributes['gpu.nvidia.com'].profile == {suffix}\"",
            "t.yaml:8: spec.resources[0].selector",
        ),
    ],
    ids=["validation", "selector-template"],
)
def test_cel_syntax_errors_are_reported_where_they_are(text: str, where: str) -> None:
    (problem,) = problems(text)
    assert problem.startswith(f"{where}: does not compile: syntax error")


def test_validations_are_compiled_with_every_documented_variable() -> None:
    every = " && ".join(
        [
            "request.count > 0",
            "has(object.metadata)",
            "oldObject == null",
            "namespace == null",
            "tenant == 'a'",
            "operation == 'CREATE'",
            "userInfo.username != ''",
        ]
    )
    policy = parse_policies(POLICY + f'  - expression: "{every}"').class_policies[0]
    program = policy.validations[0].program
    assert program is not None
    activation = {
        "request": {"count": 1},
        "object": {"metadata": {}},
        "oldObject": None,
        "namespace": None,
        "tenant": "a",
        "operation": "CREATE",
        "userInfo": {"username": "alice"},
    }
    assert program.evaluate(activation).value is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TENANT + "spec: {namespaces: [a]}\n---\n" + TENANT + "spec: {namespaces: [b]}",
            ['t.yaml:8: metadata.name: Tenant "team-a" is already defined at t.yaml:3'],
        ),
        (
            TENANT + "spec: {namespaces: [a]}\n---\n" + HEAD + "kind: DeviceClassPolicy\n"
            "metadata: {name: team-a}\nspec: {}",
            [],
        ),
        (
            TENANT
            + "spec: {namespaces: [a, shared]}\n---\n"
            + HEAD
            + "kind: Tenant\nmetadata: {name: team-b}\nspec:\n  namespaces: [shared]",
            [
                't.yaml:10: spec.namespaces[0]: namespace "shared" is already in tenant "team-a" '
                "(t.yaml:4)"
            ],
        ),
        (
            HEAD
            + "kind: Settings\nmetadata: {name: one}\n---\n"
            + HEAD
            + "kind: Settings\nmetadata: {name: two}",
            [
                't.yaml:6: kind: only one Settings document is allowed; the first is "one" at t.yaml:1'  # noqa: E501
            ],
        ),
    ],
    ids=["duplicate-name", "same-name-other-kind", "namespace-in-two-tenants", "two-settings"],
)
def test_problem_across_documents(text: str, expected: list[str]) -> None:
    if expected:
        assert problems(text) == expected
    else:
        parse_policies(text)


def test_all_problems_of_all_files_are_reported_together() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policies([DATA / "tree", DATA / "broken.yaml", DATA / "overlap.yaml", DATA / "none"])
    assert [str(p) for p in caught.value.problems] == [
        f"{DATA / 'broken.yaml'}:7: not valid YAML or JSON: while parsing a flow sequence, "
        "expected ',' or ']', but got '<stream end>'",
        f'{DATA / "overlap.yaml"}:6: spec.namespaces[0]: namespace "team-a" is already in tenant '
        f'"team-a" ({DATA / "tree" / "10-tenants.yaml"}:7)',
        f"{DATA / 'none'}: cannot read: No such file or directory",
    ]
    assert str(caught.value).splitlines() == [str(p) for p in caught.value.problems]


def test_an_empty_folder_is_a_problem() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policies([DATA / "empty"])
    assert caught.value.problems == (
        PolicyProblem(Source(str(DATA / "empty")), "", "no *.yaml or *.yml files"),
    )


# --------------------------------------------------------------------------- loading


def test_directories_are_read_recursively_in_order_and_multi_document() -> None:
    policies = load_policies([str(DATA / "tree")])
    assert [t.name for t in policies.tenants] == ["team-a", "team-c", "team-b"]
    assert policies.tenants[2].source == Source(str(DATA / "tree" / "team-b" / "tenant.yml"), 2)


def test_digest_follows_content_not_file_names() -> None:
    text = (DATA / "tree" / "10-tenants.yaml").read_text()
    assert parse_policies(text, "a.yaml").digest == parse_policies(text, "b.yaml").digest
    assert parse_policies(text).digest != parse_policies(text + "\n# changed").digest
    assert len(parse_policies(text).digest) == 12


def test_builtin_mapping_applies_only_when_none_is_loaded() -> None:
    assert parse_policies("").mappings == default_mappings()
    (builtin,) = default_mappings()
    assert (builtin.name, builtin.action) == ("nvidia", MappingAction.AUTO)
    assert [r.suffix_of("nvidia.com/mig-1g.10gb") for r in builtin.resources] == [None, "1g.10gb"]
    assert builtin.resources[0].suffix_of("nvidia.com/gpu") == ""
    own = HEAD + "kind: LegacyResourceMapping\nmetadata: {name: mine}\nspec: {resources: []}"
    assert [m.name for m in parse_policies(own).mappings] == ["mine"]


def test_example_policies_load() -> None:
    policies = load_policies([REPO / "policies"])
    assert [t.name for t in policies.tenants] == ["ml-research", "inference", "platform"]
    assert [p.name for p in policies.class_policies] == ["gpu-guardrails", "mig-guardrails"]
    assert [m.name for m in policies.mappings] == ["nvidia"]
    assert policies.mappings[0].resources == default_mappings()[0].resources
    guardrails = policies.class_policies[0]
    assert [v.action for v in guardrails.validations] == [Action.DENY, Action.WARN, Action.AUDIT]
    assert policies.settings.feasibility == Action.WARN


def test_packaged_example_policies_match_the_repository() -> None:
    packaged = default_policy_dir()
    names = sorted(p.name for p in (REPO / "policies").glob("*.yaml"))
    assert names == sorted(p.name for p in packaged.glob("*.yaml"))
    assert filecmp.cmpfiles(REPO / "policies", packaged, names, shallow=False)[0] == names


def test_a_configmap_mount_is_read_once_through_its_visible_names(tmp_path: Path) -> None:
    """The kubelet keeps the real files in `..<timestamp>/`, linked through `..data`."""
    hidden = tmp_path / "..2026_11_30_09_00_00.123" / "tenants.yaml"
    hidden.parent.mkdir()
    hidden.write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: a}\n"
        "spec: {namespaces: [a]}\n"
    )
    (tmp_path / "..data").symlink_to(hidden.parent.name)
    (tmp_path / "tenants.yaml").symlink_to("..data/tenants.yaml")
    assert [t.name for t in load_policies([tmp_path]).tenants] == ["a"]
