"""The committed CRDs are generated from the models, and say what they should."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway.k8s import crds
from sluiceway.model.resources import ALL_KINDS, TASK_DEFINITION

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("directory", ["crds", "charts/sluiceway/crds"])
def test_committed_crds_match_the_models(directory: str) -> None:
    stale = crds.drift(ROOT / directory)
    assert stale == [], f"{directory} drifted from sluiceway.model: run `sluiceway crds --write`"


def test_drift_is_detected(tmp_path: Path) -> None:
    crds.write(tmp_path)
    victim = tmp_path / f"{TASK_DEFINITION.plural}.sluiceway.dev.yaml"
    victim.write_text(victim.read_text().replace("maximum: 100", "maximum: 1000", 1))
    assert crds.drift(tmp_path) == [victim.name]


def _walk(node: object) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_schemas_are_structural(kind: object) -> None:
    crd = crds.crd_for(kind)  # type: ignore[arg-type]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for node in _walk(schema):
        assert "$ref" not in node and "anyOf" not in node and "allOf" not in node
        if "properties" in node or "items" in node:
            assert "type" in node
    for node in _walk(schema["properties"]["spec"]):
        assert "default" not in node, "defaults are resolved by the operator, not the API server"
    # The one default: a status the operator has not written yet reads as not yet
    # observed (kstatus InProgress), never as an empty status (kstatus Current).
    assert schema["properties"]["status"]["default"] == {"observedGeneration": 0}
    assert [n for n in _walk(schema["properties"]["status"]) if "default" in n] == [schema["properties"]["status"]]


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_every_kind_is_listed_by_kubectl_get_sluiceway(kind: object) -> None:
    names = crds.crd_for(kind)["spec"]["names"]  # type: ignore[arg-type]
    assert names["categories"] == ["sluiceway"]
    assert names["shortNames"]


def test_task_definition_bounds_match_the_reference() -> None:
    spec = crds.crd_for(TASK_DEFINITION)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props = spec["properties"]
    assert (props["retryCount"]["minimum"], props["retryCount"]["maximum"]) == (0, 100)
    assert (props["jitter"]["minimum"], props["jitter"]["maximum"]) == (0, 1)
    assert props["backoffScaleFactor"]["minimum"] == 1
    assert (props["retryBudget"]["minimum"], props["retryBudget"]["maximum"]) == (0, 1)
    assert props["retryLogic"]["enum"] == ["FIXED", "LINEAR_BACKOFF", "EXPONENTIAL_BACKOFF"]
    assert props["timeoutPolicy"]["enum"] == ["TIME_OUT_WF", "RETRY", "ALERT_ONLY"]
    assert props["semaphores"]["x-kubernetes-list-type"] == "set"
    for field in (
        "scheduleToStartTimeout",
        "startToCloseTimeout",
        "timeoutSeconds",
        "heartbeatTimeout",
        "responseTimeoutSeconds",
        "pollTimeoutSeconds",
        "concurrentExecLimit",
        "rateLimitPerFrequency",
        "rateLimitFrequencySeconds",
        "maxRetryDelaySeconds",
    ):
        assert field in props, field
    rules = {v["fieldPath"] for v in spec["x-kubernetes-validations"]}
    assert ".maxRetryDelaySeconds" in rules


def test_deep_task_graphs_are_preserved_below_the_typed_depth() -> None:
    from sluiceway.model.resources import WORKFLOW

    schema = crds.crd_for(WORKFLOW)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    task = schema["properties"]["spec"]["properties"]["tasks"]["items"]
    depth = 1
    while "properties" in task:
        assert task["properties"]["taskReferenceName"]["type"] == "string"
        task = task["properties"]["forkTasks"]["items"]["items"]
        depth += 1
    assert task == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert depth == crds.MAX_RECURSION + 1
