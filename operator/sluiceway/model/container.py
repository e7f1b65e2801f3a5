"""The CONTAINER task: an image run as one pod per attempt, created by the
operator in the run's namespace (docs/tasks/container.md).

Only what is safe to let a workflow author ask for: no host paths, no
privileged mode, no host network; volumes are configMap, secret, emptyDir and
persistentVolumeClaim. The pod's security context is the operator's, the
restricted Pod Security profile, not the author's."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from sluiceway.model.common import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, Spec
from sluiceway.model.taskdefinition import Argument, WorkerResources

_ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
_KEY = r"^[-._a-zA-Z0-9]{1,253}$"
# An exit code a container can end with (the shell's 128+signal included).
ExitCode = Annotated[int, Field(ge=1, le=255)]
# Variables the operator sets in every CONTAINER pod; env may not redefine them.
RESERVED_ENV = frozenset({"SLUICEWAY_INPUT", "SLUICEWAY_RUN_ID", "SLUICEWAY_TASK_ID", "SLUICEWAY_ATTEMPT"})


class KeyRef(Spec):
    """One key of a Secret or ConfigMap in the run's namespace, read by the kubelet."""

    name: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="The object's name.")
    key: str = Field(pattern=_KEY, description="The key in its data.")
    optional: bool = Field(False, description="Start the container even when the key is missing.")


class EnvSource(Spec):
    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None

    @model_validator(mode="after")
    def _one(self) -> EnvSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("valueFrom takes exactly one of secretKeyRef and configMapKeyRef")
        return self


class ContainerEnv(Spec):
    """One variable: a value (expressions such as ${workflow.input.x} are resolved
    as inputParameters are) or a Secret/ConfigMap key."""

    name: str = Field(pattern=_ENV_NAME, min_length=1, max_length=256)
    value: str | None = Field(None, max_length=32_768, description="Literal, or ${...} resolved like inputParameters.")
    value_from: EnvSource | None = None

    @model_validator(mode="after")
    def _one(self) -> ContainerEnv:
        if self.value is not None and self.value_from is not None:
            raise ValueError(f"env {self.name}: value and valueFrom exclude each other")
        if self.name in RESERVED_ENV:
            raise ValueError(f"env {self.name}: set by the operator, cannot be redefined")
        return self


class ConfigMapVolume(Spec):
    name: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)
    optional: bool = False


class SecretVolume(Spec):
    secret_name: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)
    optional: bool = False


class EmptyDirVolume(Spec):
    medium: str | None = Field(None, pattern=r"^(Memory)?$", description="`Memory` for a tmpfs; the node's disk else.")
    size_limit: str | None = Field(None, max_length=64, pattern=r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$")


class ClaimVolume(Spec):
    claim_name: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)
    read_only: bool = False


class ContainerVolume(Spec):
    """A volume of the pod: exactly one of the safe kinds."""

    name: str = Field(pattern=DNS_LABEL_PATTERN, max_length=63)
    config_map: ConfigMapVolume | None = None
    secret: SecretVolume | None = None
    empty_dir: EmptyDirVolume | None = None
    persistent_volume_claim: ClaimVolume | None = None

    @model_validator(mode="after")
    def _one(self) -> ContainerVolume:
        kinds = [self.config_map, self.secret, self.empty_dir, self.persistent_volume_claim]
        if sum(kind is not None for kind in kinds) != 1:
            raise ValueError(f"volume {self.name}: exactly one of configMap, secret, emptyDir, persistentVolumeClaim")
        return self


class ContainerVolumeMount(Spec):
    name: str = Field(pattern=DNS_LABEL_PATTERN, max_length=63, description="A volume of `volumes`.")
    mount_path: str = Field(pattern=r"^/", max_length=1024)
    sub_path: str | None = Field(None, max_length=1024, pattern=r"^[^/]([^.]|\.[^.])*$")
    read_only: bool = False


class ContainerSpec(Spec):
    """CONTAINER (required): the image to run, one pod per attempt."""

    image: str = Field(min_length=1, max_length=1024, description="Container image.")
    image_pull_policy: str | None = Field(
        None, pattern=r"^(Always|IfNotPresent|Never)$", description="As a Pod's; Kubernetes' default when unset."
    )
    command: list[Argument] | None = Field(
        None,
        max_length=256,
        description="Entrypoint override; unset runs the image's own.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    args: list[Argument] | None = Field(
        None, max_length=256, description="Arguments.", json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    env: list[ContainerEnv] | None = Field(
        None,
        max_length=256,
        description="Variables, unique by name; SLUICEWAY_INPUT (the task's input as JSON) is always set.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    working_dir: str | None = Field(None, pattern=r"^/", max_length=1024)
    resources: WorkerResources | None = Field(None, description="Requests and limits of the container.")
    service_account_name: str = Field(
        "default", pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="The pod's ServiceAccount."
    )
    automount_service_account_token: bool = Field(
        False, description="Mount the ServiceAccount's token; off unless the step calls the Kubernetes API."
    )
    volumes: list[ContainerVolume] | None = Field(
        None,
        max_length=32,
        description="configMap, secret, emptyDir or persistentVolumeClaim volumes, unique by name.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    volume_mounts: list[ContainerVolumeMount] | None = Field(
        None, max_length=32, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    non_retryable_exit_codes: list[ExitCode] | None = Field(
        None,
        max_length=255,
        description="Exit codes that fail the task at once, without a retry.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    image_pull_timeout_seconds: int = Field(
        60,
        ge=0,
        le=86_400,
        description="How long an image that cannot be pulled (ErrImagePull, ImagePullBackOff, InvalidImageName) "
        "or a container that cannot be configured (a missing Secret key) is waited for before the task fails "
        "terminally. Default 60.",
    )

    @field_validator("env")
    @classmethod
    def _unique_env(cls, env: list[ContainerEnv] | None) -> list[ContainerEnv] | None:
        _unique("env", [e.name for e in env or ()])
        return env

    @field_validator("volumes")
    @classmethod
    def _unique_volumes(cls, volumes: list[ContainerVolume] | None) -> list[ContainerVolume] | None:
        _unique("volumes", [v.name for v in volumes or ()])
        return volumes

    @model_validator(mode="after")
    def _mounts_name_volumes(self) -> ContainerSpec:
        names = {v.name for v in self.volumes or ()}
        for index, mount in enumerate(self.volume_mounts or ()):
            if mount.name not in names:
                raise ValueError(f"volumeMounts[{index}].name: {mount.name!r} is not a volume of volumes")
        return self


def _unique(field: str, names: list[str]) -> None:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{field}: {', '.join(repeated)} listed more than once")
