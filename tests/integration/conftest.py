"""Integration fixtures: the execution plane (tests/support/plane.py) on the
test's own database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sluiceway.store.database import Pool
from tests.support.plane import Plane, execution_plane


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    async with execution_plane(pool, database_url) as running:
        yield running
