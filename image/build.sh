#!/usr/bin/env bash
# Builds the dra-bridge image from the Dockerfile: `make image`.
#
#   IMAGE         the tag to build (default dra-bridge:dev)
#   PYTHON_IMAGE  the base (default: the Dockerfile's digest-pinned python:3.11-slim);
#                 "debian" builds a Python 3.11 base from Debian bookworm's packages first
#                 (debootstrap, root), for machines that cannot pull from a registry
#   PIP_CA        a CA bundle pip must trust (a package mirror behind a TLS proxy); a build
#                 secret, never stored in a layer. Default: $PIP_CERT where it is set
#   PLATFORM      e.g. linux/arm64 (needs an engine that builds for it: buildx, or qemu)
#   ENGINE        docker | podman | buildah (default: docker where a daemon answers, else
#                 podman, else buildah)
set -euo pipefail
cd "$(dirname "$0")/.."

image=${IMAGE:-dra-bridge:dev}
base=${PYTHON_IMAGE:-}
ca=${PIP_CA:-${PIP_CERT:-}}

engine=${ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
  elif command -v podman >/dev/null; then engine=podman
  elif command -v buildah >/dev/null; then engine=buildah
  else
    echo "make image: no container engine: install docker, or podman / buildah (apt-get install podman)" >&2
    exit 2
  fi
fi
# Debian's podman and buildah on these machines: runc, host networking for pip, and explicit
# limits no higher than this shell's (runc cannot raise a hard limit).
files=$(ulimit -Hn)
case "$engine" in
  podman) build=(podman build --runtime runc --network host --ulimit "nofile=$files:$files" --ulimit nproc=4096:4096) ;;
  buildah) build=(buildah build --runtime runc --network host --ulimit "nofile=$files:$files" --ulimit nproc=4096:4096) ;;
  docker) build=(docker build) ;;
  *) echo "make image: ENGINE must be docker, podman or buildah, not $engine" >&2; exit 2 ;;
esac
importer=("$engine" import)
[ "$engine" = buildah ] && importer=(podman import)

if [ "$base" = debian ]; then
  base=localhost/dra-bridge-python:3.11-bookworm
  if ! "$engine" image inspect "$base" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "make image: PYTHON_IMAGE=debian needs debootstrap" >&2; exit 2; }
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    echo "building $base from Debian bookworm's packages (debootstrap)"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "${importer[@]}" - "$base" >/dev/null
  fi
fi

args=(-t "$image" -f Dockerfile)
[ -n "$base" ] && args+=(--build-arg "PYTHON_IMAGE=$base")
[ -n "${PLATFORM:-}" ] && args+=(--platform "$PLATFORM")
[ -n "$ca" ] && args+=(--secret "id=pip-ca,src=$ca")
"${build[@]}" "${args[@]}" .
echo "built $image with $engine${base:+ on $base}"
