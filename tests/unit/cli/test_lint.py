"""`sluiceway lint`: files and directories read offline, objects of other
kinds skipped, and exit codes CI can act on (0 clean, 1 warnings with
--strict, 2 errors)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sluiceway.runtime.main import app

GOOD = """\
apiVersion: sluiceway.dev/v1beta1
kind: TaskDefinition
metadata: {name: charge}
spec: {scheduleToStartTimeout: 60, retryCount: 2}
---
apiVersion: sluiceway.dev/v1beta1
kind: Workflow
metadata: {name: pay}
spec:
  timeoutSeconds: 600
  tasks: [{name: charge, taskReferenceName: charge}]
"""
WARNED = """\
apiVersion: sluiceway.dev/v1beta1
kind: TaskDefinition
metadata: {name: export}
spec: {scheduleToStartTimeout: 60, semaphores: [legacy_erp]}
"""
INVALID = """\
apiVersion: sluiceway.dev/v1beta1
kind: Workflow
metadata: {name: broken}
spec: {timeoutSeconds: -5, tasks: [{name: charge, taskReferenceName: charge}]}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec: {replicas: -1, whatever: [1, 2]}
"""


def lint(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app(), ["lint", *args])
    return result.exit_code, result.stdout, result.stderr


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_clean_files_exit_0_even_with_strict(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    code, out, err = lint(good, "--strict")
    assert code == 0, out + err
    assert out == ""
    assert "0 errors, 0 warnings in 2 objects from 1 file" in err


def test_warnings_exit_0_and_with_strict_1(tmp_path: Path) -> None:
    warned = write(tmp_path, "warned.yaml", WARNED)
    code, out, err = lint(warned)
    assert code == 0, out + err
    assert "TaskDefinition/export" in out and "spec.semaphores[0]" in out and "undeclared-semaphore" in out
    assert "Named semaphores" in out  # the rule is quoted with its document's section
    assert lint(warned, "--strict")[0] == 1


def test_an_object_that_does_not_parse_exits_2_naming_the_field(tmp_path: Path) -> None:
    invalid = write(tmp_path, "invalid.yaml", INVALID)
    code, out, _ = lint(invalid, "-o", "json")
    assert code == 2
    (finding,) = json.loads(out)
    assert finding["field"] == "spec.timeoutSeconds" and finding["severity"] == "error"
    assert finding["source"] == invalid and finding["name"] == "broken"


def test_a_file_that_is_not_yaml_or_does_not_exist_exits_2(tmp_path: Path) -> None:
    garbled = write(tmp_path, "garbled.yaml", "kind: [unclosed\n")
    assert lint(garbled)[0] == 2
    code, out, _ = lint(str(tmp_path / "missing.yaml"))
    assert code == 2 and "no such file" in out


def test_other_kinds_are_ignored(tmp_path: Path) -> None:
    mixed = write(tmp_path, "mixed.yaml", DEPLOYMENT + "---\n" + GOOD)
    code, out, err = lint(mixed, "--strict")
    assert code == 0, out + err
    assert "in 2 objects" in err


def test_a_directory_is_read_through_its_yaml_files_and_relates_them(tmp_path: Path) -> None:
    write(tmp_path, "defs/task.yaml", WARNED)
    write(
        tmp_path,
        "defs/nested/semaphore.yml",
        "apiVersion: sluiceway.dev/v1beta1\nkind: Semaphore\n"
        "metadata: {name: legacy-erp}\nspec: {name: legacy_erp, permits: 4}\n",
    )
    write(tmp_path, "defs/README.md", "kind: not a manifest")
    code, out, err = lint(str(tmp_path / "defs"), "--strict")
    assert code == 0, out + err  # the semaphore in the other file declares it
    assert "in 2 objects from 2 files" in err


def test_json_output_lists_every_finding_with_its_file(tmp_path: Path) -> None:
    warned = write(tmp_path, "warned.yaml", WARNED)
    invalid = write(tmp_path, "invalid.yaml", INVALID)
    code, out, _ = lint(warned, invalid, "-o", "json")
    assert code == 2
    found = json.loads(out)
    assert {(f["source"], f["rule"]) for f in found} == {(warned, "undeclared-semaphore"), (invalid, "invalid-spec")}
    assert set(found[0]) == {"source", "kind", "name", "field", "rule", "severity", "message"}
