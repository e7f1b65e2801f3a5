"""The API's OpenAPI document as a committed file, `sdk/openapi.json`: the
Go and TypeScript SDKs generate their types from it, and `make lint` fails
when it drifts from what the server serves (`sluiceway openapi --check`)."""

from __future__ import annotations

import json
from typing import Any

from sluiceway.devenv.controlplane import REPO_ROOT

COMMITTED = REPO_ROOT / "sdk" / "openapi.json"
REGENERATE = "sluiceway openapi --write"


def document() -> dict[str, Any]:
    """What `GET /openapi.json` answers, built without a database: the routes'
    declarations alone make the document."""
    from sluiceway.api.app import create_app
    from sluiceway.api.services import Services
    from sluiceway.plane import Plane

    app = create_app(Services(Plane(pool=None)))  # type: ignore[arg-type]
    generated: dict[str, Any] = app.openapi()
    return generated


def rendered() -> str:
    # No version in the file: a release must not make every generated client drift.
    spec = document()
    spec["info"]["version"] = "0"
    return json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
