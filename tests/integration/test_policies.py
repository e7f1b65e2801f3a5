"""The one policy object: each task type's policy is resolved once from its
TaskDefinition and the operator defaults, served from memory until the
namespace's definitions change."""

from __future__ import annotations

from sluiceway.controls.policy import OperatorDefaults
from sluiceway.store import definitions
from sluiceway.store.database import Pool
from sluiceway.store.policies import Policies


async def test_policies_are_resolved_once_with_the_defaults_and_dropped_on_change(pool: Pool) -> None:
    policies = Policies(OperatorDefaults(retry_count=7, start_to_close_timeout=30))
    async with pool.acquire() as conn:
        await definitions.upsert_task_definition(conn, "ns", "charge", "charge", 1, {"concurrentExecLimit": 2})
        found = await policies.of(conn, "ns", ["charge", "nobody_defined_this"])
        assert found["charge"].gates.concurrent_exec_limit == 2
        assert found["charge"].retry.retry_count == 7, "the operator default fills what the definition leaves unset"
        assert found["nobody_defined_this"] == policies.undefined
        assert found["nobody_defined_this"].timeouts.start_to_close == 30

        await definitions.upsert_task_definition(conn, "ns", "charge", "charge", 2, {"concurrentExecLimit": 5})
        cached = await policies.of(conn, "ns", ["charge"])
        assert cached["charge"] is found["charge"], "served from memory until told the namespace changed"
        policies.invalidate("other-namespace")
        assert (await policies.of(conn, "ns", ["charge"]))["charge"] is found["charge"]
        policies.invalidate("ns")
        assert (await policies.of(conn, "ns", ["charge"]))["charge"].gates.concurrent_exec_limit == 5
