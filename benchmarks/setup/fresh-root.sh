#!/usr/bin/env bash
# The README's two commands on a fresh distribution root, as a new user would run them:
#   mmdebstrap --variant=minbase --include=ca-certificates,git,python3,python3-venv,python3-pip,sudo SUITE ROOT
# this checkout's HEAD cloned into ROOT/root/hvdk8s, then, in a private mount namespace
# (unshare -m: /proc, /dev, /sys mounted for the chroot only), chroot ROOT and run
#   bash scripts/quickstart.sh   (must end with `total images/sec: N`)
#   bash scripts/test.sh         (must pass; long)
# with an environment as empty as a login's. Writes the result, with the date, each step's
# duration and the machine, to benchmarks/setup/RESULT-SUITE.md and the full logs next to
# ROOT. Not in CI: the setup alone builds Horovod twice (about 30-60 min on 2 busy cores).
#
# Usage (root): bash benchmarks/setup/fresh-root.sh [--suite SUITE] [--workdir DIR]
#                                                    [--quickstart-only]
# SUITE: a Debian suite (trixie, bookworm) or an Ubuntu one (noble, jammy). Ubuntu's roots come
# from archive.ubuntu.com, checked with /usr/share/keyrings/ubuntu-archive-keyring.gpg (Debian's
# `ubuntu-keyring` package, or the same file from Ubuntu's own; its 2018 archive key is
# F6EC B376 2474 EDA9 D21B 7022 8719 20D1 991B C93C), with `universe`, where Ubuntu keeps MPI.
# The host's CA bundle and resolv.conf are copied in, so that apt and pip work behind the same
# network as the host (a TLS-intercepting proxy's CA included: pip is pointed at it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
suite=trixie
workdir=""
quickstart_only=0
usage() { printf 'usage: bash benchmarks/setup/fresh-root.sh [--suite SUITE] [--workdir DIR] [--quickstart-only]\n' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) [ $# -ge 2 ] || usage; suite="$2"; shift 2 ;;
    --workdir) [ $# -ge 2 ] || usage; workdir="$2"; shift 2 ;;
    --quickstart-only) quickstart_only=1; shift ;;
    *) usage ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-root.sh: needs root (mmdebstrap, unshare -m, chroot)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "fresh-root.sh: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
ubuntu_keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg
case "$suite" in
  noble|jammy)
    [ -r "$ubuntu_keyring" ] || { echo "fresh-root.sh: an Ubuntu root needs $ubuntu_keyring (Debian's ubuntu-keyring package)" >&2; exit 2; }
    distribution=Ubuntu
    # mmdebstrap's minbase leaves Ubuntu's apt out (it is not Essential there); every Ubuntu
    # machine has it, so it is asked for.
    archive_options=(--keyring="$ubuntu_keyring" --components=main,universe --include=apt)
    mirror=(http://archive.ubuntu.com/ubuntu) ;;
  *) distribution=Debian; archive_options=(); mirror=() ;;
esac
workdir="${workdir:-$(mktemp -d /var/tmp/hvdk8s-fresh-XXXXXX)}"
root="$workdir/root"
[ ! -e "$root" ] || { echo "fresh-root.sh: $root exists; give another --workdir" >&2; exit 2; }
mkdir -p "$workdir"
log() { printf '[fresh-root] %s\n' "$*" >&2; }
result="$here/RESULT-$suite.md"
commit="$(git -C "$repo" rev-parse --short HEAD)"
dirty=""
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
  dirty=" (uncommitted changes in the checkout are not in the clone)"

steps=()
step() {  # name, log file, command...: run it, time it, record the outcome
  local name="$1" out="$2"; shift 2
  local start rc
  start=$(date +%s)
  log "$name: $* (log: $out)"
  set +e
  "$@" > "$out" 2>&1
  rc=$?
  set -e
  steps+=("| $name | $rc | $(( $(date +%s) - start )) s | \`$(tail -n 1 "$out" | cut -c1-100 | tr '|`' '/ ')\` |")
  log "$name: exit $rc in $(( $(date +%s) - start )) s"
  return "$rc"
}

# Inside the root: a fresh login's environment, nothing of this shell's (no venv, no pip
# settings pointing at host paths), except the CA bundle for pip behind a proxy.
in_root() {
  unshare -m -- /bin/sh -ec '
    root="$1"; shift
    mount --make-rprivate /
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
      /bin/bash -c "cd /root/hvdk8s && $*"
  ' in_root "$root" "$@"
}

started="$(date -u '+%Y-%m-%d %H:%M UTC')"
rc_all=0
step "mmdebstrap $suite" "$workdir/mmdebstrap.log" \
  mmdebstrap --variant=minbase --include=ca-certificates,git,python3,python3-venv,python3-pip,sudo \
  "${archive_options[@]}" "$suite" "$root" "${mirror[@]}" || rc_all=1
if [ "$rc_all" -eq 0 ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  cp --remove-destination /etc/resolv.conf "$root/etc/resolv.conf"
  git clone -q "$repo" "$root/root/hvdk8s"
  step "bash scripts/quickstart.sh" "$workdir/quickstart.log" in_root "bash scripts/quickstart.sh" || rc_all=1
  total="$(grep -o 'total images/sec: [0-9.]*' "$workdir/quickstart.log" | tail -n 1 || true)"
  if [ "$quickstart_only" -eq 0 ]; then
    step "bash scripts/test.sh" "$workdir/test.log" in_root "bash scripts/test.sh" || rc_all=1
  fi
fi
versions="$(in_root '. /etc/os-release; echo "$PRETTY_NAME"; python3 --version; mpirun --version | head -n 1; .venv/bin/python -c "import tensorflow as t, horovod as h; print(\"tensorflow\", t.__version__, \"horovod\", h.__version__)" 2>/dev/null' 2>&1 | tr '\n' ';' || true)"

# The runs before this one are kept under "Earlier runs", the last first.
earlier=""
if [ -f "$result" ]; then
  earlier="$(mktemp)"
  { sed -n '/^## Earlier runs$/,$p' "$result" | tail -n +3 > "$earlier.tail"
    sed '/^## Earlier runs$/,$d' "$result" | sed '1s/^# .*$/### An earlier run/'
    cat "$earlier.tail"; rm -f "$earlier.tail"; } > "$earlier"
fi
{
  printf '# The README'"'"'s two commands in a fresh %s root (%s)\n\n' "$distribution" "$suite"
  printf 'Recorded by `benchmarks/setup/fresh-root.sh --suite %s`; the last run:\n\n' "$suite"
  printf -- '- started: %s; commit %s%s\n' "$started" "$commit" "$dirty"
  printf -- '- machine: %s, %s CPUs (load average %s at the end), %s GiB memory\n' \
    "$(. /etc/os-release; echo "$PRETTY_NAME") host, kernel $(uname -r)" "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(awk '/MemTotal/ {printf "%d", $2/1048576}' /proc/meminfo)"
  printf -- '- in the root: %s\n' "${versions:-?}"
  printf -- '- quickstart result: %s\n\n' "${total:-none}"
  printf '| step | exit | duration | last line |\n|---|---|---|---|\n'
  printf '%s\n' "${steps[@]}"
  printf '\nLogs: %s\n' "$workdir"
  if [ -n "$earlier" ]; then
    printf '\n## Earlier runs\n\n'
    cat "$earlier"
  fi
} > "$result.new"
mv "$result.new" "$result"
[ -z "$earlier" ] || rm -f "$earlier"
log "result in $result"
cat "$result" >&2
exit "$rc_all"
