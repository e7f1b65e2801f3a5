"""Operator settings, read once from the environment (SLUICEWAY_*)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    database_url: str = Field(min_length=1)
    namespaces: tuple[str, ...] = ()
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        raw: dict[str, object] = {}
        if "SLUICEWAY_DATABASE_URL" in env:
            raw["database_url"] = env["SLUICEWAY_DATABASE_URL"]
        else:
            raise SettingsError("SLUICEWAY_DATABASE_URL is required: a PostgreSQL 14+ DSN")
        if env.get("SLUICEWAY_NAMESPACES"):
            raw["namespaces"] = tuple(n.strip() for n in env["SLUICEWAY_NAMESPACES"].split(",") if n.strip())
        if env.get("SLUICEWAY_LOG_LEVEL"):
            raw["log_level"] = env["SLUICEWAY_LOG_LEVEL"].upper()
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            field = str(error.errors()[0]["loc"][0])
            raise SettingsError(f"SLUICEWAY_{field.upper()}: {error.errors()[0]['msg']}") from error
