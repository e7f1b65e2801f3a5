"""The path parameters the routers share, declared once so that every route
validates and documents them alike."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Path

from sluiceway.model.common import DNS_LABEL_PATTERN, ENGINE_NAME_PATTERN

NAMESPACE = Annotated[str, Path(pattern=DNS_LABEL_PATTERN, description="Kubernetes namespace")]
NAME = Annotated[str, Path(pattern=ENGINE_NAME_PATTERN, max_length=253)]
EXECUTION_ID = Annotated[uuid.UUID, Path(description="A run id, as returned when it started")]
TASK_ID = Annotated[uuid.UUID, Path(description="A task id, as leased")]
