"""`sluiceway schedules list|get|next|trigger|pause|resume|backfill`: the
Schedules of a namespace through the operator's API.

`next NAME` prints the upcoming fire times, in UTC and in the schedule's time
zone; `backfill NAME --from T --to T` fires the times of a past range, each
once. Settings come from flags or the environment, as for `sluiceway why`:
SLUICEWAY_URL, SLUICEWAY_NAMESPACE, SLUICEWAY_TOKEN, SLUICEWAY_TOKEN_FILE,
SLUICEWAY_API_KEY. Exit codes: 0 done, 2 usage error, not found or an API
that cannot be reached or refused."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import aiohttp

from sluiceway.cli.client import DEFAULT_URL, Api, CommandError, Credentials, kubeconfig_namespace

ACTIONS = ("list", "get", "next", "trigger", "pause", "resume", "backfill")


def _dash(value: object) -> str:
    return "-" if value in (None, "", []) else str(value)


def list_lines(schedules: list[dict[str, Any]]) -> list[str]:
    """A table, as `kubectl get schedules` would print it."""
    rows = [("NAME", "WORKFLOW", "NEXT", "LAST", "ACTIVE", "SUSPENDED", "STARTED", "MISSED", "SKIPPED")]
    for s in schedules:
        spec = s.get("spec") or {}
        rows.append(
            (
                str(s.get("name")),
                _dash(spec.get("workflow")),
                _dash((s.get("nextFireTimes") or [None])[0]),
                _dash(s.get("lastFireTime")),
                str(s.get("activeRuns", 0)),
                str(bool(s.get("suspended"))).lower(),
                str(s.get("runsStarted", 0)),
                str(s.get("missed", 0)),
                str(s.get("skipped", 0)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def get_lines(schedule: dict[str, Any]) -> list[str]:
    spec = schedule.get("spec") or {}
    when = f"every {spec['every']}" if spec.get("every") else "cron " + ", ".join(spec.get("cron") or [])
    lines = [
        f"schedule {schedule.get('name')}: {when} ({spec.get('timezone', 'UTC')}), workflow {spec.get('workflow')}",
        f"  overlap policy {spec.get('overlapPolicy', 'Skip')}, catch-up window "
        f"{spec.get('catchupWindowSeconds', 60)} s" + (", suspended" if schedule.get("suspended") else ""),
        f"  runs started {schedule.get('runsStarted', 0)}, active {schedule.get('activeRuns', 0)}, "
        f"waiting {schedule.get('buffered', 0)}, skipped {schedule.get('skipped', 0)}, "
        f"missed {schedule.get('missed', 0)}",
        f"  next: {', '.join(schedule.get('nextFireTimes') or []) or 'none'}",
    ]
    recent = schedule.get("recent") or []
    if recent:
        lines.append("  recent fires:")
        lines += [fire_line(f, "    ") for f in recent]
    return lines


def fire_line(fire: dict[str, Any], indent: str = "") -> str:
    run = f" run {fire['runId']}" if fire.get("runId") else ""
    reason = f" ({fire['reason']})" if fire.get("reason") else ""
    return f"{indent}{fire.get('fireTime')} {fire.get('kind')}: {fire.get('outcome')}{run}{reason}"


def next_lines(schedule: dict[str, Any]) -> list[str]:
    """Each upcoming fire in UTC, and in the schedule's zone when it has one."""
    spec = schedule.get("spec") or {}
    name = spec.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    times = schedule.get("nextFireTimes") or []
    if not times:
        return [
            f"schedule {schedule.get('name')} has no upcoming fire"
            + (" (suspended)" if schedule.get("suspended") else "")
        ]
    lines = []
    for text in times:
        instant = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        local = instant.astimezone(zone)
        lines.append(f"{text}" + ("" if name == "UTC" else f"   {local:%Y-%m-%d %H:%M:%S %Z} ({name})"))
    return lines


def backfill_lines(body: dict[str, Any]) -> list[str]:
    lines = [f"{body.get('started', 0)} runs started, {body.get('alreadyFired', 0)} fire times already fired"]
    return lines + [fire_line(f, "  ") for f in body.get("fires") or []]


async def _send(
    api: Api, method: str, segments: tuple[str, ...], body: Any = None, params: dict[str, str] | None = None
) -> Any:
    address = api.address(*segments)
    headers = {"Accept": "application/json", **api.credentials.headers()}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=api.timeout)) as session:
            async with session.request(method, address, json=body, headers=headers, params=params) as response:
                status, text = response.status, await response.text()
    except (TimeoutError, aiohttp.ClientError, OSError) as error:
        raise CommandError(f"cannot reach the Sluiceway API at {api.url}: {error or type(error).__name__}") from error
    try:
        decoded: Any = json.loads(text) if text else None
    except ValueError:
        decoded = None
    if status >= 400:
        message = decoded.get("message") if isinstance(decoded, dict) else None
        raise CommandError(f"{message or text.strip()[:200] or 'no body'} (HTTP {status} from {method} {address})")
    return decoded


async def perform(args: argparse.Namespace, api: Api, namespace: str) -> tuple[Any, list[str]]:
    """Call the API for one action; return the body and the lines to print."""
    base = ("v1", "ns", namespace, "schedules")
    policy = {"overlapPolicy": args.overlap_policy} if getattr(args, "overlap_policy", None) else {}
    if args.action == "list":
        body = await _send(api, "GET", base)
        return body, list_lines(body)
    if not args.name:
        raise CommandError(f"schedules {args.action} needs a schedule NAME")
    one = (*base, args.name)
    if args.action == "get":
        body = await _send(api, "GET", one)
        return body, get_lines(body)
    if args.action == "next":
        body = await _send(api, "GET", one, params={"upcoming": str(args.count)})
        return body, next_lines(body)
    if args.action == "trigger":
        body = await _send(api, "POST", (*one, "trigger"), policy)
        return body, [fire_line(body)]
    if args.action in ("pause", "resume"):
        body = await _send(api, "POST", (*one, args.action))
        return body, [f"schedule {args.name} {'paused' if args.action == 'pause' else 'resumed'}"]
    if not (args.start and args.end):
        raise CommandError("schedules backfill needs --from and --to (ISO 8601 instants, e.g. 2026-05-01T00:00:00Z)")
    body = await _send(api, "POST", (*one, "backfill"), {"startTime": args.start, "endTime": args.end, **policy})
    return body, backfill_lines(body)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to do")
    parser.add_argument("name", nargs="?", help="the Schedule (metadata.name); all of them for list")
    parser.add_argument(
        "-n", "--namespace", help="namespace ($SLUICEWAY_NAMESPACE, else the kubeconfig's, else default)"
    )
    parser.add_argument("--count", type=int, default=5, choices=range(1, 101), metavar="N", help="next: how many (5)")
    parser.add_argument("--from", dest="start", help="backfill: the first fire time to fill (ISO 8601)")
    parser.add_argument("--to", dest="end", help="backfill: the last fire time to fill (ISO 8601, not in the future)")
    parser.add_argument(
        "--overlap-policy",
        choices=("Skip", "BufferOne", "BufferAll", "CancelOther", "TerminateOther", "AllowAll"),
        help="trigger and backfill: override the schedule's overlap policy",
    )
    parser.add_argument("--url", help=f"API base URL ($SLUICEWAY_URL, else {DEFAULT_URL})")
    parser.add_argument("--token", help="bearer token ($SLUICEWAY_TOKEN)")
    parser.add_argument("--token-file", help="file holding a bearer token ($SLUICEWAY_TOKEN_FILE)")
    parser.add_argument("--api-key", help="API key, sent as X-API-Key ($SLUICEWAY_API_KEY)")
    parser.add_argument("--kubeconfig", help="kubeconfig whose context names the default namespace ($KUBECONFIG)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the API (default 30)")


def _api(args: argparse.Namespace) -> Api:
    if args.token or args.token_file or args.api_key:
        credentials = Credentials(args.token, args.token_file, args.api_key)
    else:
        env = os.environ.get
        credentials = Credentials(env("SLUICEWAY_TOKEN"), env("SLUICEWAY_TOKEN_FILE"), env("SLUICEWAY_API_KEY"))
    return Api(args.url or os.environ.get("SLUICEWAY_URL") or DEFAULT_URL, credentials, args.timeout)


def run(args: argparse.Namespace) -> int:
    namespace = (
        args.namespace or os.environ.get("SLUICEWAY_NAMESPACE") or kubeconfig_namespace(args.kubeconfig) or "default"
    )
    try:
        body, lines = asyncio.run(perform(args, _api(args), namespace))
    except CommandError as error:
        print(f"sluiceway schedules {args.action}: {error}", file=sys.stderr)
        return 2
    print(json.dumps(body, indent=2) if args.output == "json" else "\n".join(lines))
    return 0
