"""`sluiceway worker TARGET`: run the Worker defined in a module or file.

TARGET is `package.module`, `package.module:attribute` or `path/to/file.py`;
without an attribute, the module's one Worker instance is used. Connection
settings come from flags or the environment (SLUICEWAY_URL,
SLUICEWAY_NAMESPACE, SLUICEWAY_TOKEN_FILE, SLUICEWAY_TOKEN, SLUICEWAY_API_KEY,
SLUICEWAY_WORKER_ID): in a worker pod the operator injects them. It runs on
uvloop unless SLUICEWAY_EVENT_LOOP=asyncio.

Logs are one JSON object a line, like the operator's, with the run id, task
id, epoch and trace id on every line about a task; `--log-format text` (or
SLUICEWAY_LOG_FORMAT=text) gives plain lines for reading in a terminal."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from sluiceway.worker import eventloop, logs
from sluiceway.worker.runner import Worker


class TargetError(ValueError):
    pass


def _module(target: str) -> ModuleType:
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.exists():
            raise TargetError(f"no such file: {target}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot load {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target)
    except ImportError as error:
        raise TargetError(f"cannot import {target}: {error}") from error


def load_worker(target: str) -> Worker:
    name, _, attribute = target.partition(":") if not target.endswith(".py") else (target, "", "")
    module = _module(name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, Worker):
            raise TargetError(f"{target} is not a sluiceway.worker.Worker")
        return found
    workers = [v for v in vars(module).values() if isinstance(v, Worker)]
    if len(workers) != 1:
        raise TargetError(f"{name} defines {len(workers)} Worker objects; name one as {name}:attribute")
    return workers[0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="module, module:attribute, or file.py defining a Worker")
    parser.add_argument("--url", default=os.environ.get("SLUICEWAY_URL"), help="API base URL ($SLUICEWAY_URL)")
    parser.add_argument(
        "--namespace",
        default=os.environ.get("SLUICEWAY_NAMESPACE"),
        help="namespace whose queues to poll ($SLUICEWAY_NAMESPACE)",
    )
    parser.add_argument("--worker-id", default=os.environ.get("SLUICEWAY_WORKER_ID"))
    parser.add_argument("--log-level", default=os.environ.get("SLUICEWAY_LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--log-format",
        choices=["json", "text"],
        default=None,
        help="json (the default) or text ($SLUICEWAY_LOG_FORMAT)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        logs.configure(args.log_level, args.log_format or logs.log_format(os.environ))
    except ValueError as error:  # a bad SLUICEWAY_LOG_FORMAT or --log-level, named
        print(f"sluiceway worker: {error}", file=sys.stderr)
        return 2
    try:
        worker = load_worker(args.target)
    except TargetError as error:
        print(f"sluiceway worker: {error}", file=sys.stderr)
        return 2
    worker.url = args.url or worker.url
    worker.namespace = args.namespace or worker.namespace
    if args.worker_id:
        worker.worker_id = args.worker_id
    token, token_file, api_key = worker._auth
    worker._auth = (
        token or os.environ.get("SLUICEWAY_TOKEN"),
        token_file or os.environ.get("SLUICEWAY_TOKEN_FILE"),
        api_key or os.environ.get("SLUICEWAY_API_KEY"),
    )
    if not worker.url or not worker.namespace:
        print("sluiceway worker: set --url and --namespace (or SLUICEWAY_URL and SLUICEWAY_NAMESPACE)", file=sys.stderr)
        return 2
    try:
        eventloop.chosen(os.environ)
    except ValueError as error:
        print(f"sluiceway worker: {error}", file=sys.stderr)
        return 2
    worker.run_forever()
    return 0
