"""The docs' examples, run against the real API server and operator: every
page with a `<!-- doctest: ... -->` comment runs its ```console blocks in one
shell, as a user with `sluiceway` and `kubectl` on the PATH and a kubeconfig
whose context names the namespace and the Sluiceway API (what `make up`
sets up), and each command must print what the page says."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from sluiceway.cli.config import write_server
from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.devenv.processes import Child
from tests.support import doctest
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess

PAGES = [page for path in sorted((REPO_ROOT / "docs").glob("*.md")) if (page := doctest.read(path)) is not None]


def user_kubeconfig(kube: Kube, namespace: str, api_url: str, path: Path) -> Path:
    """The test cluster's kubeconfig, its context set to `namespace` and naming the API."""
    config = yaml.safe_load(kube.run("config", "view", "--raw", "--minify").stdout)
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    write_server(path, api_url)
    return path


@pytest.mark.parametrize("page", PAGES, ids=[p.path.name for p in PAGES])
def test_the_examples_of(
    page: doctest.Page,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    start_worker: Callable[..., Child],
    tmp_path: Path,
) -> None:
    assert page.examples, f"{page.path.name} has a doctest comment but no console examples"
    for target in filter(None, page.directives.get("workers", "").split(",")):
        start_worker(str(REPO_ROOT / target), namespace)
    env = {
        "PATH": os.pathsep.join(
            [str(Path(sys.executable).parent), str(Path(kube.kubectl_path).parent), "/usr/bin", "/bin"]
        ),
        "HOME": str(tmp_path),
        "KUBECONFIG": str(user_kubeconfig(kube, namespace, operator.api_url, tmp_path / "kubeconfig")),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
    }
    outcomes = doctest.run(page, env, REPO_ROOT, tmp_path)
    for index, outcome in enumerate(outcomes):
        example = outcome.example
        where = f"{page.path.name}:{example.line}: $ {example.command}"
        stderr = doctest.stderr_of(tmp_path, index)
        assert outcome.exit_code == example.exit_code, f"{where}\nexit {outcome.exit_code}\n{outcome.stdout}{stderr}"
        assert doctest.matches(example.expected, outcome.stdout), (
            f"{where}\n--- expected\n" + "\n".join(example.expected) + f"\n--- got\n{outcome.stdout}{stderr}"
        )
