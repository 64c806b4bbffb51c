# syntax=docker/dockerfile:1
# The remediator image: the long-running service (`remediator serve`) and every
# Argo Workflow step (`remediator step ...`) run from it.
# Build: docker build -t remediator:0.1.0 .
# Base images are pinned by exact version; pin by digest too in your registry
# mirror (docker buildx imagetools inspect python:3.11.11-slim-bookworm).

# --- build: install the package and its dependencies into a venv -------------
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# Metadata first, so a code-only change reuses the dependency layer.
COPY pyproject.toml README.md ./
COPY remediator/ ./remediator/
RUN pip install . \
    && find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} +

# --- runtime: the venv, a non-root user, nothing else ------------------------
FROM python:3.11.11-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="remediator" \
      org.opencontainers.image.description="Self-healing for LLM inference on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --gid 10001 remediator \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin remediator
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080
# HEALTHCHECK NONE: Kubernetes ignores Docker health checks and probes /healthz and
# /readyz itself (deploy/base/deployment.yaml); the same image also runs one-shot
# workflow steps, for which a server health check would be wrong.
HEALTHCHECK NONE
ENTRYPOINT ["remediator"]
CMD ["serve", "--policy", "/etc/remediator/policy.yaml"]
