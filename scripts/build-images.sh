#!/usr/bin/env bash
# Build hvdk8s' CPU training image (root and RUN_AS=mpiuser variants) and the agent image
# with images/build.sh, for the image tests (tests/rehearsal/test_image.py). Installs
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
log "images ready in $(( $(date +%s) - start )) s"
