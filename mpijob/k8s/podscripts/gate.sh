#!/bin/sh
# hvdk8s start gate: exit 0 once every worker's sshd answers. Until then the job's worker
# pods are owned by this pod, and its Job's activeDeadlineSeconds deletes it (and the
# garbage collector the workers with it) when they do not all start in time.
set -u
PORT="${HVDK8S_SSH_PORT:-2222}"
HOSTFILE="${HVDK8S_HOSTFILE:-/etc/hvdk8s/hostfile}"
KEYS="${HVDK8S_SSH_DIR:-/etc/hvdk8s-ssh}"
dir=$(mktemp -d) && cp "$KEYS/ssh-privatekey" "$dir/id" && chmod 600 "$dir/id"
# "host slots=N" (OpenMPI) or "host:N" (Hydra); an elastic job names its minimum instead.
for h in ${HVDK8S_GATE_HOSTS:-$(sed -e 's/[: ].*//' -e '/^$/d' "$HOSTFILE")}; do
  until ssh -F /dev/null -i "$dir/id" -p "$PORT" -o BatchMode=yes -o LogLevel=ERROR \
      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 \
      "$h" true </dev/null >/dev/null 2>&1; do
    sleep 2
  done
  echo "hvdk8s: worker $h started"
done
echo "hvdk8s: every worker started; the start gate opens (--start-timeout no longer applies)"
