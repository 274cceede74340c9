#!/bin/sh
# hvdk8s elastic launcher: wait until at least the minimum of workers is Ready, run
# launcher.sh (ssh setup, leases, the launch line, the release) over the workers Ready at
# the start, and then release the workers that joined later too, so none keeps its GPUs.
set -u
DIR="$(dirname "$0")"
MIN="${HVDK8S_MIN_WORKERS:-1}"
hosts() { /bin/sh "$DIR/discover_hosts.sh" | sed -e 's/:.*//'; }

until [ "$(hosts | wc -l)" -ge "$MIN" ]; do
  sleep 2
done
echo "hvdk8s: elastic: $(hosts | wc -l) worker(s) ready (minimum $MIN)"
start_hosts=$(mktemp)
hosts > "$start_hosts"

HVDK8S_HOSTFILE="$start_hosts" /bin/sh "${HVDK8S_LAUNCHER_SCRIPT:-/etc/hvdk8s/launcher.sh}" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
status=$?
if [ "${HVDK8S_CLEAN_POD_POLICY:-Running}" != "None" ]; then
  for h in $(hosts); do
    grep -qx "$h" "$start_hosts" && continue  # launcher.sh released those
    ssh -F "$HOME/.ssh/config" "$h" "mkdir -p /tmp/hvdk8s && echo $status > /tmp/hvdk8s/done" \
      >/dev/null 2>&1 || echo "hvdk8s: could not release worker $h" >&2
  done
fi
exit "$status"
