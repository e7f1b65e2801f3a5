"""`sluiceway admin export/import` without IO: what an exported object keeps,
the uid a restored object is known by, and the refusals that need no server.
End to end: e2e/test_backup.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sluiceway.cli.admin import IMPORT_ORDER, exported, in_import_order, read_manifests
from sluiceway.cli.client import CommandError
from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import RESTORED_UID_ANNOTATION, identity_of
from sluiceway.model.resources import ALL_KINDS
from sluiceway.runtime.main import app

UID = "8c3d6f4e-1f2a-4b5c-9d8e-0a1b2c3d4e5f"
OLDER = "11111111-2222-4333-8444-555555555555"


def live(kind: str = "WorkflowRun", **extra: Any) -> dict[str, Any]:
    """An object as the API server lists it."""
    return {
        "apiVersion": "sluiceway.dev/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": "nightly",
            "namespace": "shop",
            "uid": UID,
            "resourceVersion": "812",
            "generation": 3,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "managedFields": [{"manager": "kubectl"}],
            "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
            "ownerReferences": [{"kind": "Thing", "uid": "x"}],
            "labels": {"team": "shop"},
            "annotations": {
                "kopf.zalando.org/last-handled-configuration": "{}",
                "sluiceway.dev/last-handled-configuration": "{}",
                "sluiceway.dev/kopf-managed": "yes",
                "sluiceway.dev/start_workflow_run": "{}",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
        "spec": {"workflow": "orders"},
        "status": {"phase": "Running", "executionId": UID},
        **extra,
    }


def test_an_exported_object_keeps_what_a_user_applied_and_the_uid_it_is_known_by() -> None:
    assert exported(live()) == {
        "apiVersion": f"{GROUP}/{VERSION}",  # the version the operator stores, whichever it was read in
        "kind": "WorkflowRun",
        "metadata": {
            "name": "nightly",
            "namespace": "shop",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                RESTORED_UID_ANNOTATION: UID,
            },
            "labels": {"team": "shop"},
        },
        "spec": {"workflow": "orders"},
    }


def test_an_object_restored_before_keeps_its_first_uid() -> None:
    obj = live()
    obj["metadata"]["annotations"][RESTORED_UID_ANNOTATION] = OLDER
    assert exported(obj)["metadata"]["annotations"][RESTORED_UID_ANNOTATION] == OLDER  # type: ignore[index]


def test_a_refused_workflowrun_keeps_its_status_and_an_object_being_deleted_is_left_out() -> None:
    refused = live(status={"phase": "Refused", "control": "quota", "kopf": {"progress": {}}})
    assert exported(refused)["status"] == {"phase": "Refused", "control": "quota"}  # type: ignore[index]
    assert "status" not in (exported(live("Schedule")) or {})
    deleting = live()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    assert exported(deleting) is None


@pytest.mark.parametrize(
    ("annotations", "known_as"),
    [
        ({}, UID),
        ({RESTORED_UID_ANNOTATION: OLDER}, OLDER),
        ({RESTORED_UID_ANNOTATION: OLDER.upper()}, OLDER),
        ({RESTORED_UID_ANNOTATION: "not-a-uid"}, UID),
        ({RESTORED_UID_ANNOTATION: ""}, UID),
    ],
)
def test_the_uid_an_object_is_known_by(annotations: dict[str, str], known_as: str) -> None:
    assert identity_of({"annotations": annotations}, UID) == known_as


def test_objects_are_imported_after_what_they_refer_to() -> None:
    kinds = ["WorkflowRun", "Schedule", "Workflow", "Trigger", "TaskDefinition", "Quota", "Semaphore", "Webhook"]
    objects = [exported(live(kind)) for kind in kinds]
    ordered = [o["kind"] for o in in_import_order(o for o in objects if o is not None)]
    assert ordered.index("TaskDefinition") < ordered.index("Workflow") < ordered.index("Schedule")
    assert ordered[-1] == "WorkflowRun"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("kind: ConfigMap\nmetadata: {name: a, namespace: b}\n", "document 0 is not a Sluiceway object"),
        (
            "kind: Workflow\nmetadata: {name: a, namespace: b}\n---\nkind: Workflow\nmetadata: {name: a}\n",
            "document 1 has no metadata.name/namespace",
        ),
        ("- 1\n", "document 0 is not a Sluiceway object"),
    ],
)
def test_a_manifest_that_is_not_an_export_is_refused_naming_the_document(text: str, says: str) -> None:
    with pytest.raises(CommandError, match=says):
        read_manifests(text)


def test_the_manifests_read_back_as_exported() -> None:
    objects = [exported(live(kind)) for kind in ("Workflow", "WorkflowRun")]
    assert read_manifests(yaml.safe_dump_all(objects)) == objects


def test_export_needs_namespaces_and_a_new_directory(tmp_path: Path) -> None:
    runner = CliRunner()
    neither = runner.invoke(app(), ["admin", "export", str(tmp_path / "b"), "--database-url", "postgresql://x/y"])
    assert neither.exit_code == 2 and "-A" in neither.stderr, neither.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file").write_text("x")
    taken = runner.invoke(
        app(), ["admin", "export", str(tmp_path / "full"), "-A", "--database-url", "postgresql://x/y"]
    )
    assert taken.exit_code == 2 and "not empty" in taken.stderr, taken.output


def test_import_refuses_a_directory_that_is_not_a_backup(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["admin", "import", str(tmp_path), "--database-url", "postgresql://x/y"])
    assert result.exit_code == 2 and "is not a backup" in result.stderr and "Traceback" not in result.output


def test_every_kind_has_its_place_in_the_import_order() -> None:
    assert sorted(IMPORT_ORDER) == sorted(k.kind for k in ALL_KINDS)
