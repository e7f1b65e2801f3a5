"""What `make up` prints works as printed: in a fresh shell, outside the
project's virtual environment and directory, the `export` lines put
`sluiceway` and `kubectl` on the PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sluiceway.devenv import up


def test_the_printed_commands_work_in_a_fresh_shell_elsewhere(tmp_path: Path) -> None:
    cluster_bin = tmp_path / "cluster-bin"
    cluster_bin.mkdir()
    kubectl = cluster_bin / "kubectl"
    kubectl.write_text("#!/bin/sh\necho kubectl here\n")
    kubectl.chmod(0o755)
    assert (up.command_dir() / "sluiceway").exists(), "make venv installs the sluiceway command"
    text = up.banner(tmp_path / "kubeconfig", [up.command_dir(), cluster_bin], "http://127.0.0.1:8080", tmp_path)
    exports = [line.strip() for line in text.splitlines() if line.strip().startswith("export ")]
    assert len(exports) == 2 and "sluiceway worker " in text and "sluiceway runs list" in text
    commands = [line.strip() for line in text.splitlines() if line.strip().startswith(("sluiceway ", "kubectl "))]
    script = "\n".join(
        [
            *exports,
            "set -e",
            "kubectl get sluiceway",
            "sluiceway runs list --help >/dev/null",
            "sluiceway worker --help >/dev/null",
            "command -v sluiceway",
        ]
    )
    shell = shutil.which("bash") or "/bin/bash"
    result = subprocess.run(
        [shell, "--noprofile", "--norc", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.splitlines()[0] == "kubectl here"
    assert result.stdout.splitlines()[-1] == str(up.command_dir() / "sluiceway")
    assert all(c.split()[0] in ("sluiceway", "kubectl") for c in commands)
