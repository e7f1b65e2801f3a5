"""Readable validation messages: the field path in the resource's own
camelCase, then pydantic's message."""

from __future__ import annotations

from pydantic import ValidationError


def describe(error: ValidationError, root: str = "spec") -> str:
    parts = []
    for item in error.errors():
        path = ".".join([root, *(str(p) for p in item["loc"])]) if item["loc"] else root
        parts.append(f"{path}: {item['msg']}")
    return "; ".join(parts)
