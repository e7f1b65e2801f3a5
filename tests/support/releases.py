"""The previous release (CHANGELOG.md), read from the project's own history:
what an installation being upgraded still carries."""

from __future__ import annotations

import subprocess

import pytest

from sluiceway.devenv.controlplane import REPO_ROOT

PREVIOUS = "06372b5"  # release 0.1.0


def previous_file(path: str) -> str:
    """A file of the repository as the previous release had it. Skips in a
    clone too shallow to hold that release (nothing to compare with there)."""
    shown = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{PREVIOUS}:{path}"], capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        pytest.skip(f"release {PREVIOUS} is not in this clone's history: {shown.stderr.strip()}")
    return shown.stdout
