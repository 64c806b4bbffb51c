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
# The core's and the simulator's hot modules are compiled to C by mypyc (pyproject.toml,
# [tool.remediator] compiled; setup.py). The compiler and mypy stay in this stage: the wheel
# is built in a venv of its own, and only the wheel goes into the one the runtime copies.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python -m venv /opt/build \
    && /opt/build/bin/pip install "setuptools==84.2.1" "mypy==2.4.1" types-PyYAML types-protobuf
COPY pyproject.toml setup.py README.md ./
COPY remediator/ ./remediator/
# (mypyc type-checks the modules against the dependencies: the build venv has them too)
RUN /opt/build/bin/pip install . \
    && REMEDIATOR_COMPILE=1 /opt/build/bin/pip wheel --no-build-isolation --no-deps -w /wheels . \
    && pip install /wheels/*.whl \
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
