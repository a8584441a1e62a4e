# The base image by digest (python:3.11-slim) and every Python package by hash: requirements.lock
# (what runs) and requirements-build.lock (hatchling, which builds our wheel), both from
# `make lock`. A rebuild installs exactly what was reviewed. Refresh the digest with
# `docker buildx imagetools inspect python:3.11-slim` when the locks are refreshed.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY requirements.lock requirements-build.lock ./
# A package mirror behind a TLS proxy: its CA comes as a build secret (image/build.sh, PIP_CA),
# read by pip while installing and kept in no layer.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: -r requirements-build.lock \
 && python -m venv /opt/dra-bridge \
 && /opt/dra-bridge/bin/pip install --no-cache-dir --require-hashes --no-deps --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md ./
COPY app ./app
RUN /opt/build/bin/pip wheel --no-cache-dir --no-deps --no-build-isolation -w /tmp/wheel . \
 && /opt/dra-bridge/bin/pip install --no-cache-dir --no-deps /tmp/wheel/*.whl \
 && /opt/dra-bridge/bin/pip uninstall -y -q pip

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/dra-bridge /opt/dra-bridge
ENV PATH=/opt/dra-bridge/bin:$PATH
# Non-root; certificates and policy come from mounted volumes (without them, `serve` says which
# flags to pass: this folder is not writable).
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8443
ENTRYPOINT ["dra-bridge"]
CMD ["serve"]
