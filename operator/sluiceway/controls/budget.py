"""The retry budget: the share of recent executions of one task type that may
be retries, so a degraded dependency is not held down by the retry traffic its
own degradation caused.

The window is 300 seconds; fewer than 20 executions never trip it (a tiny
sample lies); `retryBudget: 1` disables it."""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_SECONDS = 300.0
MINIMUM_EXECUTIONS = 20


@dataclass(frozen=True)
class BudgetWindow:
    executions: int = 0
    retries: int = 0
    window_seconds: float = WINDOW_SECONDS


def budget_spent(window: BudgetWindow, retry_budget: float) -> bool:
    if retry_budget >= 1.0 or window.executions < MINIMUM_EXECUTIONS:
        return False
    return window.retries / window.executions > retry_budget
