# syntax=docker/dockerfile:1
# The Sluiceway operator image (also the default worker image).
#   docker build -t ghcr.io/sluiceway/sluiceway:0.2.0.dev0 .
# or, without Docker, `make image` (buildah, FROM a Debian-built base).
# Entrypoint `sluiceway`; the default command runs the operator. The examples'
# workers are in /opt/sluiceway/examples, so the examples run without an image
# of your own.
#
# PYTHON_IMAGE is any image with Python 3.11+ (`python` on PATH, with venv) and
# groupadd/useradd: python:3.11-slim by default; hack/build-image.sh passes a
# Debian bookworm base made with mmdebstrap.

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: wheels of the project and of its dependencies, pinned ---------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the build needs: the project metadata (README.md is its readme),
# the constraints and the package source.
COPY pyproject.toml README.md ./
COPY requirements/constraints.txt requirements/constraints.txt
COPY operator/ operator/
# The project's own wheel, then every dependency at the version pinned by
# requirements/constraints.txt (the project wheel is rebuilt identically), with
# pip from a venv (a distribution's Python has none of its own) and its
# download cache kept between builds.
RUN --mount=type=cache,target=/root/.cache/pip \
    python -m venv /opt/build \
 && /opt/build/bin/pip wheel --no-deps -w /wheels . \
 && /opt/build/bin/pip wheel -c requirements/constraints.txt -w /wheels .

# --- runtime -----------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="sluiceway" \
      org.opencontainers.image.description="A Kubernetes operator for workflows, with every execution control enforced on the server." \
      org.opencontainers.image.source="https://github.com/sluiceway/sluiceway" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.2.0.dev0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH
# Installed from the builder's wheels only: no index, no compiler, no source.
# The last step imports every part the operator and the workers load, so a
# missing shared library (grpcio needs libstdc++) fails the build, not a pod.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-index --find-links /wheels sluiceway \
 && groupadd --system --gid 65532 sluiceway \
 && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin sluiceway \
 && python -c "import sluiceway.runtime.operator, sluiceway.worker"
COPY examples/workers.py /opt/sluiceway/examples/workers.py
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["sluiceway"]
CMD ["operator"]
