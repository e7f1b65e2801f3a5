"""Storage version migration: rewrite every Sluiceway object in the storage version.

The API server writes an object to etcd in the CRD's storage version, and only
when the object is written. After the CRDs of a release make v1beta1 the
storage version, objects written earlier stay stored as v1alpha1, listed in the
CRD's `status.storedVersions`, until something writes them again; a later
release can stop serving v1alpha1 only once no object is stored in it.

An empty merge patch is such a write: the API server decodes the object,
encodes it in the storage version, and stores it because the bytes differ (the
kube-storage-version-migrator does the same). It changes no field, so the
operator's handlers, which follow `spec`, do not run again. Once every object of
a kind is rewritten, `status.storedVersions` is trimmed to the storage version.

The administrator runs it (`sluiceway crds --migrate`), not the operator:
trimming storedVersions writes the status of cluster-scoped CRDs, and the
operator may watch only some namespaces while the migration must cover all of them."""

from __future__ import annotations

from dataclasses import dataclass

from sluiceway.kubeapi.client import CustomResourceDefinitions, KubeClient, KubeError
from sluiceway.model import GROUP, VERSION
from sluiceway.model.resources import ResourceKind


class MigrationRefused(Exception):
    """The cluster is not ready to migrate, or some objects could not be rewritten."""


@dataclass(frozen=True)
class Migrated:
    crd: str
    rewritten: int  # objects written again, now stored in VERSION
    stored_before: tuple[str, ...]  # status.storedVersions before the migration

    def __str__(self) -> str:
        if self.stored_before == (VERSION,):
            return f"{self.crd}: every object is stored in {VERSION} already"
        before = ", ".join(self.stored_before)
        return f"{self.crd}: {self.rewritten} objects rewritten; storedVersions [{before}] -> [{VERSION}]"


async def migrate(client: KubeClient, kind: ResourceKind) -> Migrated:
    """Rewrite every object of `kind` in VERSION, then trim the CRD's storedVersions.
    Idempotent: a kind stored only in VERSION is left alone."""
    crds = CustomResourceDefinitions(client)
    name = f"{kind.plural}.{GROUP}"
    versions = await crds.versions(name)
    if versions is None or versions.storage != VERSION:
        found = "is not installed" if versions is None else f"stores {versions.storage}"
        raise MigrationRefused(
            f"{name} {found}, not {VERSION}: apply this release's CRDs first (kubectl apply --server-side -f crds/)"
        )
    if versions.stored == (VERSION,):
        return Migrated(name, 0, versions.stored)
    rewritten, failed = 0, []
    for namespace, object_name in await client.names(kind.plural):
        try:
            await client.merge_patch(kind.plural, namespace, object_name, {})
            rewritten += 1
        except KubeError as error:
            if error.status != 404:  # a 404 was deleted since the list: nothing left to migrate
                failed.append(f"{namespace}/{object_name}: {error.message}")
    if failed:
        raise MigrationRefused(
            f"{name}: {len(failed)} objects were not rewritten, so storedVersions keeps "
            f"[{', '.join(versions.stored)}]:\n  " + "\n  ".join(failed)
        )
    await crds.set_stored_versions(name, [VERSION])
    return Migrated(name, rewritten, versions.stored)
