"""The plane's one error for a request it cannot read: `Invalid` names the
field and says what is wrong with it. Commands answer with outcomes; a query
given something it cannot parse (a filter, a cursor) raises this, and each
edge shows it its way (422 naming the field, an error page)."""

from __future__ import annotations


class Invalid(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
