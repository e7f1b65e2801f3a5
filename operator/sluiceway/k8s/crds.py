"""CRD generation from the pydantic models, the one schema source.

Pydantic emits JSON Schema (draft 2020-12) with `$ref`s, `anyOf` for optional
fields and numeric `exclusiveMinimum`. A Kubernetes structural schema has none
of those, so this module inlines references, folds `Optional[X]` into `X`, and
cuts recursion (a workflow task holds task lists) below a fixed depth, where the
subtree is preserved as-is and validated by the operator's own models.

Defaults are deliberately not emitted: several fields fall back to an
operator-wide default before the built-in one, which an API-server default would
hide. Each description states the built-in default instead.

Every served version has the same schema, so the API server converts between
them by rewriting `apiVersion` (`conversion.strategy: None`): no conversion
webhook to serve, certify and keep available. The deprecated versions answer
with a warning naming the storage version.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from sluiceway.model import DEPRECATED_VERSIONS, GROUP, SERVED_VERSIONS, VERSION
from sluiceway.model.resources import ALL_KINDS, CATEGORY, ResourceKind

Schema = dict[str, Any]

# How many levels of nested task lists get a typed schema; deeper levels are
# preserved and validated by the operator.
MAX_RECURSION = 3
# CEL rules (x-kubernetes-validations) are kept on the first level of a
# recursive structure only: the API server prices a rule by the most items it
# could meet, and a rule on every task of every nested list (forks of loops of
# switches) exceeds its budget many times over. Nested levels are checked by
# the operator's own models, reported on the Workflow's Ready condition.
CEL_DEPTH = 1
# Definitions typed on the first level of tasks only: a CONTAINER's spec is as
# large as the rest of a task, and typed at every nested level it would double
# the Workflow CRD, past what `kubectl apply` can store in its annotation.
# Nested ones are validated by the operator, reported on the Ready condition.
_FIRST_LEVEL_ONLY = frozenset({"ContainerSpec"})

_KEPT_KEYS = (
    "type",
    "description",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "enum",
    "format",
    "nullable",
)

_RULES = "x-kubernetes-validations"
_READY = '.status.conditions[?(@.type=="Ready")].status'

PRINTER_COLUMNS: dict[str, list[Schema]] = {
    "TaskDefinition": [
        {"name": "Ready", "type": "string", "jsonPath": _READY},
        {"name": "Retries", "type": "integer", "jsonPath": ".spec.retryCount"},
        {"name": "Limit", "type": "integer", "jsonPath": ".spec.concurrentExecLimit"},
        {"name": "Queued", "type": "integer", "jsonPath": ".status.ready"},
        {"name": "In-Flight", "type": "integer", "jsonPath": ".status.inFlight"},
        {"name": "Delayed", "type": "integer", "jsonPath": ".status.delayed", "priority": 1},
        {"name": "Semaphores", "type": "string", "jsonPath": ".spec.semaphores", "priority": 1},
    ],
    "Workflow": [
        {"name": "Ready", "type": "string", "jsonPath": _READY},
        {"name": "Version", "type": "integer", "jsonPath": ".status.version"},
        {"name": "Active", "type": "integer", "jsonPath": ".status.activeRuns"},
        {"name": "Max-Runs", "type": "integer", "jsonPath": ".spec.maxConcurrentExecutions", "priority": 1},
    ],
    "WorkflowRun": [
        {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflow"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Done", "type": "integer", "jsonPath": ".status.tasks.completed"},
        {"name": "Total", "type": "integer", "jsonPath": ".status.tasks.total"},
        {"name": "Control", "type": "string", "jsonPath": ".status.control"},
        {"name": "Reason", "type": "string", "jsonPath": ".status.reasonForIncompletion", "priority": 1},
        {"name": "Execution", "type": "string", "jsonPath": ".status.executionId", "priority": 1},
    ],
    "Semaphore": [
        {"name": "Permits", "type": "integer", "jsonPath": ".spec.permits"},
        {"name": "Held", "type": "integer", "jsonPath": ".status.held"},
        {"name": "Ready", "type": "string", "jsonPath": _READY},
    ],
    "Webhook": [
        {"name": "Ready", "type": "string", "jsonPath": _READY},
        {"name": "Path", "type": "string", "jsonPath": ".status.path"},
    ],
    "Trigger": [
        {"name": "Event", "type": "string", "jsonPath": ".spec.event"},
        {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflow"},
        {"name": "Ready", "type": "string", "jsonPath": _READY},
        # A date column shows as an age: how long since the Trigger last judged an event.
        {"name": "Last-Event", "type": "date", "jsonPath": ".status.lastEventTime"},
        # The counts are of a window, its newest events: RECENT says how many were read (at most 1000).
        {"name": "Recent", "type": "integer", "jsonPath": ".status.recent.events"},
        {"name": "Started", "type": "integer", "jsonPath": ".status.recent.started"},
        {"name": "Duplicate", "type": "integer", "jsonPath": ".status.recent.duplicate", "priority": 1},
        {"name": "Filtered", "type": "integer", "jsonPath": ".status.recent.filtered", "priority": 1},
        {"name": "Refused", "type": "integer", "jsonPath": ".status.recent.refused", "priority": 1},
        {"name": "Invalid", "type": "integer", "jsonPath": ".status.recent.invalid", "priority": 1},
    ],
    "Quota": [
        {"name": "Max-Running", "type": "integer", "jsonPath": ".spec.maxConcurrentExecutions"},
        {"name": "Running", "type": "integer", "jsonPath": ".status.used.concurrentExecutions"},
        {"name": "Per-Minute", "type": "integer", "jsonPath": ".spec.maxExecutionsPerMinute"},
        {"name": "Ready", "type": "string", "jsonPath": _READY},
    ],
    "Schedule": [
        {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflow"},
        {"name": "Next", "type": "string", "jsonPath": ".status.nextFireTimes[0]"},
        {"name": "Last", "type": "string", "jsonPath": ".status.lastFireTime"},
        {"name": "Active", "type": "integer", "jsonPath": ".status.activeRuns"},
        {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend"},
        {"name": "Ready", "type": "string", "jsonPath": _READY},
        {"name": "Cron", "type": "string", "jsonPath": ".spec.cron", "priority": 1},
        {"name": "Every", "type": "string", "jsonPath": ".spec.every", "priority": 1},
        {"name": "Policy", "type": "string", "jsonPath": ".spec.overlapPolicy", "priority": 1},
    ],
}
_AGE: Schema = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def structural(node: Schema, defs: dict[str, Schema], stack: tuple[str, ...] = ()) -> Schema:
    """Turn one pydantic JSON-schema node into a structural OpenAPI v3 node."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if stack.count(name) >= MAX_RECURSION or (name in _FIRST_LEVEL_ONLY and stack.count("WorkflowTask") > 1):
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return structural(merged, defs, stack + (name,))
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {options} structurally")
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
        return structural({**options[0], **rest}, defs, stack)
    if "allOf" in node and len(node["allOf"]) == 1:
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return structural({**node["allOf"][0], **rest}, defs, stack)

    out: Schema = {k: node[k] for k in _KEPT_KEYS if k in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    if "exclusiveMinimum" in node:
        out["minimum"], out["exclusiveMinimum"] = node["exclusiveMinimum"], True
    nested = any(stack.count(name) > CEL_DEPTH for name in stack)
    out.update({k: v for k, v in node.items() if k.startswith("x-kubernetes-") and not (nested and k == _RULES)})
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out["type"] = "object"
        return out

    kind = node.get("type")
    if kind == "object" or "properties" in node:
        out["type"] = "object"
        props = node.get("properties", {})
        if props:
            out["properties"] = {k: structural(v, defs, stack) for k, v in props.items()}
        if node.get("required"):
            out["required"] = list(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            out["additionalProperties"] = structural(extra, defs, stack)
        elif not props and extra is not False:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = structural(node.get("items", {}), defs, stack)
    elif kind is None and "enum" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def model_schema(model: type[Any]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return structural(raw, defs)


def crd_for(kind: ResourceKind, served: tuple[str, ...] = SERVED_VERSIONS, storage: str = VERSION) -> Schema:
    """The CRD of one kind. `served` and `storage` are parameters so a test can
    build the layout of an earlier release (storage still in v1alpha1)."""
    schema = {
        "openAPIV3Schema": {
            "type": "object",
            "description": _first_line(kind.spec.__doc__ or kind.kind),
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": model_schema(kind.spec),
                # observedGeneration 0 until the operator first writes: kstatus
                # (Flux, cli-utils) reads an object without a status as Current,
                # this as InProgress (docs/gitops.md). Applied when read, never stored.
                "status": {**model_schema(kind.status), "default": {"observedGeneration": 0}},
            },
        }
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
                "categories": [CATEGORY],
            },
            # Said explicitly, though it is the default: the versions share one schema.
            "conversion": {"strategy": "None"},
            "versions": [_version(kind, name, storage, schema) for name in served],
        },
    }


def _version(kind: ResourceKind, name: str, storage: str, schema: Schema) -> Schema:
    version: Schema = {"name": name, "served": True, "storage": name == storage}
    if name in DEPRECATED_VERSIONS:
        version["deprecated"] = True
        version["deprecationWarning"] = (
            f"{GROUP}/{name} {kind.kind} is deprecated; use {GROUP}/{VERSION} (the same fields)"
        )
    version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = PRINTER_COLUMNS[kind.kind] + [_AGE]
    version["schema"] = schema
    # A copy each, so the YAML spells every version out instead of using aliases.
    return copy.deepcopy(version)


def _first_line(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def render(kind: ResourceKind) -> str:
    # A document start of its own, so `helm show crds`, which joins the files as they
    # are, prints YAML that `kubectl apply -f -` reads as one object per CRD.
    header = "---\n# Generated from sluiceway.model by `sluiceway crds`. Do not edit.\n"
    return header + yaml.safe_dump(crd_for(kind), sort_keys=False, width=120, allow_unicode=True)


def rendered_files() -> dict[str, str]:
    """File name -> YAML of every CRD, as committed in `crds/` and the chart."""
    return {f"{kind.plural}.{GROUP}.yaml": render(kind) for kind in ALL_KINDS}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in rendered_files().items():
        path = directory / file_name
        path.write_text(text)
        written.append(path)
    return written


def drift(directory: Path) -> list[str]:
    """Names of the committed CRD files that differ from the models, or are missing."""
    return [
        file_name
        for file_name, text in rendered_files().items()
        if not (directory / file_name).exists() or (directory / file_name).read_text() != text
    ]
