"""Result and heartbeat batches are checked per item, and an item's 422 can
quote whatever keys the client sent."""

from __future__ import annotations

import uuid

from sluiceway.model.execution import ItemOutcome, TaskResult, checked_items


def result(**fields: object) -> dict[str, object]:
    return {"taskId": str(uuid.uuid4()), "epoch": 1, "status": "COMPLETED", **fields}


def test_an_item_whose_keys_hold_control_characters_gets_a_422_that_quotes_them_escaped() -> None:
    good, odd = result(), result(searchAttributes={"a\x00b\ud800": True})
    outcomes = checked_items(TaskResult, [good, odd])
    assert isinstance(outcomes[0], TaskResult)
    refused = outcomes[1]
    assert isinstance(refused, ItemOutcome) and refused.code == 422 and refused.task_id == odd["taskId"]
    [field] = refused.fields
    assert field.field.startswith("searchAttributes.a\\u0000b"), field.field
    assert field.field.isprintable() and refused.error.isprintable()


def test_a_task_id_sent_twice_is_refused_from_its_second_appearance() -> None:
    first = result()
    outcomes = checked_items(TaskResult, [first, dict(first)])
    assert isinstance(outcomes[0], TaskResult)
    assert isinstance(outcomes[1], ItemOutcome) and outcomes[1].fields[0].field == "taskId"
