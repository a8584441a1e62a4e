FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# Non-root, no shell needed at run time; certificates and policy come from mounted volumes.
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8443
ENTRYPOINT ["dra-bridge"]
CMD ["serve"]
