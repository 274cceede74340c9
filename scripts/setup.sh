#!/usr/bin/env bash
# Set up hvdk8s on a fresh Debian 12/13 or Ubuntu 22.04/24.04 machine with its own python3
# (3.10-3.13): OpenMPI, a virtual environment in .venv, the CLI with its dev/bench extras,
# TensorFlow and Horovod built from source against them. Idempotent: every step is skipped
# when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HVDK8S_VENV:-.venv}"
HOROVOD_VERSION=0.28.1
log() { printf '[setup] %s\n' "$*" >&2; }

need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
# CMake's Makefile generator, for Horovod (a minimal Debian has no make).
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
# The pod rehearsal (tests/rehearsal): real sshd, dnsmasq as cluster DNS, MPICH's Hydra.
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
[ -x /usr/sbin/dnsmasq ] || need_apt+=(dnsmasq-base)
command -v mpiexec.hydra >/dev/null 2>&1 || need_apt+=(mpich)
# MPICH's headers, for the Horovod of the rehearsal's MPICH image (below).
dpkg -s libmpich-dev >/dev/null 2>&1 || need_apt+=(libmpich-dev)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# Python.h, for Horovod's extension (Debian 13's minimal python3 lacks it).
python3 -c 'import os, sysconfig; os.stat(sysconfig.get_paths()["include"] + "/Python.h")' \
  >/dev/null 2>&1 || need_apt+=(python3-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  log "installing system packages: ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# Horovod 0.28.1 (2023) predates GCC 13 and 14's stricter headers: under Debian 13's GCC 14
# its common.h lacks <stdexcept> ("'logic_error' is not a member of 'std'") and its bundled
# flatbuffers assigns a const member. Where the default g++ is newer than 12, Horovod is built
# with g++-12 (Debian 13 and Ubuntu 24.04 have it), as on Debian 12.
HOROVOD_GCC=""
if [ "$(g++ -dumpversion | cut -d. -f1)" -gt 12 ]; then
  HOROVOD_GCC=12
  if ! command -v g++-12 >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    log "installing g++-12 (for Horovod)"
    [ ${#need_apt[@]} -gt 0 ] || $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends g++-12 >/dev/null
  fi
fi
horovod_cc=()
[ -z "$HOROVOD_GCC" ] || horovod_cc=(CC="gcc-$HOROVOD_GCC" CXX="g++-$HOROVOD_GCC")

# mpich registers mpirun/mpicc alternatives too: OpenMPI must stay the default (Horovod is
# built with mpicc and runs under mpirun).
if [ -x /usr/bin/mpirun.openmpi ] && [ "$(readlink -f /usr/bin/mpirun)" != /usr/bin/mpirun.openmpi ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO update-alternatives --quiet --set mpirun /usr/bin/mpirun.openmpi
  $SUDO update-alternatives --quiet --set mpi /usr/bin/mpicc.openmpi
fi

[ -x "$VENV/bin/python" ] || { log "creating $VENV"; python3 -m venv "$VENV"; }
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip wheel setuptools >/dev/null

# The TensorFlow for this Python: 2.15.1 (Keras 2) has wheels for Python 3.9-3.11 only, so
# Debian 13 (3.13) and Ubuntu 24.04 (3.12) get 2.20.0, the first with 3.13 wheels, and
# tf-keras, the Keras 2 that Horovod 0.28.1 works with (its Keras 3 paths fail:
# horovod/horovod#4290); the benchmark selects it (TF_USE_LEGACY_KERAS), so both run the
# same Keras 2 model. images/build.sh's cpu-trixie flavour pins the same pair.
py_version="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
TF_KERAS_VERSION=""
case "$py_version" in
  3.10|3.11) TF_VERSION=2.15.1; tf_companions=("numpy<2") ;;
  3.12|3.13) TF_VERSION=2.20.0; TF_KERAS_VERSION=2.20.1; tf_companions=() ;;
  *) printf 'scripts/setup.sh: Python %s in %s: TensorFlow and Horovod are set up for Python 3.10-3.13; make %s with one of those (rm -rf %s; python3.N -m venv %s)\n' \
       "$py_version" "$VENV" "$VENV" "$VENV" "$VENV" >&2
     exit 2 ;;
esac

stamp="$VENV/.hvdk8s-deps-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  log "installing hvdk8s and its dev/bench extras"
  "$PY" -m pip install -q -e '.[dev,bench]' ${tf_companions[@]+"${tf_companions[@]}"}
  touch "$stamp"
fi

if ! "$PY" -c 'import tensorflow' >/dev/null 2>&1; then
  log "installing tensorflow-cpu==$TF_VERSION and mpi4py"
  "$PY" -m pip install -q "tensorflow-cpu==$TF_VERSION" ${tf_companions[@]+"${tf_companions[@]}"} \
    "mpi4py>=3.1,<5"
fi
# Without its dependencies: tf-keras requires `tensorflow`, which pip would install over
# tensorflow-cpu's files.
if [ -n "$TF_KERAS_VERSION" ] && ! "$PY" -c 'import tf_keras' >/dev/null 2>&1; then
  log "installing tf-keras==$TF_KERAS_VERSION"
  "$PY" -m pip install -q --no-deps "tf-keras==$TF_KERAS_VERSION"
fi

# TensorFlow 2.18+ moved XLA's xla_builder.h from xla/client/ to xla/hlo/builder/, and Horovod
# 0.28.1's xla_mpi_ops.cc includes the old path: where only the new one exists, a forwarding
# header on the compiler's include path, for the Horovod builds below (as images/train does).
tfinc="$("$PY" -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("tensorflow").origin))')/include/tensorflow/compiler/xla"
if [ ! -e "$tfinc/client/xla_builder.h" ] && [ -e "$tfinc/hlo/builder/xla_builder.h" ]; then
  shim="$(cd "$VENV" && pwd)/horovod-xla-shim"
  mkdir -p "$shim/tensorflow/compiler/xla/client"
  echo '#include "tensorflow/compiler/xla/hlo/builder/xla_builder.h"' \
    > "$shim/tensorflow/compiler/xla/client/xla_builder.h"
  export CPLUS_INCLUDE_PATH="$shim${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
fi

if ! "$PY" -c 'import horovod.tensorflow' >/dev/null 2>&1; then
  log "building horovod==$HOROVOD_VERSION (about 3 minutes)"
  # Debian's cmake 3.25 builds Horovod's bundled gloo; pip's cmake 4 does not.
  "$PY" -m pip uninstall -q -y cmake >/dev/null 2>&1 || true
  env ${horovod_cc[@]+"${horovod_cc[@]}"} \
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=MPI \
  CMAKE_POLICY_VERSION_MINIMUM=3.5 MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip install -q --no-build-isolation --no-cache-dir "horovod==$HOROVOD_VERSION"
fi

# The MPICH flavour of the image, for the pod rehearsal's `--mpi mpich` benchmark: a venv
# whose bin has MPICH's mpirun (Hydra), proxy and compilers, and whose site-packages has a
# Horovod built against MPICH, ahead of the main venv's packages (TensorFlow, hvdk8s).
# Under the main venv so that whatever carries the venv carries it.
# Absolute: pip builds in a directory of its own, where a relative PATH entry finds nothing
# and CMake falls back to the default (OpenMPI) compilers.
MPICH_IMAGE="$(cd "$VENV" && pwd)/image-mpich"
mpich_horovod_ok() {
  "$MPICH_IMAGE/bin/python" -c 'import horovod.tensorflow' >/dev/null 2>&1 &&
    ldd "$MPICH_IMAGE"/lib/python3*/site-packages/horovod/tensorflow/mpi_lib*.so 2>/dev/null | grep libmpich >/dev/null
}
if ! mpich_horovod_ok; then
  log "building horovod==$HOROVOD_VERSION against MPICH in $MPICH_IMAGE (about 1 minute)"
  rm -rf "$MPICH_IMAGE"
  "$PY" -m venv --without-pip "$MPICH_IMAGE"
  ln -s /usr/bin/mpiexec.hydra "$MPICH_IMAGE/bin/mpirun"
  ln -s /usr/bin/mpiexec.hydra "$MPICH_IMAGE/bin/mpiexec"
  # Hydra starts its proxy from its own directory on every host.
  ln -s /usr/bin/hydra_pmi_proxy "$MPICH_IMAGE/bin/hydra_pmi_proxy"
  ln -s /usr/bin/mpicc.mpich "$MPICH_IMAGE/bin/mpicc"
  ln -s /usr/bin/mpicxx.mpich "$MPICH_IMAGE/bin/mpicxx"
  site="$("$MPICH_IMAGE/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')"
  main_site="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')"
  echo "import site; site.addsitedir('$(readlink -f "$main_site")')" > "$site/zz-image-base.pth"
  env ${horovod_cc[@]+"${horovod_cc[@]}"} PATH="$MPICH_IMAGE/bin:$PATH" \
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=MPI \
  CMAKE_POLICY_VERSION_MINIMUM=3.5 MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip install -q --no-build-isolation --no-cache-dir --no-deps --target "$site" \
      "horovod==$HOROVOD_VERSION"
  # A Horovod linked against OpenMPI runs every Hydra rank as a world of one.
  mpich_horovod_ok || { log "error: the Horovod in $MPICH_IMAGE does not link libmpich"; exit 1; }
fi
log "ready: $VENV/bin/hvdk8s"
