#!/bin/sh
# hvdk8s launcher: wait until every worker's sshd answers, run the launch line given as
# arguments, then tell the workers to exit so none keeps its GPUs after the job.
set -u
PORT="${HVDK8S_SSH_PORT:-2222}"
HOSTFILE="${HVDK8S_HOSTFILE:-/etc/hvdk8s/hostfile}"
KEYS="${HVDK8S_SSH_DIR:-/etc/hvdk8s-ssh}"
WAIT_SECONDS="${HVDK8S_WORKER_WAIT_SECONDS:-600}"
CLEAN_POD_POLICY="${HVDK8S_CLEAN_POD_POLICY:-Running}"
RELEASE_ON_FAILURE="${HVDK8S_RELEASE_ON_FAILURE:-1}"
HOME="${HOME:-/root}"

mkdir -p "$HOME/.ssh" && chmod 700 "$HOME/.ssh"
cp "$KEYS/ssh-privatekey" "$HOME/.ssh/id_hvdk8s" && chmod 600 "$HOME/.ssh/id_hvdk8s"
# Worker host keys are made per pod: nothing to pin, so no prompt and no known_hosts.
cat > "$HOME/.ssh/config" <<CONF
Host *
  Port $PORT
  IdentityFile $HOME/.ssh/id_hvdk8s
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 5
  BatchMode yes
CONF

# "host slots=N" (OpenMPI) or "host:N" (Hydra).
hosts=$(sed -e 's/[: ].*//' -e '/^$/d' "$HOSTFILE")

release_workers() {
  [ "$CLEAN_POD_POLICY" = "None" ] && return 0
  for h in $hosts; do
    ssh "$h" "mkdir -p /tmp/hvdk8s && echo $1 > /tmp/hvdk8s/done" >/dev/null 2>&1 \
      || echo "hvdk8s: could not release worker $h (hvdk8s get/wait will remove it)" >&2
  done
}

# 0 waits without limit: a gang scheduler may keep the workers queued for a long time.
deadline=$(( $(date +%s) + WAIT_SECONDS ))
for h in $hosts; do
  until ssh "$h" true >/dev/null 2>&1; do
    if [ "$WAIT_SECONDS" -gt 0 ] && [ "$(date +%s)" -ge "$deadline" ]; then
      echo "hvdk8s: worker $h did not answer on ssh port $PORT within ${WAIT_SECONDS}s" >&2
      release_workers 1
      exit 1
    fi
    sleep 2
  done
  echo "hvdk8s: worker $h is ready"
done

echo "hvdk8s: starting: $*"
"$@"
status=$?
if [ "$status" -eq 0 ] || [ "$RELEASE_ON_FAILURE" = "1" ]; then
  release_workers "$status"
fi
exit "$status"
