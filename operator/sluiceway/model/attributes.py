"""Search attributes: typed values runs are found by (`tenant=acme`,
`amount>=100`). A Workflow declares them with a type and, optionally, a source
expression over the run's input; a start may set them, a task result may
upsert them, and a WorkflowRun's labels become keyword attributes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from sluiceway.model.common import Spec

# Identifiers (`tenant`, `order_total`) and Kubernetes label keys
# (`app.kubernetes.io/name`), so a WorkflowRun's labels fit as they are.
ATTRIBUTE_NAME_PATTERN = r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9_]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9_])?$"
MAX_ATTRIBUTE_NAME = 317  # a DNS subdomain prefix, a slash and a 63-character name
AttributeName = Annotated[str, Field(pattern=ATTRIBUTE_NAME_PATTERN, max_length=MAX_ATTRIBUTE_NAME)]
# pydantic documents a dict's key pattern as `patternProperties`, which lets any
# other key through: a dict keyed by attribute names says so in `propertyNames`
# too (the CRDs drop it; the API's document keeps it).
ATTRIBUTE_NAMES: dict[str, Any] = {
    "propertyNames": {"pattern": ATTRIBUTE_NAME_PATTERN, "maxLength": MAX_ATTRIBUTE_NAME}
}
MAX_KEYWORD = 256  # characters of a keyword value
MAX_DECLARED = 32  # attributes a Workflow declares
MAX_PER_RUN = 64  # attributes one run carries (declared ones plus labels)


class AttributeType(StrEnum):
    KEYWORD = "keyword"
    INT = "int"
    DOUBLE = "double"
    BOOL = "bool"
    DATETIME = "datetime"


class SearchAttribute(Spec):
    """One attribute runs of this workflow carry."""

    name: AttributeName = Field(description="How it is set and filtered: `tenant`, `order_total`.")
    type: AttributeType = Field(
        description="keyword (text up to 256 characters, compared exactly), int (64-bit), double, bool, or "
        "datetime (ISO 8601 with a time zone)."
    )
    source: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="Where a run takes it from when the start does not set it: a reference such as "
        "${workflow.input.tenantId}. A reference that resolves to nothing leaves it unset.",
    )
