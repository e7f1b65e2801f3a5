"""The Helm chart, as a cluster admin meets it: `helm lint`, manifests
rendered by `helm template` and validated by the real API server (server-side
dry run), the RBAC they grant, the values they refuse, and a real
`helm install` / `helm uninstall`.

The operator itself is not started: these tests need only the `cluster`."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway import __version__
from sluiceway.controls.breaker import BreakerConfig
from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.k8s.worker_pods import build_worker_deployment
from sluiceway.model.taskdefinition import WorkerPodsSpec
from sluiceway.runtime.settings import Settings
from tests.support.kube import Cluster, Kube
from tests.support.releases import PREVIOUS, previous_file
from tests.support.waiting import eventually

CHART = REPO_ROOT / "charts" / "sluiceway"
DB = ("--set", "database.existingSecret=sluiceway-db")

Manifest = dict[str, Any]
Helm = Callable[..., subprocess.CompletedProcess[str]]

# The rules the operator needs on namespaced resources, and on cluster-scoped ones.
SLUICEWAY_KINDS = [
    "taskdefinitions",
    "workflows",
    "workflowruns",
    "semaphores",
    "quotas",
    "schedules",
    "webhooks",
    "triggers",
]
NAMESPACED_RULES = [
    {"apiGroups": ["sluiceway.dev"], "resources": SLUICEWAY_KINDS, "verbs": ["get", "list", "watch", "patch"]},
    # WorkflowRuns past their ttlSecondsAfterFinished; nothing else is ever deleted.
    {"apiGroups": ["sluiceway.dev"], "resources": ["workflowruns"], "verbs": ["delete"]},
    {
        "apiGroups": ["sluiceway.dev"],
        "resources": [f"{kind}/status" for kind in SLUICEWAY_KINDS],
        "verbs": ["get", "patch"],
    },
    # Webhooks verify with Secrets, GRPC and WEBHOOK tasks sign or authenticate with them: read by name.
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": ["sluiceway.dev"], "resources": ["taskdefinitions/finalizers"], "verbs": ["update"]},
    # CONTAINER tasks: the attempts' pods, and their logs.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
]
IMPERSONATE_RULE = {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}
CLUSTER_SCOPED_RULES = [
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
]
RELEASE_NAMESPACE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
]


# --- fixtures and helpers ---------------------------------------------------


@pytest.fixture(scope="module")
def helm(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Run the helm CLI against the test cluster, with its own config and cache."""
    if cluster.control_plane is not None:
        binary = str(cluster.control_plane.bin / "helm")
    else:
        found = shutil.which("helm")
        assert found, "helm must be on PATH to test an existing cluster"
        binary = found
    home = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECONFIG": str(cluster.kube.kubeconfig),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, *args], env=env, text=True, capture_output=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture
def new_namespace(kube: Kube) -> Iterator[Callable[[], str]]:
    """Create fresh namespaces on demand; all are deleted after the test."""
    created: list[str] = []

    def create() -> str:
        name = f"chart-{uuid.uuid4().hex[:8]}"
        kube.run("create", "namespace", name)
        created.append(name)
        return name

    yield create
    for name in created:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def release_name() -> str:
    return f"sw-{uuid.uuid4().hex[:6]}"


def render(
    helm: Helm, *args: str, namespace: str = "sluiceway", release: str = "sluiceway", chart: Path = CHART
) -> list[Manifest]:
    out = helm("template", release, str(chart), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: list[Manifest], kind: str) -> Manifest:
    found = of_kind(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, got {[m['metadata']['name'] for m in found]}"
    return found[0]


def operator_container(manifests: list[Manifest]) -> Manifest:
    containers: list[Manifest] = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "operator")


def env_of(container: Manifest) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def rules_of(manifests: list[Manifest]) -> list[tuple[str, str, Manifest]]:
    """(kind, namespace, rule) for every rule of every Role and ClusterRole."""
    return [
        (m["kind"], m["metadata"].get("namespace", ""), rule)
        for m in manifests
        if m["kind"] in ("Role", "ClusterRole")
        for rule in m["rules"]
    ]


def without_service_monitor(manifests: list[Manifest]) -> str:
    """The manifests the API server can check: the prometheus-operator's CRDs
    (ServiceMonitor, PrometheusRule) are not installed."""
    return yaml.safe_dump_all([m for m in manifests if m["kind"] not in ("ServiceMonitor", "PrometheusRule")])


CLUSTER_SCOPED_KINDS = {"ClusterRole", "ClusterRoleBinding"}


def dry_run_on_server(kube: Kube, manifests: list[Manifest]) -> None:
    """Every namespaced object names its namespace (helm template alone does not
    add it), so none is passed to kubectl."""
    for m in manifests:
        if m["kind"] not in CLUSTER_SCOPED_KINDS:
            assert m["metadata"].get("namespace"), f"{m['kind']}/{m['metadata']['name']} names no namespace"
    result = kube.run("apply", "--dry-run=server", "-f", "-", input=without_service_monitor(manifests), check=False)
    assert result.returncode == 0, f"the API server refused the chart:\n{result.stderr}"


# --- helm lint ----------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([*DB], id="defaults"),
        pytest.param(["--set", "devPostgres.enabled=true"], id="dev-postgres"),
        pytest.param(
            [
                *DB,
                "--set",
                "replicas=3",
                "--set",
                "metrics.serviceMonitor.enabled=true",
                "--set",
                "metrics.dashboard.enabled=true",
                "--set",
                "metrics.rules.enabled=true",
            ],
            id="replicas-and-monitoring",
        ),
    ],
)
def test_lint_passes_without_warnings_or_errors(helm: Helm, values: list[str]) -> None:
    result = helm("lint", str(CHART), *values, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "[WARNING]" not in output and "[ERROR]" not in output, output
    assert "1 chart(s) linted, 0 chart(s) failed" in output


# --- rendered manifests against the real API server ----------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([*DB], id="defaults"),
        pytest.param(
            ["--set", "devPostgres.enabled=true", "--set", "devPostgres.persistence.enabled=true"],
            id="dev-postgres-with-pvc",
        ),
        pytest.param(
            [
                *DB,
                "--set",
                "replicas=3",
                "--set",
                "metrics.serviceMonitor.enabled=true",
                "--set",
                "metrics.dashboard.enabled=true",
                "--set",
                "metrics.rules.enabled=true",
                "--set",
                "apiKeys.allowWrites=true",
                "--set",
                "circuitBreaker.enabled=true",
                "--set",
                "logLevel=DEBUG",
                "--set",
                "auth.mode=none",
                "--set",
                "serviceAccount.annotations.example\\.com/role=sluiceway",
                "--set",
                "archive.enabled=true",
                "--set",
                "archive.accessMode=ReadWriteMany",
                "--set",
                "extraEnv[0].name=SLUICEWAY_DECIDERS",
                "--set-string",
                "extraEnv[0].value=4",
            ],
            id="everything-on",
        ),
    ],
)
def test_rendered_manifests_pass_server_side_dry_run(
    helm: Helm, kube: Kube, new_namespace: Callable[[], str], values: list[str]
) -> None:
    namespace = new_namespace()
    manifests = render(helm, *values, namespace=namespace, release=release_name())
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"} <= {
        m["kind"] for m in manifests
    }
    dry_run_on_server(kube, manifests)


def test_watch_namespaces_grants_roles_in_each_namespace_and_no_cluster_wide_sluiceway_rules(
    helm: Helm, kube: Kube, new_namespace: Callable[[], str]
) -> None:
    release_ns, a, b = new_namespace(), new_namespace(), new_namespace()
    manifests = render(helm, *DB, "--set", f"watchNamespaces={{{a},{b}}}", namespace=release_ns, release=release_name())

    roles = {(m["metadata"]["namespace"], m["metadata"]["name"]): m for m in of_kind(manifests, "Role")}
    fullname = one(manifests, "Deployment")["metadata"]["name"]
    for namespace in (a, b):
        assert roles[(namespace, fullname)]["rules"] == NAMESPACED_RULES
        binding = next(m for m in of_kind(manifests, "RoleBinding") if m["metadata"]["namespace"] == namespace)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": fullname}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": fullname, "namespace": release_ns}]

    cluster_roles = {m["metadata"]["name"]: m for m in of_kind(manifests, "ClusterRole")}
    for binding in of_kind(manifests, "ClusterRoleBinding"):
        granted = cluster_roles[binding["roleRef"]["name"]]["rules"]
        assert granted == CLUSTER_SCOPED_RULES
        assert not any("sluiceway.dev" in rule["apiGroups"] for rule in granted)

    assert env_of(operator_container(manifests))["SLUICEWAY_NAMESPACES"] == f"{a},{b}"
    dry_run_on_server(kube, manifests)


# --- RBAC ---------------------------------------------------------------------

RBAC_VARIANTS = [
    pytest.param([], id="cluster-wide"),
    pytest.param(["--set", "watchNamespaces={team-a,team-b}"], id="watch-namespaces"),
    pytest.param(["--set", "apiKeys.allowWrites=true"], id="api-key-writes"),
    pytest.param(
        ["--set", "apiKeys.allowWrites=true", "--set", "watchNamespaces={team-a}"],
        id="api-key-writes-in-watched-namespaces",
    ),
]


@pytest.mark.parametrize("values", RBAC_VARIANTS)
def test_no_rule_contains_a_wildcard_and_every_rule_is_explicit(helm: Helm, values: list[str]) -> None:
    rules = rules_of(render(helm, *DB, *values))
    assert rules
    for kind, namespace, rule in rules:
        where = f"{kind} in {namespace or 'the cluster'}: {rule}"
        assert rule.get("verbs"), f"no verbs: {where}"
        assert rule.get("resources"), f"no resources: {where}"
        assert "apiGroups" in rule and "nonResourceURLs" not in rule, where
        for field in ("verbs", "resources", "apiGroups", "resourceNames"):
            assert not any("*" in value for value in rule.get(field, [])), f"wildcard in {field}: {where}"


def test_cluster_wide_rules_are_exactly_what_the_operator_uses(helm: Helm) -> None:
    manifests = render(helm, *DB)
    assert one(manifests, "ClusterRole")["rules"] == CLUSTER_SCOPED_RULES + NAMESPACED_RULES
    local = one(manifests, "Role")
    assert local["metadata"]["namespace"] == "sluiceway"
    assert local["rules"] == RELEASE_NAMESPACE_RULES
    assert one(manifests, "ClusterRoleBinding")["subjects"] == [
        {"kind": "ServiceAccount", "name": "sluiceway", "namespace": "sluiceway"}
    ]


@pytest.mark.parametrize("values", RBAC_VARIANTS)
def test_impersonate_is_granted_only_when_api_keys_allow_writes(helm: Helm, values: list[str]) -> None:
    rules = rules_of(render(helm, *DB, *values))
    impersonating = [(kind, namespace) for kind, namespace, rule in rules if "impersonate" in rule["verbs"]]
    if "apiKeys.allowWrites=true" in values:
        assert impersonating
        assert all(rule == IMPERSONATE_RULE for _, _, rule in rules if "impersonate" in rule["verbs"])
    else:
        assert impersonating == []


# --- values the schema and templates refuse --------------------------------------


@pytest.mark.parametrize(
    ("values", "named"),
    [
        pytest.param([*DB, "--set", "replicas=0"], "/replicas", id="replicas=0"),
        pytest.param([*DB, "--set", "auth.mode=bogus"], "/auth/mode", id="auth.mode=bogus"),
        pytest.param([*DB, "--set", "typo=1"], "'typo'", id="typo=1"),
        pytest.param([*DB, "--set", "logLevel=verbose"], "/logLevel", id="logLevel=verbose"),
        pytest.param([*DB, "--set", "logFormat=xml"], "/logFormat", id="logFormat=xml"),
        pytest.param([*DB, "--set", "metrics.rules.enable=true"], "'enable'", id="metrics.rules.typo"),
        pytest.param([*DB, "--set", "image.pullPolicy=Sometimes"], "/image/pullPolicy", id="pullPolicy=Sometimes"),
        pytest.param([], "database.existingSecret", id="no-database"),
        pytest.param([*DB, "--set", "devPostgres.enabled=true"], "database.existingSecret", id="two-databases"),
        pytest.param(
            [*DB, "--set", "circuitBreaker.enabled=true", "--set", "circuitBreaker.maxOpenMs=10"],
            "circuitBreaker.maxOpenMs",
            id="breaker-max-below-open",
        ),
        pytest.param(
            [*DB, "--set", "circuitBreaker.failureRatio=0"], "/circuitBreaker/failureRatio", id="breaker-ratio-0"
        ),
        pytest.param(
            [*DB, "--set", "archive.enabled=true", "--set", "replicas=2"], "archive.accessMode", id="archive-rwo-shared"
        ),
        pytest.param([*DB, "--set", "archive.mountPath=archive"], "/archive/mountPath", id="archive-relative-path"),
    ],
)
def test_bad_values_fail_with_a_message_naming_the_field(helm: Helm, values: list[str], named: str) -> None:
    result = helm("template", "sluiceway", str(CHART), *values, check=False)
    assert result.returncode != 0, result.stdout
    assert named in result.stderr, result.stderr


# --- what is rendered, and when ---------------------------------------------------


def test_pod_disruption_budget_only_with_more_than_one_replica(helm: Helm) -> None:
    assert of_kind(render(helm, *DB), "PodDisruptionBudget") == []
    manifests = render(helm, *DB, "--set", "replicas=2")
    pdb = one(manifests, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == one(manifests, "Deployment")["spec"]["selector"]["matchLabels"]


def test_service_monitor_only_when_enabled(helm: Helm) -> None:
    assert of_kind(render(helm, *DB), "ServiceMonitor") == []
    manifests = render(
        helm, *DB, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.interval=15s"
    )
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    service = one(manifests, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_dashboard_and_alert_rules_only_when_enabled(helm: Helm) -> None:
    defaults = render(helm, *DB)
    assert of_kind(defaults, "PrometheusRule") == [] and of_kind(defaults, "ConfigMap") == []
    manifests = render(
        helm,
        *DB,
        "--set",
        "metrics.dashboard.enabled=true",
        "--set",
        "metrics.rules.enabled=true",
        "--set",
        "metrics.rules.labels.release=kube-prometheus-stack",
    )
    dashboard = one(manifests, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1", "the sidecar's conventional label"
    shipped = json.loads((CHART / "dashboards/sluiceway.json").read_text())
    assert json.loads(dashboard["data"]["sluiceway.json"]) == shipped
    rule = one(manifests, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["spec"] == yaml.safe_load((CHART / "files/prometheus-rules.yaml").read_text())
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert {
        "SluicewayDeciderLag",
        "SluicewayTimersOverdue",
        "SluicewayDeadLetters",
        "SluicewayQueueWithoutPollers",
        "SluicewayCircuitBreakerOpen",
        "SluicewaySlaBreached",
        "SluicewayRunsQuarantined",
    } <= alerts


def test_operator_runs_non_root_with_a_read_only_root_and_no_privileges(helm: Helm) -> None:
    manifests = render(helm, *DB)
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = operator_container(manifests)
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]


def test_operator_and_worker_pods_are_admitted_under_the_restricted_pod_security_standard(
    helm: Helm, kube: Kube, new_namespace: Callable[[], str]
) -> None:
    """The API server's own PodSecurity admission judges them: a Pod made
    from each template is created (dry run) in a namespace that enforces
    `restricted`, and a privileged one is refused there, so the check bites."""
    namespace = new_namespace()
    kube.run("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    kube.run("create", "serviceaccount", "sluiceway", "-n", namespace)  # the chart's, which the Pod names
    operator_template = one(render(helm, *DB, namespace=namespace), "Deployment")["spec"]["template"]
    worker_template = build_worker_deployment(
        "resize", "uid-1", namespace, "resize", WorkerPodsSpec(image="example.com/resize:1"), "http://api:8080", None, 1
    )["spec"]["template"]
    root = {"metadata": {"labels": {"app": "root"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    cases = (("operator", operator_template, True), ("worker", worker_template, True), ("root", root, False))
    for name, template, admitted in cases:
        metadata = {"name": name, "namespace": namespace, **template["metadata"]}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
        result = kube.run("apply", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
        assert (result.returncode == 0) is admitted, f"{name}: {result.stderr}"
        if not admitted:
            assert "violates PodSecurity" in result.stderr and "restricted" in result.stderr, result.stderr


def test_a_network_policy_limits_the_operator_to_its_api_port_and_named_destinations(helm: Helm) -> None:
    policy = one(render(helm, *DB), "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]
    dns, postgres, api, tasks = policy["egress"]
    assert dns == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    assert postgres == {"ports": [{"port": 5432, "protocol": "TCP"}]}
    assert api == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert tasks["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8"} <= set(tasks["to"][0]["ipBlock"]["except"])
    assert tasks["ports"] == [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]

    narrowed = one(
        render(
            helm,
            *DB,
            "--set",
            "networkPolicy.postgres.cidrs={10.0.5.0/24}",
            "--set",
            "networkPolicy.kubernetesApi.cidrs={172.18.0.2/32}",
            "--set",
            "networkPolicy.apiFrom[0].namespaceSelector.matchLabels.tenant=yes",
            "--set",
            "networkPolicy.systemTaskEgress=null",
        ),
        "NetworkPolicy",
    )["spec"]
    assert narrowed["ingress"][0]["from"] == [{"namespaceSelector": {"matchLabels": {"tenant": "yes"}}}]
    assert narrowed["egress"][1]["to"] == [{"ipBlock": {"cidr": "10.0.5.0/24"}}]
    assert narrowed["egress"][2]["to"] == [{"ipBlock": {"cidr": "172.18.0.2/32"}}]
    assert len(narrowed["egress"]) == 3  # no destination for system tasks at all
    assert of_kind(render(helm, *DB, "--set", "networkPolicy.enabled=false"), "NetworkPolicy") == []


def test_egress_values_reach_the_operator(helm: Helm) -> None:
    container = operator_container(
        render(
            helm,
            *DB,
            "--set",
            "egress.serviceCIDRs={10.96.0.0/12}",
            "--set",
            "egress.podCIDRs={10.244.0.0/16,fd00::/48}",
            "--set",
            "egress.allowed={billing.shared.svc.cluster.local}",
        )
    )
    env = env_of(container)
    assert env["SLUICEWAY_SERVICE_CIDRS"] == "10.96.0.0/12"
    assert env["SLUICEWAY_POD_CIDRS"] == "10.244.0.0/16,fd00::/48"
    assert env["SLUICEWAY_EGRESS_ALLOWED"] == "billing.shared.svc.cluster.local"
    assert env["SLUICEWAY_POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    egress = {k: v for k, v in env.items() if isinstance(v, str) and k.endswith(("CIDRS", "ALLOWED"))}
    settings = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", **egress})  # the operator accepts them
    assert settings.pod_cidrs == ("10.244.0.0/16", "fd00::/48")


def test_probes_point_at_healthz_and_readyz_on_the_http_port(helm: Helm) -> None:
    container = operator_container(render(helm, *DB))
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_operator_environment_and_image(helm: Helm) -> None:
    manifests = render(helm, *DB, namespace="ops")
    container = operator_container(manifests)
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container["image"] == f"ghcr.io/sluiceway/sluiceway:{app_version}"
    assert app_version == __version__, "the chart's appVersion is the package's version"
    assert container["args"] == ["operator"]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    env = env_of(container)
    assert env["SLUICEWAY_DATABASE_URL"] == {"secretKeyRef": {"name": "sluiceway-db", "key": "dsn"}}
    assert env["SLUICEWAY_API_ADDRESS"] == "0.0.0.0:8080"
    assert env["SLUICEWAY_AUTH"] == "kubernetes"
    assert env["SLUICEWAY_LOG_LEVEL"] == "INFO"
    assert env["SLUICEWAY_LOG_FORMAT"] == "json"
    assert env["SLUICEWAY_LEADER_ELECTION_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["SLUICEWAY_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["SLUICEWAY_API_KEYS_NAMESPACE"] == "ops"
    assert env["SLUICEWAY_WORKER_IMAGE"] == container["image"]
    assert env["SLUICEWAY_API_URL"] == "http://sluiceway.ops.svc:8080"
    assert "SLUICEWAY_NAMESPACES" not in env
    assert "SLUICEWAY_CIRCUIT_BREAKER" not in env


def test_circuit_breaker_values_reach_the_operator_as_json_it_accepts(helm: Helm) -> None:
    env = env_of(operator_container(render(helm, *DB, "--set", "circuitBreaker.enabled=true")))
    # The chart's defaults are the operator's, and every key is one it reads
    # (it ignores unknown keys, so a misspelt one would silently do nothing).
    defaults = json.loads(env["SLUICEWAY_CIRCUIT_BREAKER"])
    assert defaults == BreakerConfig(enabled=True).model_dump(by_alias=True)

    env = env_of(
        operator_container(
            render(helm, *DB, "--set", "circuitBreaker.enabled=true", "--set", "circuitBreaker.openMs=2000")
        )
    )
    parsed = BreakerConfig.parse(env["SLUICEWAY_CIRCUIT_BREAKER"])
    assert parsed.open_ms == 2000
    assert parsed.model_dump(by_alias=True) == json.loads(env["SLUICEWAY_CIRCUIT_BREAKER"])


def test_dev_postgres_is_opt_in_and_labelled_not_for_production(helm: Helm) -> None:
    assert not [
        m
        for m in render(helm, *DB)
        if m["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "dev-postgres"
    ]

    manifests = render(helm, "--set", "devPostgres.enabled=true")
    postgres = one(manifests, "StatefulSet")
    assert postgres["metadata"]["name"] == "sluiceway-dev-postgres"
    assert postgres["metadata"]["labels"]["app.kubernetes.io/component"] == "dev-postgres"
    assert "NOT FOR PRODUCTION" in postgres["metadata"]["annotations"]["sluiceway.dev/warning"]
    assert postgres["spec"]["replicas"] == 1
    pod = postgres["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "postgres:16-alpine"
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]

    secret = next(m for m in of_kind(manifests, "Secret") if m["metadata"]["name"] == "sluiceway-dev-postgres")
    password = base64.b64decode(secret["data"]["POSTGRES_PASSWORD"]).decode()
    assert len(password) == 24 and password.isalnum()
    assert (
        base64.b64decode(secret["data"]["dsn"]).decode()
        == f"postgresql://sluiceway:{password}@sluiceway-dev-postgres:5432/sluiceway"
    )
    assert env_of(operator_container(manifests))["SLUICEWAY_DATABASE_URL"] == {
        "secretKeyRef": {"name": "sluiceway-dev-postgres", "key": "dsn"}
    }

    # The operator's Service must not select the PostgreSQL pods.
    services = {m["metadata"]["name"]: m for m in of_kind(manifests, "Service")}
    operator_selector = services["sluiceway"]["spec"]["selector"].items()
    assert not operator_selector <= postgres["spec"]["template"]["metadata"]["labels"].items()


def test_the_archive_is_opt_in_on_a_claim_kept_after_uninstall(helm: Helm) -> None:
    manifests = render(helm, *DB)
    assert of_kind(manifests, "PersistentVolumeClaim") == []
    assert "SLUICEWAY_ARCHIVE_DIR" not in env_of(operator_container(manifests))

    manifests = render(helm, *DB, "--set", "archive.enabled=true", "--set", "archive.storageClass=fast")
    claim = one(manifests, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "sluiceway-archive"
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", "the only copy of purged runs"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "fast",
        "resources": {"requests": {"storage": "10Gi"}},
    }
    container = operator_container(manifests)
    assert env_of(container)["SLUICEWAY_ARCHIVE_DIR"] == "/var/lib/sluiceway/archive"
    assert {"name": "archive", "mountPath": "/var/lib/sluiceway/archive"} in container["volumeMounts"]
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "archive", "persistentVolumeClaim": {"claimName": "sluiceway-archive"}} in pod["volumes"]

    shared = render(
        helm, *DB, "--set", "archive.enabled=true", "--set", "archive.existingClaim=nfs", "--set", "replicas=3"
    )
    assert of_kind(shared, "PersistentVolumeClaim") == [], "an existing claim is used, not made"
    pod = one(shared, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "archive", "persistentVolumeClaim": {"claimName": "nfs"}} in pod["volumes"]


def test_a_new_image_tag_does_not_restart_the_development_database(helm: Helm) -> None:
    """Its storage is an emptyDir by default: a new pod would lose every run."""

    def template(tag: str) -> Manifest:
        rendered = render(helm, "--set", "devPostgres.enabled=true", "--set", f"image.tag={tag}")
        found: Manifest = one(rendered, "StatefulSet")["spec"]["template"]
        return found

    assert template("0.1.0") == template("0.2.0")


def test_the_leader_election_lease_is_part_of_the_release(helm: Helm) -> None:
    """So that `helm uninstall` leaves no Lease behind; the operator only patches its spec."""
    [lease] = of_kind(render(helm, *DB, namespace="team-x"), "Lease")
    assert lease["metadata"]["name"] == "sluiceway-operator"  # the name the operator elects with
    assert lease["metadata"]["namespace"] == "team-x"


# --- the CRDs ---------------------------------------------------------------------


def test_the_charts_crds_serve_both_versions_and_the_api_server_accepts_them(helm: Helm, kube: Kube) -> None:
    """The chart ships the committed CRDs (the drift check keeps both copies generated):
    v1beta1 stored, v1alpha1 served and deprecated, converted by identity. Helm creates
    them without the last-applied annotation; applied by hand they must go server-side
    (docs/upgrades.md), which the API server checks here without keeping them."""
    shown = helm("show", "crds", str(CHART)).stdout
    chart_crds = {c["metadata"]["name"]: c for c in yaml.safe_load_all(shown) if c}
    committed = {
        (c := yaml.safe_load(p.read_text()))["metadata"]["name"]: c for p in (REPO_ROOT / "crds").glob("*.yaml")
    }
    assert chart_crds == committed
    assert set(chart_crds) == {f"{kind}.sluiceway.dev" for kind in SLUICEWAY_KINDS}
    for name, crd in chart_crds.items():
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert crd["spec"]["conversion"] == {"strategy": "None"}, name
        assert {n: (v["served"], v["storage"], v.get("deprecated", False)) for n, v in versions.items()} == {
            "v1alpha1": (True, False, True),
            "v1beta1": (True, True, False),
        }, name
    accepted = kube.run(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-", input=shown, check=False
    )
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout.count("serverside-applied (server dry run)") == len(SLUICEWAY_KINDS), accepted.stdout


# --- a real install --------------------------------------------------------------


def test_install_creates_the_operator_and_uninstall_removes_it(
    helm: Helm, kube: Kube, new_namespace: Callable[[], str]
) -> None:
    namespace, release = new_namespace(), release_name()
    kube.run(
        "create",
        "secret",
        "generic",
        "sluiceway-db",
        "-n",
        namespace,
        "--from-literal=dsn=postgresql://sluiceway:secret@db.example:5432/sluiceway",
    )
    fullname = f"{release}-sluiceway"
    try:
        installed = helm("install", release, str(CHART), "--namespace", namespace, *DB)
        assert "kubectl get sluiceway" in installed.stdout

        for kind, name in (
            ("deployment", fullname),
            ("service", fullname),
            ("serviceaccount", fullname),
            ("role", f"{fullname}-local"),
            ("rolebinding", f"{fullname}-local"),
            ("lease", "sluiceway-operator"),
        ):
            assert kube.get(kind, name, namespace), f"no {kind}/{name} after helm install"
        kube.run("get", "clusterrole,clusterrolebinding", fullname)

        deployment = kube.get("deployment", fullname, namespace)
        assert deployment is not None
        uid = deployment["metadata"]["uid"]

        def owned_replica_set() -> list[Manifest]:
            sets = json.loads(kube.run("get", "replicasets", "-n", namespace, "-o", "json").stdout)["items"]
            return [s for s in sets if any(o["uid"] == uid for o in s["metadata"].get("ownerReferences", []))]

        replica_sets = eventually(owned_replica_set, timeout=60, what="kube-controller-manager's ReplicaSet")
        assert replica_sets[0]["spec"]["template"]["spec"]["serviceAccountName"] == fullname
    finally:
        helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout=60s", check=False)

    for kind, name in (
        ("deployment", fullname),
        ("service", fullname),
        ("serviceaccount", fullname),
        ("lease", "sluiceway-operator"),
    ):
        eventually(
            lambda kind=kind, name=name: kube.get(kind, name, namespace) is None,
            timeout=60,
            what=f"the {kind} {name} to be removed by helm uninstall",
        )
    assert "NotFound" in kube.run("get", "clusterrole", fullname, check=False).stderr


def test_dev_postgres_password_survives_upgrade(helm: Helm, kube: Kube, new_namespace: Callable[[], str]) -> None:
    namespace, release = new_namespace(), release_name()
    secret_name = f"{release}-sluiceway-dev-postgres"
    try:
        installed = helm("install", release, str(CHART), "--namespace", namespace, "--set", "devPostgres.enabled=true")
        assert "NOT FOR PRODUCTION" in installed.stdout
        before = kube.get("secret", secret_name, namespace)
        assert before is not None

        helm("upgrade", release, str(CHART), "--namespace", namespace, "--reuse-values", "--set", "logLevel=DEBUG")
        after = kube.get("secret", secret_name, namespace)
        assert after is not None
        assert after["data"] == before["data"]
    finally:
        helm("uninstall", release, "--namespace", namespace, "--wait", "--timeout=60s", check=False)


def test_an_upgrade_reusing_the_previous_releases_values_renders(
    helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`helm upgrade --reuse-values` renders the new templates with the old
    release's values alone: the new chart's defaults are dropped, so a value
    the previous release did not have is absent, not defaulted. (Found by
    `make upgrade`: `archive.enabled` on a nil `archive` failed the upgrade.)"""
    chart = tmp_path_factory.mktemp("reused") / "sluiceway"
    shutil.copytree(CHART, chart)
    (chart / "values.yaml").write_text(previous_file("charts/sluiceway/values.yaml"))
    manifests = render(helm, *DB, chart=chart)
    assert "SLUICEWAY_ARCHIVE_DIR" not in env_of(operator_container(manifests))
    assert not [m for m in of_kind(manifests, "PersistentVolumeClaim")], "no archive volume unless asked for"
    print(f"rendered {len(manifests)} objects from release {PREVIOUS}'s values")
