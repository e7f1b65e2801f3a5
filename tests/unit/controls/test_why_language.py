"""What `why` says of the workflow language's types: a webhook wait, a person,
messages, a loop and a task inside one of its iterations."""

from __future__ import annotations

import datetime
from typing import Any

from sluiceway.controls.why import TaskFacts, explain_task

AT = datetime.datetime(2026, 11, 29, 10, 2, 3, tzinfo=datetime.UTC)


def facts(type_: str, **extra: Any) -> TaskFacts:
    values: dict[str, Any] = {
        "task_id": "t1",
        "ref": "w",
        "type": type_,
        "name": "w",
        "status": "IN_PROGRESS",
        "attempt": 1,
        "seconds_until_available": 0,
        "scheduled_at": AT,
    }
    return TaskFacts(**{**values, **extra})


def test_why_names_the_webhook_its_matches_and_since_when() -> None:
    [reason] = explain_task(
        facts(
            "WAIT_FOR_WEBHOOK", input={"webhook": "orders-paid", "matches": {"orderId": 42}}, seconds_until_timeout=90
        )
    )
    assert reason.message == (
        "waiting for webhook orders-paid matching orderId=42 since 10:02:03Z; timeoutSeconds ends the wait in 90 s"
    )
    assert not reason.blocking
    [missing] = explain_task(facts("WAIT_FOR_WEBHOOK", input={"webhook": "typo"}, webhook_defined=False))
    assert missing.blocking and "does not exist" in missing.message


def test_why_for_people_messages_loops_and_iterations() -> None:
    assert "waits for a person" in explain_task(facts("HUMAN"))[0].message
    [messages] = explain_task(facts("PULL_WORKFLOW_MESSAGES", input={"batchSize": 5}, queued_messages=0))
    assert "batchSize 5, 0 queued" in messages.message
    [looping] = explain_task(facts("DO_WHILE", output={"iteration": 37}, max_iterations=1000, keep_last_n=10))
    assert looping.message == "w is on iteration 37 of at most 1000, keeping the last 10"
    [inner] = explain_task(
        facts("SIMPLE", status="SCHEDULED", attempt=2, seconds_until_available=20, iteration=37, previous_reason="429")
    )
    assert inner.control == "retryBackoff" and "(iteration 37)" in inner.message and "after: 429" in inner.message
