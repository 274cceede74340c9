#!/usr/bin/env bash
# Build hvdk8s' CPU training image (root and RUN_AS=mpiuser variants) and the agent image
# with images/build.sh, for the image tests (tests/rehearsal/test_image.py); with
# HVDK8S_REHEARSE_TRIXIE=1 also the Debian 13 flavour (cpu-trixie: Open MPI 5, Python 3.13),
# which the image tests then rehearse too (as long again to build: opt-in). Installs
# buildah and mmdebstrap where missing (CI's machine is fresh). The images live in the
# engine's own storage (/var/lib/containers), never in the checkout; a second run finds
# their tags and takes seconds. Where building is impossible here (not root), it says so
# and exits 0: the image tests then skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[build-images] %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "not root: no images built (buildah's chroot isolation and the rehearsal need root)"
  exit 0
fi
need=()
command -v buildah >/dev/null || need+=(buildah)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
start=$(date +%s)
bash images/build.sh train cpu
RUN_AS=mpiuser bash images/build.sh train cpu
bash images/build.sh agent
if [ "${HVDK8S_REHEARSE_TRIXIE:-}" = 1 ]; then
  bash images/build.sh train cpu-trixie
  RUN_AS=mpiuser bash images/build.sh train cpu-trixie
fi
log "images ready in $(( $(date +%s) - start )) s"
