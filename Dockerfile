# syntax=docker/dockerfile:1
# The nodeagent DaemonSet image (packaging/kubernetes/daemonset.yaml):
#     docker build -t ghcr.io/nodeagent/nodeagent:0.1.0 .
#
# Two stages on the same pinned base: the first builds nodeagent and its dependencies as wheels
# and installs them into the virtualenv /opt/nodeagent; the second is the base plus that
# virtualenv: no compiler, no pip cache, no sources. Every dependency has a manylinux wheel, so
# no apt-get is needed in either stage.
#
# The base is pinned by version; pin its digest too for reproducible builds (the digest of the
# tag for linux/amd64 and linux/arm64, from `docker buildx imagetools inspect
# python:3.11.13-slim-bookworm`), e.g.
#     ARG BASE=python:3.11.13-slim-bookworm@sha256:<digest>
# and bump both together (Dependabot and Renovate update such pins). `--build-arg BASE=...`
# takes another base with a python3 at /usr/local/bin/python3 (the real-node tests build this
# image without a registry from a local Debian base: nodeagent_testbed.realnode.images).
ARG BASE=python:3.11.13-slim-bookworm

FROM ${BASE} AS build
ARG DEBIAN_FRONTEND=noninteractive
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY nodeagent ./nodeagent
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/nodeagent \
 && python -m pip --python /opt/nodeagent/bin/python install --no-cache-dir --no-index \
        --find-links /wheels nodeagent \
 && /opt/nodeagent/bin/nodeagent --help >/dev/null

FROM ${BASE}
ARG DEBIAN_FRONTEND=noninteractive
LABEL org.opencontainers.image.title="nodeagent" \
      org.opencontainers.image.description="Graceful shutdown and maintenance for Kubernetes nodes" \
      org.opencontainers.image.source="https://github.com/nodeagent/nodeagent" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
# the virtualenv's python links to this base's /usr/local/bin/python3, the same in both stages
COPY --from=build /opt/nodeagent /opt/nodeagent
ENV PATH=/opt/nodeagent/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Root on purpose (the DaemonSet runs it with runAsUser: 0, no privileges, all capabilities
# dropped but CHOWN, DAC_OVERRIDE and FOWNER): the host's D-Bus system bus lets uid 0 take
# logind's shutdown lock and ask systemd to reload logind, and the kubelet's manifest directory
# and logind's drop-in directory on the host belong to root.
USER 0:0
ENTRYPOINT ["nodeagent", "run", "--config", "/etc/nodeagent/config.yaml"]
