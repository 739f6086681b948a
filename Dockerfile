# syntax=docker/dockerfile:1
# The image charts/draguard deploys: `draguard serve` as an unprivileged user on a read-only root.

# Build the wheels (draguard and every dependency) where compilers may live; the runtime stage
# only installs finished wheels, so it carries no build tools.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policies ./policies
COPY webhook ./webhook
COPY certs ./certs
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels draguard \
 && python -m compileall -q /usr/local/lib/python3.11/site-packages \
 && groupadd --gid 65532 draguard \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin draguard
# Numeric, so the kubelet can check runAsNonRoot without resolving names.
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["draguard"]
CMD ["serve", "--help"]
