"""The TypeScript SDK's own unit tests (sdk/typescript/test: classification
into result bodies, the API's bounds, backoff, task logs), run with node's
built-in test runner. They run here, from pytest, rather than as a Makefile
step, so `make test`, `make unit` and `pytest tests/unit` all run them and
report a failure the same way as every other test; the build script they
need is idempotent (npm ci only when the lock changed, tsc only when a
source changed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SDK = ROOT / "sdk/typescript"


def test_the_typescript_sdk_unit_tests_pass() -> None:
    subprocess.run(["bash", str(ROOT / "hack/build-sdk-typescript.sh")], check=True, timeout=600)
    tests = sorted(str(p) for p in (SDK / "dist/test").glob("*.test.js"))
    assert tests, "no compiled tests under sdk/typescript/dist/test"
    run = subprocess.run(["node", "--test", *tests], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass 0" not in run.stdout, run.stdout[-2000:]
