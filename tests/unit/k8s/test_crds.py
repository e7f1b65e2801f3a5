"""The committed CRDs are generated from the models, and say what they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluiceway.k8s import crds
from sluiceway.model import DEPRECATED_VERSIONS, SERVED_VERSIONS, VERSION
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
        assert "default" not in node, "defaults are resolved by the operator, not the API server"
        if "properties" in node or "items" in node:
            assert "type" in node


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


# --- versions ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_every_kind_serves_v1alpha1_and_v1beta1_and_stores_v1beta1(kind: object) -> None:
    crd = crds.crd_for(kind)  # type: ignore[arg-type]
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert list(versions) == ["v1alpha1", "v1beta1"]
    assert all(v["served"] for v in versions.values())
    assert [name for name, v in versions.items() if v["storage"]] == ["v1beta1"] == [VERSION]


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_versions_share_one_schema_so_conversion_is_by_identity(kind: object) -> None:
    """strategy None only rewrites apiVersion: any difference between the versions'
    schemas would be pruned or refused on the way through, so there must be none."""
    crd = crds.crd_for(kind)  # type: ignore[arg-type]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    first, *others = crd["spec"]["versions"]
    for other in others:
        for key in ("schema", "subresources", "additionalPrinterColumns"):
            assert other[key] == first[key], f"{other['name']} differs from {first['name']} in {key}"


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_only_v1alpha1_is_deprecated_and_its_warning_names_the_version_to_use(kind: object) -> None:
    crd = crds.crd_for(kind)  # type: ignore[arg-type]
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    old, new = versions["v1alpha1"], versions["v1beta1"]
    assert old["deprecated"] is True
    kind_name = crd["spec"]["names"]["kind"]
    assert old["deprecationWarning"] == (
        f"sluiceway.dev/v1alpha1 {kind_name} is deprecated; use sluiceway.dev/v1beta1 (the same fields)"
    )
    assert "deprecated" not in new and "deprecationWarning" not in new
    assert set(DEPRECATED_VERSIONS) < set(SERVED_VERSIONS)


def test_an_earlier_layout_can_be_built_for_the_upgrade_tests() -> None:
    """The e2e test recreates what a cluster of the previous release stored in: v1alpha1."""
    crd = crds.crd_for(TASK_DEFINITION, storage="v1alpha1")
    assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1alpha1"]


def test_each_crd_fits_in_etcd_but_the_workflow_crd_needs_server_side_apply() -> None:
    """etcd keeps objects up to 1.5 MiB. A client-side `kubectl apply` also copies
    the whole object into an annotation of at most 256 KiB, which the Workflow CRD,
    one schema per version, exceeds: hence `kubectl apply --server-side` in the docs."""
    sizes = {kind.kind: len(json.dumps(crds.crd_for(kind), separators=(",", ":"))) for kind in ALL_KINDS}
    assert max(sizes.values()) < 1_500_000 * 0.6, sizes  # room for one more version
    assert sizes["Workflow"] > 256 * 1024
