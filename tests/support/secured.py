"""An operator in `kubernetes` auth mode against the real API server, with two
tenant namespaces `a` and `b`, ServiceAccounts in each bound to ordinary RBAC
Roles, and their tokens from `kubectl create token`. Both namespaces hold the
TaskDefinition `auth_echo` and the Workflow `auth_flow` (one SIMPLE task that
echoes its input). e2e/test_auth.py and e2e/test_fuzz_tenancy.py build their
fixtures on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluiceway.devenv.processes import Child
from tests.support.api import call
from tests.support.database import Databases
from tests.support.kube import Kube
from tests.support.operators import start_operator
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
TASK_TYPE = "auth_echo"
WORKFLOW = "auth_flow"

WORKER_RULES = [
    {
        "apiGroups": ["sluiceway.dev"],
        "resources": ["taskdefinitions"],
        "resourceNames": [TASK_TYPE],
        "verbs": ["poll", "update"],
    }
]
STARTER_RULES = [{"apiGroups": ["sluiceway.dev"], "resources": ["workflowruns"], "verbs": ["create", "get"]}]
# Every right on every Sluiceway resource of one namespace: a tenant's administrator.
TENANT_RULES = [{"apiGroups": ["sluiceway.dev"], "resources": ["*"], "verbs": ["*"]}]


@dataclass
class Secured:
    kube: Kube
    url: str
    a: str
    b: str
    keys: str
    child: Child
    tokens: dict[tuple[str, str], str] = field(default_factory=dict)
    database: str = ""

    def token(self, namespace: str, account: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[(namespace, account)]}"}


def role(name: str, rules: list[dict[str, Any]], account: str) -> str:
    return "\n---\n".join(
        json.dumps(doc)
        for doc in [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account}],
            },
        ]
    )


def _define(kube: Kube, namespace: str) -> None:
    kube.apply(
        {
            "apiVersion": API,
            "kind": "TaskDefinition",
            "metadata": {"name": "auth-echo"},
            # Long enough that no lease a test holds expires while it runs.
            "spec": {"name": TASK_TYPE, "responseTimeoutSeconds": 600},
        },
        namespace,
    )
    kube.apply(
        {
            "apiVersion": API,
            "kind": "Workflow",
            "metadata": {"name": "auth-flow"},
            "spec": {
                "name": WORKFLOW,
                "tasks": [
                    {
                        "name": TASK_TYPE,
                        "taskReferenceName": "echo",
                        "type": "SIMPLE",
                        "inputParameters": {"text": "${workflow.input.text}"},
                    }
                ],
                "outputParameters": {"echoed": "${echo.output.echoed}"},
            },
        },
        namespace,
    )


@contextlib.contextmanager
def secured_operator(
    kube: Kube,
    databases: Databases,
    logs: Path,
    accounts: Mapping[str, list[dict[str, Any]]],
    settings: Mapping[str, str] | None = None,
) -> Iterator[Secured]:
    """The operator, the namespaces `a-*`, `b-*` and `keys-*` (API-key
    Secrets), and in `a` and `b` each of `accounts` (name: RBAC rules) with
    a token; everything is deleted afterwards."""
    suffix = uuid.uuid4().hex[:6]
    a, b, keys = f"a-{suffix}", f"b-{suffix}", f"keys-{suffix}"
    for namespace in (a, b, keys):
        kube.run("create", "namespace", namespace)
    tokens = {}
    for namespace in (a, b):
        for account, rules in accounts.items():
            kube.run("create", "serviceaccount", account, "-n", namespace)
            kube.apply(role(f"sluiceway-{account}", rules, account), namespace)
            tokens[(namespace, account)] = kube.run("create", "token", account, "-n", namespace).stdout.strip()
    database = asyncio.run(databases.create("e2e_auth"))
    operator = start_operator(
        "operator-auth",
        database,
        logs,
        kubeconfig=kube.kubeconfig,  # the operator's own credentials: admin
        log_level="DEBUG",
        settings={
            "SLUICEWAY_AUTH": "kubernetes",
            "SLUICEWAY_API_KEYS_NAMESPACE": keys,
            # Only these namespaces, and a leader-election Lease of its own, so an
            # operator of another test in this session does not stand in its way.
            "SLUICEWAY_NAMESPACES": f"{a},{b}",
            "SLUICEWAY_LEADER_ELECTION_NAMESPACE": keys,
            # The egress policy's cluster ranges (the default denials cover loopback and the API server).
            "SLUICEWAY_POD_CIDRS": "10.244.0.0/16",
            **(settings or {}),
        },
    )
    child = operator.child
    try:
        for namespace in (a, b):
            _define(kube, namespace)
        for namespace in (a, b):
            eventually(
                lambda ns=namespace: (
                    (o := kube.get("workflow", "auth-flow", ns)) and o.get("status", {}).get("version")
                ),
                timeout=60,
                what=f"the Workflow in {namespace}",
            )
        yield Secured(kube, operator.api_url, a, b, keys, child, tokens, database)
    finally:
        if os.environ.get("SLUICEWAY_E2E_SHOW_LOGS"):
            print(child.tail(200))
        for namespace in (a, b):  # while the operator still runs to clear its finalizers
            kube.delete_sluiceway_objects(namespace)
        child.stop()
        for namespace in (a, b, keys):
            kube.run("delete", "namespace", namespace, "--wait=false", check=False)
        asyncio.run(databases.drop(database))


def start_run(s: Secured, namespace: str, text: str, account: str = "starter") -> str:
    status, body = call(
        "POST",
        f"{s.url}/v1/ns/{namespace}/executions",
        {"name": WORKFLOW, "input": {"text": text}},
        s.token(namespace, account),
    )
    assert status == 201, body
    run_id: str = body["id"]
    return run_id


def poll(s: Secured, namespace: str, headers: dict[str, str] | None, timeout: float = 0) -> tuple[int, Any]:
    return call(
        "POST",
        f"{s.url}/v1/ns/{namespace}/tasks/poll",
        {"taskTypes": [TASK_TYPE], "workerId": "e2e-auth", "pollTimeoutSeconds": timeout},
        headers,
    )


def lease(s: Secured, namespace: str, headers: dict[str, str]) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        status, body = poll(s, namespace, headers, timeout=5)
        assert status == 200, body
        return body["tasks"][0] if body["tasks"] else None

    return eventually(probe, timeout=30, what=f"a task to lease in {namespace}")
