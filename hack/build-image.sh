#!/usr/bin/env bash
# Builds the images of the local node without a registry, and exports each as
# an OCI archive that `ctr images import` and `kind load image-archive` take:
#
#   pause      the static pause binary of hack/build-node.sh, FROM scratch
#   base       Debian bookworm's Python 3.11 (mmdebstrap), the Dockerfile's
#              PYTHON_IMAGE when buildah builds it
#   postgres   Debian bookworm's PostgreSQL 15 for the chart's development
#              database (devPostgres.image), honouring the official image's
#              POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and PGDATA
#   sluiceway  the project's Dockerfile: `docker build` where a Docker engine
#              answers, `buildah build` FROM the base otherwise
#
# Every archive is named by a key of its inputs under $CACHE/images, so a run
# with unchanged inputs builds nothing. Debian packages and Python wheels come
# from their registries; nothing else is fetched.
#
# usage: hack/build-image.sh [pause|postgres|sluiceway]...   (default: all three)
# prints one line per image: NAME ARCHIVE REFERENCE
set -euo pipefail
shopt -s inherit_errexit  # a failed mmdebstrap inside $(...) stops the build

cd "$(dirname "$0")/.."
CACHE=${SLUICEWAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluiceway}
IMAGES="$CACHE/images"
SUITE=bookworm
MIRROR=${SLUICEWAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE=${IMAGE:-ghcr.io/sluiceway/sluiceway:$VERSION}
PAUSE_REF=localhost/sluiceway/pause:3.10.2
POSTGRES_REF=localhost/sluiceway/postgres:15
# libstdc++6: grpcio's compiled core needs it (python:3.11-slim has it too).
BASE_PACKAGES=python3,python3-venv,python-is-python3,passwd,libstdc++6
POSTGRES_PACKAGES=postgresql-15,passwd
# What the server never loads here: the JIT (LLVM; PostgreSQL skips JIT when its
# provider is missing) and full Perl (postgresql-common's tools; the entrypoint
# calls initdb and postgres directly). 180 MB of the 365.
POSTGRES_TRIM='rm -rf "$1"/usr/lib/x86_64-linux-gnu/libLLVM-* "$1"/usr/lib/postgresql/15/lib/llvmjit* \
  "$1"/usr/lib/postgresql/15/lib/bitcode "$1"/usr/lib/x86_64-linux-gnu/perl "$1"/usr/share/perl \
  "$1"/etc/postgresql/15 "$1"/var/lib/postgresql/15'
# Docs, manuals and translations are not needed in an image.
DPKG_EXCLUDES=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
               --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*')
log() { printf '[build-image] %s\n' "$*" >&2; }
key() { sha256sum | cut -c1-16; }
mkdir -p "$IMAGES"
exec 8>"$IMAGES/.lock"  # one build at a time per machine
flock 8

docker_engine() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }

need() {  # the distribution's tools, installed once (hack/install-node-packages.sh)
  command -v buildah >/dev/null && command -v mmdebstrap >/dev/null || bash hack/install-node-packages.sh >&2
}

image_id() { buildah images --quiet --no-trunc "$1" 2>/dev/null | head -1 || true; }  # empty: no such image

# Export a buildah image as an OCI archive whose reference is the image name,
# and drop the older archives of the same image, and the older image the new
# one took its name from (buildah would keep it, untagged, for ever).
export_archive() {  # export_archive REF ARCHIVE [PREVIOUS_ID]
  local ref=$1 archive=$2 previous=${3:-}
  if [ -n "$previous" ] && [ "$previous" != "$(image_id "$ref")" ]; then
    buildah rmi "$previous" >/dev/null 2>&1 || true
  fi
  rm -f "$archive.tmp"
  buildah push --quiet "$ref" "oci-archive:$archive.tmp:$ref" >/dev/null
  mv "$archive.tmp" "$archive"
  find "$IMAGES" -maxdepth 1 -name "$(basename "${archive%-*}")-*.tar" ! -path "$archive" -delete
}

# A root filesystem of Debian packages, made an image (no layers below it).
rootfs_image() {  # rootfs_image REF PACKAGES [mmdebstrap options...]
  local ref=$1 packages=$2 work container; shift 2
  work=$(mktemp -d)
  log "mmdebstrap $SUITE with $packages -> $ref"
  mmdebstrap --quiet --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$packages" "${DPKG_EXCLUDES[@]}" "$@" \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
    --format=tar "$SUITE" "$work/rootfs.tar" "$MIRROR" >&2
  tar -tf "$work/rootfs.tar" ./usr/bin/sh >/dev/null  # a root filesystem, not an empty archive
  container=$(buildah from scratch)
  buildah add --quiet "$container" "$work/rootfs.tar" / >/dev/null
  rm -rf "$work"
  echo "$container"
}

build_pause() {
  local bin archive container previous
  bin=$(bash hack/build-node.sh)
  archive="$IMAGES/pause-$(key < "$bin/pause").tar"
  if [ ! -f "$archive" ]; then
    need
    previous=$(image_id "$PAUSE_REF")
    container=$(buildah from scratch)
    buildah copy --quiet "$container" "$bin/pause" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --user 65535:65535 "$container"
    buildah commit --quiet --rm "$container" "$PAUSE_REF" >/dev/null
    export_archive "$PAUSE_REF" "$archive" "$previous"
  fi
  echo "pause $archive $PAUSE_REF"
}

base_ref() {  # the base image, built once per package list
  local ref container
  ref="localhost/sluiceway/python-base:$(printf '%s\n' "$SUITE" "$BASE_PACKAGES" "${DPKG_EXCLUDES[*]}" | key)"
  if ! buildah inspect --type image "$ref" >/dev/null 2>&1; then
    container=$(rootfs_image "$ref" "$BASE_PACKAGES")
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --cmd '["python3"]' "$container"
    buildah commit --quiet --rm "$container" "$ref" >/dev/null
  fi
  echo "$ref"
}

build_postgres() {
  local archive container entrypoint previous
  entrypoint=hack/images/postgres-entrypoint.sh
  archive="$IMAGES/postgres-$(cat "$entrypoint" <(printf '%s\n' "$SUITE" "$POSTGRES_PACKAGES" "$POSTGRES_TRIM") | key).tar"
  if [ ! -f "$archive" ]; then
    need
    previous=$(image_id "$POSTGRES_REF")
    # The official image's postgres user is uid 70 (the chart runs as 70); the
    # cluster the package creates is dropped, initdb runs at the first start.
    container=$(rootfs_image "$POSTGRES_REF" "$POSTGRES_PACKAGES" \
      --essential-hook='echo "postgres:x:70:" >> "$1/etc/group"; echo "postgres:x:70:70:PostgreSQL:/var/lib/postgresql:/bin/sh" >> "$1/etc/passwd"' \
      --customize-hook="$POSTGRES_TRIM")
    buildah copy --quiet --chmod 0755 "$container" "$entrypoint" /usr/local/bin/postgres-entrypoint >/dev/null
    buildah config --user 70:70 --entrypoint '["/usr/local/bin/postgres-entrypoint"]' --cmd '[]' \
      --env PATH=/usr/lib/postgresql/15/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env PGDATA=/var/lib/postgresql/data --port 5432 "$container"
    buildah commit --quiet --rm "$container" "$POSTGRES_REF" >/dev/null
    export_archive "$POSTGRES_REF" "$archive" "$previous"
  fi
  echo "postgres $archive $POSTGRES_REF"
}

# What the Dockerfile copies (see .dockerignore): its inputs name the image.
context_key() {
  { cat hack/build-image.sh Dockerfile .dockerignore pyproject.toml README.md requirements/constraints.txt examples/workers.py
    find operator -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' | LC_ALL=C sort \
      | xargs sha256sum; echo "$1"; } | key
}

build_sluiceway() {
  local archive base previous mounts=()
  if docker_engine; then
    archive="$IMAGES/sluiceway-docker-$(context_key docker).tar"
    if [ ! -f "$archive" ]; then
      log "docker build -t $IMAGE ."
      docker build -t "$IMAGE" . >&2
      docker save -o "$archive" "$IMAGE"
    fi
  else
    need
    base=$(base_ref)
    archive="$IMAGES/sluiceway-$(context_key "$base").tar"
    if [ ! -f "$archive" ]; then
      # pip in the build container trusts what pip trusts here (a TLS-inspecting
      # proxy's CA, an index mirror): the host's pip.conf and CA bundle, read-only.
      for f in /etc/pip.conf /etc/ssl/certs/ca-certificates.crt; do
        [ -f "$f" ] && mounts+=(--volume "$f:$f:ro")
      done
      # No --layers: buildah 1.28 would reuse the runtime stage's install step
      # even when the builder's wheels changed (a bind mount is not in its cache
      # key). The inputs' key above already skips unchanged builds entirely.
      log "buildah build -t $IMAGE --build-arg PYTHON_IMAGE=$base ."
      previous=$(image_id "$IMAGE")
      buildah build --quiet --network host "${mounts[@]}" --build-arg "PYTHON_IMAGE=$base" \
        -t "$IMAGE" . >&2
      export_archive "$IMAGE" "$archive" "$previous"
    fi
  fi
  local size
  if docker_engine; then
    size="$(( $(docker image inspect --format '{{.Size}}' "$IMAGE") / 1000000 )) MB"
  else
    size=$(buildah images --format '{{.Size}}' "$IMAGE" | head -1)
  fi
  log "$IMAGE: $size, $(du -m "$archive" | cut -f1) MB as an archive ($archive)"
  echo "sluiceway $archive $IMAGE"
}

for image in "${@:-pause postgres sluiceway}"; do
  for one in $image; do "build_$one"; done
done
