"""The command line's pure parts: where it connects (flags, environment,
kubeconfig context), what a kubeconfig token is sent to, times written by
people, and the way ages print."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode, exit_code_of
from sluiceway.cli.common import json_value, pairs
from sluiceway.cli.config import EXTENSION, Flags, read_context, resolve, write_server
from sluiceway.cli.runs import since
from sluiceway.runtime.main import app


def kubeconfig(
    path: Path, server: str | None = None, namespace: str | None = "shop", token: str = "kube-token"
) -> Path:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "dev", "context": context}, {"name": "other", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "dev",
    }
    path.write_text(yaml.safe_dump(document))
    if server:
        write_server(path, server)
    return path


def test_flags_win_then_the_environment_then_the_kubeconfig_context(tmp_path: Path) -> None:
    config = str(kubeconfig(tmp_path / "config", server="https://sluiceway.example.com"))
    env = {"KUBECONFIG": config}
    from_context = resolve(Flags(), env)
    assert (from_context.api.url, from_context.namespace) == ("https://sluiceway.example.com", "shop")
    assert from_context.api.credentials.headers() == {"Authorization": "Bearer kube-token"}
    from_env = resolve(Flags(), {**env, "SLUICEWAY_URL": "http://env:1", "SLUICEWAY_NAMESPACE": "envns"})
    assert (from_env.api.url, from_env.namespace) == ("http://env:1", "envns")
    from_flags = resolve(Flags(server="http://flag:2", namespace="flagns", api_key="k"), env)
    assert (from_flags.api.url, from_flags.namespace) == ("http://flag:2", "flagns")
    assert from_flags.api.credentials.headers() == {"X-API-Key": "k"}


def test_a_kubeconfig_token_goes_only_to_the_server_its_context_names(tmp_path: Path) -> None:
    config = str(kubeconfig(tmp_path / "config", server="https://sluiceway.example.com"))
    elsewhere = resolve(Flags(server="https://attacker.example.com"), {"KUBECONFIG": config})
    assert elsewhere.api.credentials.headers() == {}
    no_extension = resolve(Flags(), {"KUBECONFIG": str(kubeconfig(tmp_path / "plain"))})
    assert no_extension.api.url == "http://127.0.0.1:8080" and no_extension.api.credentials.headers() == {}


def test_without_a_kubeconfig_the_defaults_apply_and_a_named_context_must_exist(tmp_path: Path) -> None:
    missing = {"KUBECONFIG": str(tmp_path / "nowhere")}
    found = resolve(Flags(), missing)
    assert (found.api.url, found.namespace) == ("http://127.0.0.1:8080", "default")
    config = str(kubeconfig(tmp_path / "config"))
    assert read_context(None, "other", {"KUBECONFIG": config}).namespace is None
    with pytest.raises(CommandError, match="no context nope") as error:
        resolve(Flags(context="nope"), {"KUBECONFIG": config})
    assert error.value.code is ExitCode.USAGE


def test_set_server_names_the_api_in_the_current_context_and_keeps_the_rest(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config")
    result = CliRunner().invoke(app(), ["config", "set-server", "https://a.example", "--kubeconfig", str(path)])
    assert result.exit_code == 0, result.output
    write_server(path, "https://b.example")  # again: replaced, not added twice
    document = yaml.safe_load(path.read_text())
    extensions = document["contexts"][0]["context"]["extensions"]
    assert extensions == [{"name": EXTENSION, "extension": {"server": "https://b.example"}}]
    assert document["users"][0]["user"]["token"] == "kube-token"


@pytest.mark.parametrize(("status", "code"), [(404, 3), (422, 2), (409, 4), (429, 4), (403, 4), (500, 5), (503, 5)])
def test_every_refusal_has_its_exit_code(status: int, code: int) -> None:
    assert exit_code_of(status) == code


def test_times_are_durations_ago_or_instants() -> None:
    now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
    assert since("24h", "--since", now) == "2026-11-30T12:00:00+00:00"
    assert since("2026-11-01T00:00:00Z", "--since", now) == "2026-11-01T00:00:00+00:00"
    assert since("2026-11-01", "--since", now) == "2026-11-01T00:00:00+00:00"
    with pytest.raises(CommandError, match="--since 'last week'"):
        since("last week", "--since", now)


def test_values_on_the_command_line() -> None:
    assert pairs(["amount=12", "tenant=acme", "items=[1, 2]", "note=a=b"], "-p") == {
        "amount": 12,
        "tenant": "acme",
        "items": [1, 2],
        "note": "a=b",
    }
    assert json_value("true") is True and json_value("x y") == "x y"
    with pytest.raises(CommandError, match="expected key=value"):
        pairs(["nothing"], "-p")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59, "59s"), (61, "1m1s"), (600, "10m"), (3660, "1h1m"), (90000, "1d1h")]
)
def test_ages_print_as_kubectl_prints_them(seconds: float, text: str) -> None:
    assert output.duration(seconds) == text


def test_a_bad_run_reference_exits_2_before_anything_is_called() -> None:
    result = CliRunner().invoke(app(), ["runs", "get", "not-a-run", "--server", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "is not a run id" in result.stderr


@pytest.mark.parametrize("given", ["[1, 2]", "not json"])
def test_an_input_that_is_not_a_json_object_exits_2_naming_the_flag(given: str) -> None:
    result = CliRunner().invoke(app(), ["runs", "start", "wf", "--input", given, "--server", "http://127.0.0.1:9"])
    assert result.exit_code == 2 and "--input" in result.stderr and "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_cli_starts_without_the_cel_compiler() -> None:
    """Every command pays for what the CLI imports at start; CEL (a quarter of a
    second) is imported by the commands that evaluate it, `lint`, not by all."""
    probe = "import sys, sluiceway.cli.app; print('cel' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False", found.stderr
