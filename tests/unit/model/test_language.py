"""What the model refuses of the workflow language's new types, before any
decider sees them (a loop needs its bound)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.model.workflow import WorkflowSpec


def simple(ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def loop(body: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE", "loopOver": body, **extra}


def test_a_loop_without_max_iterations_is_refused_by_the_model() -> None:
    with pytest.raises(ValidationError, match="maxIterations"):
        WorkflowSpec.model_validate({"tasks": [loop([simple("x")], loopCondition="true")]})
    with pytest.raises(ValidationError, match="less than or equal to 10000"):
        WorkflowSpec.model_validate({"tasks": [loop([simple("x")], loopCondition="true", maxIterations=10_001)]})
    with pytest.raises(ValidationError, match="keepLastN cannot exceed"):
        WorkflowSpec.model_validate(
            {"tasks": [loop([simple("x")], loopCondition="true", maxIterations=3, keepLastN=4)]}
        )
