# syntax=docker/dockerfile:1
#
# kvplan API image.
#
#   docker build -t kvplan:0.1.0 .
#   docker run --rm -v kvplan-data:/data kvplan:0.1.0 migrate
#   docker run --rm -v kvplan-data:/data kvplan:0.1.0 seed
#   docker run --rm -p 8000:8000 -v kvplan-data:/data --read-only --tmpfs /tmp kvplan:0.1.0
#
# Without DATABASE_URL the service uses SQLite at /data/kvplan.db; /data is a
# volume (Kubernetes: the chart mounts an emptyDir there). Production sets
# DATABASE_URL to PostgreSQL. Nothing is downloaded at run time.
#
# `kvplan serve` runs uvicorn with httptools and uvloop (uvicorn[standard]), one
# worker (KVPLAN_WORKERS), uvicorn's access log off and kvplan's writing every
# error and a sample of the rest (KVPLAN_ACCESS_LOG_SAMPLE), 5 s keep-alive, at
# most 1024 connections in flight, 20 s to finish on SIGTERM: service/kit/server.py.

ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: wheels for kvplan and every dependency ---------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# .dockerignore admits only the package sources and metadata.
COPY . .
RUN pip wheel --wheel-dir /wheels .
# Alembic files kept outside the package (alembic.ini, migrations/) are staged
# for the runtime stage when present, so `kvplan migrate` finds them whether
# they ship inside the wheel or beside it.
RUN mkdir -p /app \
 && for p in alembic.ini migrations; do \
      if [ -e "$p" ]; then cp -r "$p" /app/; fi; \
    done

# ---- runtime ------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="kvplan" \
      org.opencontainers.image.description="Capacity planning for LLM inference: how many requests fit in a GPU's KV cache" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    DATABASE_URL=sqlite:////data/kvplan.db

# Fixed numeric uid/gid so Kubernetes' runAsNonRoot can verify it and the
# chart's runAsUser/fsGroup match.
RUN groupadd --system --gid 10001 kvplan \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin kvplan \
 && install -d -o 10001 -g 10001 -m 0750 /data

# Install from the build stage's wheels only (--no-index): this stage never
# reaches a package index, and the wheels never become an image layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links=/wheels kvplan

COPY --from=build /app /app
# Code and venv stay root-owned (read-only to the service); only /data and
# /tmp are writable.
WORKDIR /app
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8000

# Liveness only (/healthz does not touch the database); the port matches CMD.
# Kubernetes ignores HEALTHCHECK and uses the chart's probes instead.
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

ENTRYPOINT ["kvplan"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
