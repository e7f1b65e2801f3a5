"""The `sluiceway` command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sluiceway import __version__


def _crds(args: argparse.Namespace) -> int:
    from sluiceway.k8s import crds

    targets = [Path(d) for d in args.dirs]
    if args.check:
        stale = {str(d): files for d in targets if (files := crds.drift(d))}
        for stale_dir, stale_files in stale.items():
            print(f"{stale_dir}: out of date: {', '.join(stale_files)} (run `sluiceway crds --write`)", file=sys.stderr)
        return 1 if stale else 0
    if args.write:
        for directory in targets:
            for path in crds.write(directory):
                print(path)
        return 0
    for text in crds.rendered_files().values():
        sys.stdout.write("---\n" + text)
    return 0


def _operator(args: argparse.Namespace) -> int:
    from sluiceway.runtime import operator
    from sluiceway.runtime.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as error:
        print(f"sluiceway operator: {error}", file=sys.stderr)
        return 2
    return operator.main(settings)


def _up(args: argparse.Namespace) -> int:
    from sluiceway.devenv import up

    return up.main(Path(args.state_dir), node=args.node)


def _worker(args: argparse.Namespace) -> int:
    from sluiceway.worker import cli

    return cli.run(args)


def _why(args: argparse.Namespace) -> int:
    from sluiceway.cli import why

    return why.run(args)


def _schedules(args: argparse.Namespace) -> int:
    from sluiceway.cli import schedules

    return schedules.run(args)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="sluiceway", description=__doc__)
    root.add_argument("--version", action="version", version=f"sluiceway {__version__}")
    commands = root.add_subparsers(dest="command", required=True)

    op = commands.add_parser("operator", help="run the operator (settings from SLUICEWAY_* variables)")
    op.set_defaults(run=_operator)

    from sluiceway.worker import cli as worker_cli

    worker = commands.add_parser("worker", help="run the task handlers of a Python module")
    worker_cli.add_arguments(worker)
    worker.set_defaults(run=_worker)

    from sluiceway.cli import why as why_cli

    why = commands.add_parser(
        "why",
        help="why is this run or task not further along?",
        description=why_cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    why_cli.add_arguments(why)
    why.set_defaults(run=_why)

    from sluiceway.cli import schedules as schedules_cli

    schedules = commands.add_parser(
        "schedules",
        help="list, read, trigger, pause, resume or backfill Schedules; print their next fire times",
        description=schedules_cli.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    schedules_cli.add_arguments(schedules)
    schedules.set_defaults(run=_schedules)

    crd = commands.add_parser("crds", help="print, write or check the CRDs generated from the models")
    crd.add_argument("dirs", nargs="*", default=["crds", "charts/sluiceway/crds"])
    mode = crd.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the YAML files into the directories")
    mode.add_argument("--check", action="store_true", help="fail if the committed files drifted")
    crd.set_defaults(run=_crds)

    up = commands.add_parser("up", help="local control plane + PostgreSQL + operator, in the foreground")
    up.add_argument("--state-dir", default=".run", help="where the kubeconfig and logs go (default .run)")
    up.add_argument("--node", action="store_true", help="add a local node, so pods run (root; docs/local-node.md)")
    up.set_defaults(run=_up)
    return root


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    sys.exit(args.run(args))


def kubectl_plugin() -> None:
    """`kubectl sluiceway why X` runs `kubectl-sluiceway why X`: the same command line."""
    main(sys.argv[1:])
