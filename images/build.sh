#!/usr/bin/env bash
# Build one of hvdk8s' images from this checkout:
#   images/build.sh [train|agent] [cpu|cpu-trixie|gpu]
#   train cpu         Debian 12 (bookworm), Open MPI 4.1, Python 3.11, tensorflow-cpu 2.15,
#                     Horovod with MPI + Gloo (runs anywhere)
#   train cpu-trixie  the same on Debian 13 (trixie): Open MPI 5.0, Python 3.13,
#                     tensorflow-cpu 2.20 with tf-keras (TensorFlow 2.15 has no 3.13 wheel)
#   train gpu         the CUDA base (nvidia/cuda from a registry), TensorFlow GPU, NCCL
#   agent      the topology agent (docs/agent.md)
# Uses docker (when its daemon answers), buildah or podman, whichever is here. Where the
# base image cannot be pulled (no registry reachable), the Debian bases are made from the
# Debian mirror with mmdebstrap. The tag is the hvdk8s version, the flavour and a hash of
# the Dockerfile and exactly the files it copies; a tag that exists already is not built again.
# Progress goes to stderr; the last line (stdout) is the image reference.
#
# Environment: HVDK8S_REGISTRY (default localhost), HVDK8S_ENGINE (docker|buildah|podman),
# HVDK8S_DEBIAN_MIRROR (default http://deb.debian.org/debian), RUN_AS (train: root, the
# default, or mpiuser for the non-root variant, tagged -mpiuser).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[build] %s\n' "$*" >&2; }
die() { printf 'images/build.sh: %s\n' "$1" >&2; exit "${2:-1}"; }

what="${1:-train}"
flavour="${2:-}"
case "$what" in
  train) flavour="${flavour:-gpu}"
         case "$flavour" in cpu|cpu-trixie|gpu) ;;
           *) die "flavour must be cpu, cpu-trixie or gpu, not '$flavour'" 2 ;; esac ;;
  agent) [ -z "$flavour" ] || [ "$flavour" = cpu ] || die "the agent image has one flavour: use 'images/build.sh agent'" 2
         flavour="" ;;
  *) die "usage: images/build.sh [train|agent] [cpu|cpu-trixie|gpu]" 2 ;;
esac
[ $# -le 2 ] || die "usage: images/build.sh [train|agent] [cpu|cpu-trixie|gpu]" 2

# --- the engine ------------------------------------------------------------------------
engine="${HVDK8S_ENGINE:-}"
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
  elif command -v buildah >/dev/null; then engine=buildah
  elif command -v podman >/dev/null; then engine=podman
  else die "no container engine: install docker, buildah or podman (Debian: apt-get install buildah mmdebstrap)"
  fi
fi
case "$engine" in
  docker)  build=(docker build); exists() { docker image inspect "$1" >/dev/null 2>&1; } ;;
  # chroot isolation: no OCI runtime (crun/runc) needed, which some hosts cannot run.
  # Docker's image format: the OCI format has no SHELL, and the Dockerfile's RUN steps
  # rely on its `bash -euo pipefail`.
  buildah) build=(buildah bud --isolation chroot --network host --layers --format docker)
           exists() { buildah inspect --type image "$1" >/dev/null 2>&1; } ;;
  podman)  build=(podman build --isolation chroot --network host --layers --format docker)
           exists() { podman image exists "$1"; } ;;
  *) die "HVDK8S_ENGINE must be docker, buildah or podman, not '$engine'" 2 ;;
esac

image_size() {
  case "$engine" in
    docker) docker image inspect -f '{{.Size}}' "$1" ;;
    buildah) buildah images --noheading --format '{{.Size}}' "$1" ;;
    podman) podman image inspect -f '{{.Size}}' "$1" ;;
  esac
}

pull() {  # a base image from its registry; quiet, bounded: no registry may be reachable
  case "$engine" in
    docker) timeout 120 docker pull -q "$1" >/dev/null 2>&1 ;;
    buildah) timeout 120 buildah pull -q "$1" >/dev/null 2>&1 ;;
    podman) timeout 120 podman pull -q "$1" >/dev/null 2>&1 ;;
  esac
}

# --- the base ------------------------------------------------------------------------------
MIRROR="${HVDK8S_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
debian_base() {  # suite, name, extra packages: a Debian base from the mirror
  local suite="$1"; shift
  local ref="localhost/hvdk8s-base:$suite-$1" tar
  if exists "$ref"; then echo "$ref"; return; fi
  command -v mmdebstrap >/dev/null ||
    die "no registry answers and mmdebstrap is missing (apt-get install mmdebstrap)"
  log "making $ref from $MIRROR with mmdebstrap"
  tar="$(mktemp --suffix=.tar)"
  # shellcheck disable=SC2064
  trap "rm -f '$tar'" RETURN
  mmdebstrap --quiet --variant=minbase --include="ca-certificates${2:+,$2}" \
    "$suite" "$tar" "$MIRROR" >&2
  case "$engine" in
    docker) docker import -c 'CMD ["/bin/bash"]' "$tar" "$ref" >/dev/null ;;
    podman) podman import -c 'CMD ["/bin/bash"]' "$tar" "$ref" >/dev/null ;;
    buildah) local ctr
             ctr="$(buildah from scratch)"
             buildah add --quiet "$ctr" "$tar" / >/dev/null
             buildah config --cmd /bin/bash "$ctr"
             buildah commit --quiet "$ctr" "$ref" >/dev/null
             buildah rm "$ctr" >/dev/null ;;
  esac
  echo "$ref"
}

dockerfile="images/$what/Dockerfile"
build_args=()
case "$what/$flavour" in
  train/gpu) registry_base="nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"; mirror_base="" ;;
  train/cpu) registry_base="debian:12.10-slim"; mirror_base="minbase" ;;
  train/cpu-trixie)
             registry_base="debian:13.1-slim"; mirror_base="minbase"; suite=trixie
             # TensorFlow 2.15 has no wheel for Python 3.13; 2.20 has, with tf-keras as its
             # Keras 2, and Horovod 0.28.1 builds with GCC 12, not Debian 13's 14
             # (scripts/setup.sh makes the same choices on such a machine).
             build_args+=(--build-arg "TENSORFLOW_VERSION=2.20.0"
                          --build-arg "TF_COMPANIONS=" --build-arg "TF_KERAS_VERSION=2.20.1"
                          --build-arg "TF_USE_LEGACY_KERAS=1"
                          --build-arg "MPI4PY_VERSION=4.1.2"
                          --build-arg "HOROVOD_GCC=12") ;;
  agent/)    registry_base="python:3.11.9-slim-bookworm"; mirror_base="python" ;;
esac
base="$registry_base"
if ! exists "$base" && ! pull "$base"; then
  if [ -z "$mirror_base" ]; then
    die "cannot pull $base (the GPU flavour's base): run where a registry is reachable, or build 'train cpu'"
  fi
  log "cannot pull $base: making the base from the Debian mirror instead"
  case "$mirror_base" in
    minbase) base="$(debian_base "${suite:-bookworm}" minbase "")" ;;
    python)  base="$(debian_base bookworm python "python3-pip,python-is-python3")" ;;
  esac
fi
build_args+=(--build-arg "BASE_IMAGE=$base")
# Behind a TLS-intercepting proxy, pip in the build needs the CA bundle pip uses here
# (HVDK8S_BUILD_CA_BUNDLE, else PIP_CERT): mounted for the RUN steps only, never committed.
ca_bundle="${HVDK8S_BUILD_CA_BUNDLE:-${PIP_CERT:-}}"
mounts=()
if [ -n "$ca_bundle" ]; then
  [ -r "$ca_bundle" ] || die "CA bundle $ca_bundle is not readable (HVDK8S_BUILD_CA_BUNDLE)" 2
  [ "$engine" != docker ] || die "docker build cannot mount $ca_bundle for pip: unset PIP_CERT and HVDK8S_BUILD_CA_BUNDLE, or use buildah" 2
  pipconf="$(mktemp)"
  trap 'rm -f "$pipconf"' EXIT
  printf '[global]\ncert = /run/hvdk8s-build-ca.crt\n' > "$pipconf"
  mounts+=(--volume "$(readlink -f "$ca_bundle"):/run/hvdk8s-build-ca.crt:ro"
           --volume "$pipconf:/etc/pip.conf:ro")
fi
[ -z "$flavour" ] || build_args+=(--build-arg "FLAVOUR=${flavour%%-*}")
run_as="${RUN_AS:-root}"
if [ "$run_as" != root ]; then
  [ "$what" = train ] || die "RUN_AS is a build argument of the train image only" 2
  build_args+=(--build-arg "RUN_AS=$run_as")
fi

# --- the tag ---------------------------------------------------------------------------------
version="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
# Exactly what the image is made of (images/inputs.sh: the Dockerfile and what it copies), so
# an edit elsewhere (the README, the tests, kubesim/) builds nothing.
mapfile -t inputs < <(bash images/inputs.sh "$dockerfile")
hash="$({ printf '%s\n' "$base" "${build[*]}" "${build_args[@]}"
          find "${inputs[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |
            sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-12)"
suffix="${flavour:+-$flavour}"; [ "$run_as" = root ] || suffix="$suffix-$run_as"
ref="${HVDK8S_REGISTRY:-localhost}/hvdk8s-$what:$version$suffix-$hash"

if exists "$ref"; then
  log "$ref exists: not built again ($(image_size "$ref"))"
  echo "$ref"
  exit 0
fi
log "building $ref with $engine (base $base)"
start=$(date +%s)
"${build[@]}" -f "$dockerfile" -t "$ref" "${build_args[@]}" ${mounts[@]+"${mounts[@]}"} . >&2
log "built $ref in $(( $(date +%s) - start )) s; size $(image_size "$ref")"
echo "$ref"
