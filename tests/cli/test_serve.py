"""`dragate serve` and `dragate webhook-config` up to the point gunicorn would start."""

from __future__ import annotations

import base64
from pathlib import Path

import celpy
import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from webhook import certificates
from webhook.admission.config import ServeConfig
from webhook.cli import main, serve


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[ServeConfig]:
    """Captures the config `serve` would run instead of starting gunicorn."""
    configs: list[ServeConfig] = []
    monkeypatch.setattr(serve, "run", configs.append)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    return configs


def test_no_flags_uses_examples_and_a_generated_localhost_cert(
    started: list[ServeConfig], tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["serve"])
    assert result.exit_code == 0, result.output
    config = started[0]
    assert (config.host, config.port, config.state_file, config.cluster) == (
        "127.0.0.1",
        8443,
        None,
        None,
    )
    assert config.tls.cert == tmp_path / "state" / "dragate" / "certs" / "tls.crt"
    names = certificates.certificate_names(certificates.read_certs(config.tls.cert)[0])
    assert {"localhost", "127.0.0.1", "::1"} <= set(names)
    assert (config.tls.key.stat().st_mode & 0o777) == 0o600


def test_extra_dns_name_reissues_the_dev_cert(started: list[ServeConfig]) -> None:
    CliRunner().invoke(main, ["serve"])
    first = certificates.read_certs(started[0].tls.cert)[0]
    CliRunner().invoke(main, ["serve", "--dns-name", "host.docker.internal"])
    second = certificates.read_certs(started[1].tls.cert)[0]
    assert "host.docker.internal" in certificates.certificate_names(second)
    assert first.issuer == second.issuer  # same dev CA, so trust survives


def test_a_given_cert_dir_is_used_as_is(started: list[ServeConfig], tmp_path: Path) -> None:
    certificates.create(tmp_path / "mounted", ["dragate.ns.svc"])
    before = (tmp_path / "mounted" / "tls.crt").read_bytes()
    result = CliRunner().invoke(main, ["serve", "--cert-dir", str(tmp_path / "mounted")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "mounted" / "tls.crt").read_bytes() == before


def test_flags_reach_the_config(started: list[ServeConfig], tmp_path: Path) -> None:
    args = [
        "serve",
        "--host",
        "::1",
        "--port",
        "9443",
        "--max-connections",
        "3000",
        "--max-body-bytes",
        "4096",
        "--on-timeout",
        "allow",
        "--own-namespace",
        "dragate",
        "--own-service-account",
        "sa",
        "--log-level",
        "debug",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    config = started[0]
    assert (config.host, config.port, config.max_connections) == ("::1", 9443, 3000)
    options = config.admission
    assert (options.max_body_bytes, options.on_timeout.value) == (4096, "allow")
    assert (options.own_namespace, options.own_service_account) == ("dragate", "sa")


def test_own_namespace_defaults_to_pod_namespace(
    started: list[ServeConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "gpu-system")
    CliRunner().invoke(main, ["serve"])
    assert started[0].admission.own_namespace == "gpu-system"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kubeconfig", "/nonexistent"], "does not exist"),
        (["--in-cluster", "--state", "{state}"], "--state is for offline serving"),
        (["--keep-rewrite-policy"], "--keep-rewrite-policy needs a cluster"),
    ],
    ids=["missing-kubeconfig", "state-with-cluster", "rewrite-policy-offline"],
)
def test_cluster_mode_bad_flags_exit_2(
    started: list[ServeConfig], tmp_path: Path, flags: list[str], message: str
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    args = [f.format(state=state) for f in flags]
    result = CliRunner().invoke(main, ["serve", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert started == []


def test_kubeconfig_selects_cluster_mode(started: list[ServeConfig], tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    assert CliRunner().invoke(main, ["serve", "--kubeconfig", str(kubeconfig)]).exit_code == 0
    assert started[0].cluster is not None and started[0].cluster.kubeconfig == str(kubeconfig)
    assert started[0].cluster.keep_rewrite_policy is False


def test_keep_rewrite_policy_reaches_the_cluster_target(
    started: list[ServeConfig], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    args = ["serve", "--kubeconfig", str(kubeconfig), "--keep-rewrite-policy",
            "--own-namespace", "gpu-system", "--own-service-account", "dragate"]  # fmt: skip
    assert CliRunner().invoke(main, args).exit_code == 0
    target = started[0].cluster
    assert target is not None and target.keep_rewrite_policy is True
    assert target.own.user == "system:serviceaccount:gpu-system:dragate"


def test_invalid_policies_exit_2_with_every_problem(
    started: list[ServeConfig], tmp_path: Path
) -> None:
    bad = tmp_path / "policies"
    bad.mkdir()
    (bad / "t.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: x}\nspec: {quota: 7}\n"
    )
    result = CliRunner().invoke(main, ["serve", "--policies", str(bad)])
    assert result.exit_code == 2
    assert "t.yaml" in result.output and started == []


def test_invalid_state_exits_2(started: list[ServeConfig], tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    result = CliRunner().invoke(main, ["serve", "--state", str(state)])
    assert result.exit_code == 2 and "state" in result.output


def test_no_writable_state_dir_exits_2_with_a_message(
    started: list[ServeConfig], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A read-only root: the mounted certificate serves, but the default ledger's directory
    cannot be made (here a file stands in its way, which fails the same mkdir for root too)."""
    certificates.create(tmp_path / "mounted", ["dragate.ns.svc"])
    (tmp_path / "readonly").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "readonly" / "state"))
    result = CliRunner().invoke(main, ["serve", "--cert-dir", str(tmp_path / "mounted")])
    assert result.exit_code == 2, result.output
    assert "--ledger FILE on a writable volume" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not started


def test_gunicorn_settings_are_public_and_name_a_stock_worker() -> None:
    from webhook.admission.config import TlsFiles
    from webhook.admission.server import DragateServer, gunicorn_settings

    config = ServeConfig(Path("p"), TlsFiles(Path("c"), Path("k")), host="::1", port=9443)
    settings = gunicorn_settings(config)
    assert settings["bind"] == ["[::1]:9443"] and settings["workers"] == 1
    assert settings["worker_class"] == "gevent" and settings["http_protocols"] == "h1"
    limits = ("limit_request_line", "limit_request_fields", "limit_request_field_size")
    assert [settings[name] for name in limits] == [4094, 16, 4094]
    assert settings["keepalive"] == 120 and settings["worker_connections"] == 10240
    assert callable(settings["ssl_context"]) and callable(settings["post_worker_init"])
    DragateServer(config)  # gunicorn refuses a key that is no documented setting


def test_client_names_need_a_client_ca(started: list[ServeConfig]) -> None:
    result = CliRunner().invoke(main, ["serve", "--client-name", "apiserver"])
    assert result.exit_code == 2 and "--client-name needs --client-ca" in result.output
    assert not started


# --------------------------------------------------------------------------- webhook-config


def test_webhook_config(tmp_path: Path) -> None:
    certificates.create(tmp_path, ["localhost"])
    args = [
        "webhook-config",
        "--url",
        "https://host.docker.internal:8443",
        "--cert-dir",
        str(tmp_path),
        "--exclude-namespace",
        "kube-system",
        "--exclude-namespace",
        "dragate-system",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    validating, mutating = YAML(typ="safe").load_all(result.output)
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    hook = validating["webhooks"][0]
    assert hook["clientConfig"]["url"] == "https://host.docker.internal:8443/validate"
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == (tmp_path / "ca.crt").read_bytes()
    assert (hook["matchPolicy"], hook["sideEffects"], hook["failurePolicy"]) == (
        "Equivalent",
        "NoneOnDryRun",
        "Fail",
    )
    assert hook["admissionReviewVersions"] == ["v1"]
    resources = {r for rule in hook["rules"] for r in rule["resources"]}
    assert resources == {"pods", "resourceclaims", "resourceclaimtemplates", "namespaces"}
    expression = hook["namespaceSelector"]["matchExpressions"][0]
    assert expression == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "dragate-system"],
    }
    assert mutating["webhooks"][0]["reinvocationPolicy"] == "IfNeeded"
    assert mutating["webhooks"][0]["failurePolicy"] == "Ignore"
    assert mutating["webhooks"][0]["clientConfig"]["url"].endswith("/mutate")
    assert len(mutating["webhooks"]) == 1


@pytest.mark.parametrize(
    "failure_policy", [[], ["--failure-policy", "Fail"]], ids=["default", "fail"]
)
def test_webhook_config_checks_policy_objects_failing_open(
    tmp_path: Path, failure_policy: list[str]
) -> None:
    certificates.create(tmp_path, ["localhost"])
    args = ["webhook-config", "--url", "https://h:8443", "--cert-dir", str(tmp_path)]
    result = CliRunner().invoke(main, args + failure_policy)
    assert result.exit_code == 0, result.output
    validating, _ = YAML(typ="safe").load_all(result.output)
    hook = validating["webhooks"][1]
    assert (hook["name"], hook["failurePolicy"]) == ("policies.dragate.io", "Ignore")
    assert hook["clientConfig"]["url"] == "https://h:8443/validate"
    (rule,) = hook["rules"]
    assert (rule["apiGroups"], rule["scope"], rule["operations"]) == (
        ["dragate.io"],
        "Cluster",
        ["CREATE", "UPDATE"],
    )
    assert set(rule["resources"]) == {
        "tenants",
        "deviceclasspolicies",
        "legacyresourcemappings",
        "settings",
    }


def test_webhook_config_validates_against_the_api_schema(tmp_path: Path) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    certificates.create(tmp_path, ["localhost"])
    result = CliRunner().invoke(
        main,
        [
            "webhook-config",
            "--url",
            "https://127.0.0.1:8443",
            "--cert-dir",
            str(tmp_path),
            "--failure-policy",
            "Ignore",
        ],
    )
    for document in YAML(typ="safe").load_all(result.output):
        kubernetes_validate.validate(document, "1.34", strict=True)


def test_webhook_config_uses_the_rotation_bundle(tmp_path: Path) -> None:
    certificates.create(tmp_path, ["localhost"])
    certificates.renew(tmp_path, rotate_ca=True)
    result = CliRunner().invoke(
        main, ["webhook-config", "--url", "https://h:1", "--cert-dir", str(tmp_path)]
    )
    document = next(iter(YAML(typ="safe").load_all(result.output)))
    bundle = base64.b64decode(document["webhooks"][0]["clientConfig"]["caBundle"])
    assert bundle.count(b"BEGIN CERTIFICATE") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://plain:80"], "https://"),
        (["--url", "https://h:1", "--ca-bundle", "/dev/null"], "no usable CA bundle"),
    ],
    ids=["plain-http", "empty-bundle"],
)
def test_webhook_config_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["webhook-config", *args])
    assert result.exit_code == 2 and message in result.output


GANG_RULES = [
    {"operations": ["CREATE", "UPDATE"], "apiGroups": ["batch"], "apiVersions": ["v1"],
     "resources": ["jobs"], "scope": "Namespaced"},
    {"operations": ["CREATE", "UPDATE"], "apiGroups": ["jobset.x-k8s.io"],
     "apiVersions": ["v1alpha2"], "resources": ["jobsets"], "scope": "Namespaced"},
    {"operations": ["CREATE", "UPDATE"], "apiGroups": ["leaderworkerset.x-k8s.io"],
     "apiVersions": ["v1"], "resources": ["leaderworkersets"], "scope": "Namespaced"},
    {"operations": ["CREATE", "UPDATE"], "apiGroups": ["scheduling.k8s.io"],
     "apiVersions": ["v1beta1"], "resources": ["podgroups"], "scope": "Namespaced"},
]  # fmt: skip
GPU_POD = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
CLAIM_POD = {"containers": [{"name": "c"}], "resourceClaims": [{"name": "g"}]}
CPU_POD = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}


def gang_workload(kind: str, pod_spec: dict[str, object]) -> dict[str, object]:
    template = {"spec": pod_spec}
    spec: dict[str, object] = {
        "Job": {"parallelism": 4, "template": template},
        "JobSet": {"replicatedJobs": [
            {"name": "a", "template": {"spec": {"template": {"spec": CPU_POD}}}},
            {"name": "b", "template": {"spec": {"template": template}}},
        ]},
        "LeaderWorkerSet": {"leaderWorkerTemplate": {
            "leaderTemplate": {"spec": CPU_POD}, "workerTemplate": template,
        }},
    }[kind]  # fmt: skip
    return {"kind": kind, "spec": spec}


@pytest.mark.parametrize("kind", ["Job", "JobSet", "LeaderWorkerSet"])
@pytest.mark.parametrize(
    ("pod_spec", "sent"),
    [(GPU_POD, True), (CLAIM_POD, True), (CPU_POD, False)],
    ids=["legacy-gpu", "claims", "cpu-only"],
)
def test_webhook_config_sends_gang_workloads_that_hold_devices(
    tmp_path: Path, kind: str, pod_spec: dict[str, object], sent: bool
) -> None:
    certificates.create(tmp_path, ["localhost"])
    args = ["webhook-config", "--url", "https://h:8443", "--cert-dir", str(tmp_path)]
    validating, _ = YAML(typ="safe").load_all(CliRunner().invoke(main, args).output)
    hook = validating["webhooks"][2]
    assert (hook["name"], hook["failurePolicy"]) == ("gangs.dragate.io", "Fail")
    assert hook["rules"] == GANG_RULES
    assert hook["clientConfig"]["url"] == "https://h:8443/validate"
    obj = gang_workload(kind, pod_spec)
    request = {"kind": {"kind": kind}, "operation": "CREATE"}
    matched = [
        evaluate(c["expression"], object=obj, request=request) for c in hook["matchConditions"]
    ]
    assert all(matched) is sent


@pytest.mark.parametrize(
    ("policy", "sent"),
    [({"gang": {"minCount": 4}}, True), ({"basic": {}}, False)],
    ids=["gang-policy", "basic-policy"],
)
def test_webhook_config_sends_podgroups_with_a_gang_policy(
    tmp_path: Path, policy: dict[str, object], sent: bool
) -> None:
    certificates.create(tmp_path, ["localhost"])
    args = ["webhook-config", "--url", "https://h:8443", "--cert-dir", str(tmp_path)]
    validating, _ = YAML(typ="safe").load_all(CliRunner().invoke(main, args).output)
    hook = validating["webhooks"][2]
    obj = {"kind": "PodGroup", "spec": {"schedulingPolicy": policy}}
    request = {"kind": {"kind": "PodGroup"}, "operation": "CREATE"}
    matched = [
        evaluate(c["expression"], object=obj, request=request) for c in hook["matchConditions"]
    ]
    assert all(matched) is sent


def gang_group(min_count: int | None) -> dict[str, object]:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"kind": "PodGroup", "spec": {"schedulingPolicy": policy}}


@pytest.mark.parametrize(
    ("old", "new", "sent"),
    [(4, 6, True), (6, 2, True), (4, 4, False), (None, None, False)],
    ids=["grown", "shrunk", "min-count-unchanged", "basic-policy"],
)
def test_webhook_config_sends_a_podgroup_s_update_only_when_it_scales(
    tmp_path: Path, old: int | None, new: int | None, sent: bool
) -> None:
    certificates.create(tmp_path, ["localhost"])
    args = ["webhook-config", "--url", "https://h:8443", "--cert-dir", str(tmp_path)]
    validating, _ = YAML(typ="safe").load_all(CliRunner().invoke(main, args).output)
    hook = validating["webhooks"][2]
    request = {"kind": {"kind": "PodGroup"}, "operation": "UPDATE"}
    matched = [
        evaluate(c["expression"], object=gang_group(new), oldObject=gang_group(old),
                 request=request)
        for c in hook["matchConditions"]
    ]  # fmt: skip
    assert all(matched) is sent


def evaluate(expression: str, **activation: object) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()}))
