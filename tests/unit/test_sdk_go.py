"""The Go SDK's own unit tests (`go test ./...` in sdk/go): classification
of handler errors into result bodies, the API's bounds on reasons, delays
and log lines, backoff, the client's typed errors. Run from pytest so that
`make test` runs them and reports a failure like any other test's."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk" / "go"


def test_go_sdk_unit_tests_pass() -> None:
    go = shutil.which("go")
    if go is None:
        pytest.fail("the Go toolchain is needed for sdk/go (the polyglot machine has it)")
    env = {**os.environ, "GOFLAGS": "-buildvcs=false", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    done = subprocess.run(
        [go, "test", "-count=1", "./..."], cwd=SDK, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"go test failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
