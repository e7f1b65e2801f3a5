"""What a handler raises to steer what happens next."""

from __future__ import annotations


class TerminalError(Exception):
    """This input will never succeed: reported FAILED_WITH_TERMINAL_ERROR and
    never retried, whatever retryCount says."""


class RetryAfter(Exception):
    """Retry after exactly `seconds` (a server's Retry-After, say).

    `consume_budget=True` (the default) spends an attempt like any failure;
    the server honors the delay exactly, under its maxRetryBackoff ceiling.
    `consume_budget=False` is a snooze: no attempt is spent."""

    def __init__(self, seconds: float, *, consume_budget: bool = True, reason: str = "") -> None:
        if seconds < 0:
            raise ValueError(f"RetryAfter needs a non-negative delay, got {seconds}")
        super().__init__(reason or f"retry after {seconds} s")
        self.seconds = seconds
        self.consume_budget = consume_budget


class Snooze(Exception):
    """Hand the task back and lease it again after `seconds`, spending no
    attempt (waiting for something else to finish, say). scheduleToCloseTimeout
    still bounds how long a task may snooze."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        if seconds < 0:
            raise ValueError(f"Snooze needs a non-negative delay, got {seconds}")
        super().__init__(reason or f"snooze {seconds} s")
        self.seconds = seconds
