"""The `sluiceway` command: the user commands of `sluiceway.cli`, and the
commands that run parts of the system: `operator`, `worker`, `up`, `crds`,
`schema`, `openapi`.
Heavy imports happen inside each command, so `sluiceway runs list` starts fast."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated

import typer

from sluiceway.cli.app import build

CRD_DIRS = ["crds", "charts/sluiceway/crds"]


def _crds(dirs: list[str], write: bool, check: bool) -> int:
    from sluiceway.k8s import crds

    targets = [Path(d) for d in dirs]
    if check:
        stale = {str(d): files for d in targets if (files := crds.drift(d))}
        for stale_dir, stale_files in stale.items():
            print(f"{stale_dir}: out of date: {', '.join(stale_files)} (run `sluiceway crds --write`)", file=sys.stderr)
        return 1 if stale else 0
    if write:
        for directory in targets:
            for path in crds.write(directory):
                print(path)
        return 0
    for text in crds.rendered_files().values():
        sys.stdout.write(text)  # each begins with its own document start
    return 0


def _migrate_storage(kubeconfig: str | None) -> int:
    import asyncio

    from sluiceway.k8s import storage
    from sluiceway.kubeapi.client import KubeClient, KubeConfigError, KubeError
    from sluiceway.model.resources import ALL_KINDS

    async def each_kind(client: KubeClient) -> int:
        failed = 0
        for kind in ALL_KINDS:  # one kind's failure does not keep the others stored in an old version
            try:
                print(await storage.migrate(client, kind))
            except (storage.MigrationRefused, KubeError) as error:
                print(f"{kind.plural}: {error}", file=sys.stderr)
                failed += 1
        return 1 if failed else 0

    try:
        client = KubeClient.from_kubeconfig(kubeconfig)
    except KubeConfigError as error:
        print(f"no Kubernetes credentials: {error}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(each_kind(client))
    finally:
        client.close()


def _openapi(write: bool, check: bool) -> int:
    from sluiceway.devenv import openapi

    current = openapi.rendered()
    if check:
        stale = not openapi.COMMITTED.exists() or openapi.COMMITTED.read_text() != current
        if stale:
            print(f"{openapi.COMMITTED}: out of date with the API (run `{openapi.REGENERATE}`)", file=sys.stderr)
        return 1 if stale else 0
    if write:
        openapi.COMMITTED.write_text(current)
        print(openapi.COMMITTED)
        return 0
    sys.stdout.write(current)
    return 0


def _schema(write: bool, check: bool) -> int:
    from sluiceway.devenv import schema

    current = schema.generate()
    committed = schema.shown(schema.COMMITTED)
    if check:
        diff = schema.difference(schema.COMMITTED, current)
        if diff:
            sys.stdout.write(diff)
            print(
                f"{committed}: out of date with the migrations (run `{schema.REGENERATE}`)",
                file=sys.stderr,
            )
        return 1 if diff else 0
    if write:
        schema.COMMITTED.write_text(current)
        print(committed)
        return 0
    sys.stdout.write(current)
    return 0


def _operator() -> int:
    from sluiceway.runtime import operator
    from sluiceway.runtime.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as error:
        print(f"sluiceway operator: {error}", file=sys.stderr)
        return 2
    return operator.main(settings)


def worker_parser() -> argparse.ArgumentParser:
    from sluiceway.worker import cli as worker_cli

    parser = argparse.ArgumentParser(
        prog="sluiceway worker", description=worker_cli.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    worker_cli.add_arguments(parser)
    return parser


def app(name: str = "sluiceway") -> typer.Typer:
    root = build(name)

    @root.command("operator", rich_help_panel="Running Sluiceway")
    def operator() -> None:
        """Run the operator (settings from SLUICEWAY_* variables)."""
        raise typer.Exit(_operator())

    @root.command(
        "worker",
        rich_help_panel="Running Sluiceway",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
    )
    def worker(ctx: typer.Context) -> None:
        """Run the task handlers of a Python module (sluiceway worker --help for its flags)."""
        from sluiceway.worker import cli as worker_cli

        raise typer.Exit(worker_cli.run(worker_parser().parse_args(ctx.args)))

    @root.command("up", rich_help_panel="Running Sluiceway")
    def up(
        state_dir: Annotated[str, typer.Option(help="Where the kubeconfig and logs go")] = ".run",
        node: Annotated[
            bool, typer.Option("--node", help="Add a local node, so pods run (root; docs/local-node.md)")
        ] = False,
    ) -> None:
        """Local control plane + PostgreSQL + operator, in the foreground."""
        from sluiceway.devenv import up as devenv_up

        raise typer.Exit(devenv_up.main(Path(state_dir), node=node))

    @root.command("crds", rich_help_panel="Running Sluiceway")
    def crds(
        dirs: Annotated[
            list[str] | None, typer.Argument(help="Directories (default: crds, charts/sluiceway/crds)")
        ] = None,
        write: Annotated[bool, typer.Option("--write", help="Write the YAML files into the directories")] = False,
        check: Annotated[bool, typer.Option("--check", help="Fail if the committed files drifted")] = False,
        migrate: Annotated[
            bool,
            typer.Option(
                "--migrate",
                help="After an upgrade: rewrite every Sluiceway object in the cluster in the storage version, "
                "then trim each CRD's status.storedVersions (docs/upgrades.md)",
            ),
        ] = False,
        kubeconfig: Annotated[
            str | None, typer.Option(help="With --migrate: the kubeconfig file ($KUBECONFIG, else ~/.kube/config)")
        ] = None,
    ) -> None:
        """Print, write or check the CRDs generated from the models; migrate a cluster's stored objects."""
        if sum((write, check, migrate)) > 1:
            raise typer.BadParameter("--write, --check and --migrate exclude each other")
        if migrate:
            raise typer.Exit(_migrate_storage(kubeconfig))
        raise typer.Exit(_crds(dirs or CRD_DIRS, write, check))

    @root.command("schema", rich_help_panel="Running Sluiceway")
    def schema(
        write: Annotated[bool, typer.Option("--write", help="Write store/schema.sql")] = False,
        check: Annotated[
            bool, typer.Option("--check", help="Fail with a diff if the committed store/schema.sql is stale")
        ] = False,
    ) -> None:
        """Print, write or check the database schema a fresh migration makes (embedded PostgreSQL)."""
        if write and check:
            raise typer.BadParameter("--write and --check exclude each other")
        raise typer.Exit(_schema(write, check))

    @root.command("openapi", rich_help_panel="Running Sluiceway")
    def openapi(
        write: Annotated[bool, typer.Option("--write", help="Write sdk/openapi.json")] = False,
        check: Annotated[bool, typer.Option("--check", help="Fail if the committed sdk/openapi.json is stale")] = False,
    ) -> None:
        """Print, write or check the API's OpenAPI document (the SDKs generate their types from it)."""
        if write and check:
            raise typer.BadParameter("--write and --check exclude each other")
        raise typer.Exit(_openapi(write, check))

    return root


def main(argv: list[str] | None = None) -> None:
    app()(args=argv, prog_name="sluiceway")


def kubectl_plugin() -> None:
    """`kubectl sluiceway why X` runs `kubectl-sluiceway why X`: the same command line."""
    app("kubectl sluiceway")(prog_name="kubectl sluiceway")
