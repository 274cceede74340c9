#!/bin/sh
# hvdk8s worker: serve sshd for the launcher's mpirun and exit 0 when the launcher says the
# job is over, so the pod ends Succeeded and its GPUs go back to the cluster at once
# (cleanPodPolicy Running without an operator). Works as root or as any user with sshd.
set -eu
PORT="${HVDK8S_SSH_PORT:-2222}"
RUN="${HVDK8S_RUN_DIR:-/tmp/hvdk8s}"
KEYS="${HVDK8S_SSH_DIR:-/etc/hvdk8s-ssh}"
SSHD="${HVDK8S_SSHD:-$(command -v sshd 2>/dev/null || echo /usr/sbin/sshd)}"
# How long a worker waits after its launcher's lease ended without a release (a retried
# launcher takes the lease again within the Job's backoff).
GRACE="${HVDK8S_LAUNCHER_GRACE_SECONDS:-120}"
HOME="${HOME:-/root}"

mkdir -p "$RUN" "$HOME/.ssh"
# Secret files are read-only and may be owned by another user: sshd wants our own copies.
cp "$KEYS/ssh-publickey" "$HOME/.ssh/authorized_keys"
chmod 700 "$HOME/.ssh" && chmod 600 "$HOME/.ssh/authorized_keys"
[ -f "$RUN/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$RUN/host_key"
[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
cat > "$RUN/sshd_config" <<CONF
Port $PORT
HostKey $RUN/host_key
PidFile $RUN/sshd.pid
AuthorizedKeysFile $HOME/.ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
ClientAliveInterval 10
ClientAliveCountMax 3
AllowTcpForwarding no
AllowStreamLocalForwarding no
AllowAgentForwarding no
PermitTunnel no
X11Forwarding no
CONF

"$SSHD" -D -e -f "$RUN/sshd_config" &
sshd_pid=$!
trap 'kill "$sshd_pid" 2>/dev/null; exit 0' TERM INT
orphaned=0
while kill -0 "$sshd_pid" 2>/dev/null; do
  if [ -e "$RUN/done" ]; then
    echo "hvdk8s: launcher finished (exit $(cat "$RUN/done")); releasing this worker"
    kill "$sshd_pid" 2>/dev/null || true
    exit 0
  fi
  if [ -e "$RUN/detached" ]; then
    orphaned=$((orphaned + 1))
    if [ "$orphaned" -ge "$GRACE" ]; then
      echo "hvdk8s: the launcher is gone without releasing this worker (${GRACE}s); exiting" >&2
      kill "$sshd_pid" 2>/dev/null || true
      exit 1
    fi
  else
    orphaned=0
  fi
  sleep 1
done
wait "$sshd_pid"
status=$?
echo "hvdk8s: sshd exited with status $status" >&2
exit "$status"
