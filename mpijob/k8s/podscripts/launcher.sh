#!/bin/sh
# hvdk8s launcher: wait until every worker's sshd answers, run the launch line given as
# arguments, then tell the workers to exit so none keeps its GPUs after the job. Killed
# (SIGTERM: deletion, deadline, eviction) it stops the launch line and releases them too;
# killed outright (SIGKILL, OOM, node loss) the workers notice their lease ending and exit.
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
  ServerAliveInterval 10
  ServerAliveCountMax 3
CONF

# ssh reads ~/.ssh/config from the home of the user's passwd entry, not $HOME (OpenSSH
# ssh.c: pw->pw_dir). With --run-as-user, $HOME is the pod's own emptyDir and the image's
# entry for the uid may name another home: a wrapper first on PATH hands ssh this config,
# here and in mpirun's and Hydra's ssh alike.
mkdir -p "$HOME/.ssh/bin"
printf '#!/bin/sh\nexec %s -F %s "$@"\n' "$(command -v ssh)" "$HOME/.ssh/config" \
  > "$HOME/.ssh/bin/ssh" && chmod 755 "$HOME/.ssh/bin/ssh"
PATH="$HOME/.ssh/bin:$PATH"
export PATH

# "host slots=N" (OpenMPI) or "host:N" (Hydra).
hosts=$(sed -e 's/[: ].*//' -e '/^$/d' "$HOSTFILE")

release_workers() {
  [ "$CLEAN_POD_POLICY" = "None" ] && return 0
  for h in $hosts; do
    ssh "$h" "mkdir -p /tmp/hvdk8s && echo $1 > /tmp/hvdk8s/done" >/dev/null 2>&1 \
      || echo "hvdk8s: could not release worker $h (its lease ends it; hvdk8s tidy removes it now)" >&2
  done
}

# A lease per worker: an ssh session that lives as long as this launcher. When it ends
# without a release (this pod killed outright), the worker exits after a grace period.
leases=""
take_leases() {
  [ "$CLEAN_POD_POLICY" = "None" ] && return 0  # workers are kept: they must not leave
  for h in $hosts; do
    ssh -n "$h" "mkdir -p /tmp/hvdk8s && rm -f /tmp/hvdk8s/detached && touch /tmp/hvdk8s/attached && trap '' PIPE && while echo; do sleep 2; done; touch /tmp/hvdk8s/detached" >/dev/null 2>&1 &
    leases="$leases $!"
  done
  # Held before the launch starts: a launcher killed later always leaves a trace.
  for h in $hosts; do
    tries=0
    until ssh "$h" test -e /tmp/hvdk8s/attached >/dev/null 2>&1 || [ "$tries" -ge 15 ]; do
      tries=$((tries + 1))
      sleep 1
    done
  done
}
drop_leases() {
  [ -z "$leases" ] || kill $leases 2>/dev/null
  leases=""
}

child=""
on_term() {
  echo "hvdk8s: launcher terminated; stopping the launch line" >&2
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
    hvdk8s_launched 143
  fi
  [ "$RELEASE_ON_FAILURE" = "1" ] && release_workers 143
  drop_leases
  exit 143
}
trap on_term TERM INT

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

# --- Open MPI 5 (begin) ---
# Open MPI 5's mpirun is PRRTE's prterun, which reads its launch settings under PRRTE's names
# and ignores ORTE's without a word (measured with Debian 13's 5.0.7: OMPI_MCA_plm_rsh_args
# never reaches ssh; kubeflow/mpi-operator#842, kubeflow/trainer#4028). The image decides
# which Open MPI runs, so its mpirun is asked; a PRRTE name set already wins. Not carried:
# orte_keep_fqdn_hostnames: prterun sshes to the hostfile's names as written (measured), and
# prte_keep_fqdn_hostnames makes a pod's own short hostname a stranger to its entry
# (kubeflow/trainer#4028). Ranks sharing a pod: Open MPI 5 moved single copy (CMA, which
# needs CAP_SYS_PTRACE) from the shared-memory BTL's single_copy_mechanism to the smsc
# framework, where "none" is leaving out its cma component (ompi_info: MCA smsc: cma).
hvdk8s_openmpi5_env() {
  case "$(mpirun --version 2>/dev/null)" in
    *"(Open MPI) "[5-9].*|*"(Open MPI) "[1-9][0-9].*) ;;
    *) return 0 ;;
  esac
  for pair in plm_rsh_args:plm_ssh_args plm_rsh_agent:plm_ssh_agent \
      plm_rsh_no_tree_spawn:plm_ssh_no_tree_spawn \
      orte_default_hostfile:prte_default_hostfile orte_set_default_slots:prte_set_default_slots; do
    orte="OMPI_MCA_${pair%%:*}" prte="PRTE_MCA_${pair#*:}"
    if printenv "$orte" >/dev/null && ! printenv "$prte" >/dev/null; then
      eval "export $prte=\"\$$orte\""
    fi
  done
  nocma=""
  [ "${OMPI_MCA_btl_vader_single_copy_mechanism:-}" != none ] || nocma=1
  prev=""
  for arg in "$@"; do
    [ "$prev:$arg" != btl_vader_single_copy_mechanism:none ] || nocma=1
    prev="$arg"
  done
  if [ -n "$nocma" ] && ! printenv OMPI_MCA_smsc >/dev/null; then
    export OMPI_MCA_smsc=^cma
  fi
  echo "hvdk8s: Open MPI 5: launch settings under PRRTE's names" >&2
}
hvdk8s_openmpi5_env "$@"
# --- Open MPI 5 (end) ---
# --- result (begin) ---
# The launch line's output passes through a filter that keeps its last result lines (the
# benchmark's HVDK8S_RESULT JSON and `total images/sec`); when the line succeeded they go to
# the container's termination message: the kubelet copies that file (its last 4 KiB) into
# the pod's status.containerStatuses[].state.terminated.message, so listing the pods gives a
# finished job's rate without reading its log. Never on failure: there the message is the
# failure's (hvdk8s reads it as the reason). A JSON too long to fit is left out; the rate
# line is written last, so a cut keeps it.
# With python3 in the image the filter is the monitor (HVDK8S_MONITOR: hvdk8s_monitor.py),
# which also judges the ranks' progress for the readiness probe, --stall-timeout and the
# metrics; without it, awk keeps the result only. No awk, or no termination log: no filter.
hvdk8s_launch() {
  out="${HVDK8S_TERMINATION_LOG:-/dev/termination-log}"
  filter="" fifo=""
  if [ -n "${HVDK8S_MONITOR:-}" ]; then
    if python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' >/dev/null 2>&1 \
        && fifo="$(mktemp -d)/out"; then
      python3 "$HVDK8S_MONITOR" --result "$fifo.result" -- "$@" &
      child=$! filter=monitor
      return 0
    fi
    # Said once in the log, and by the readiness probe, which then fails: hvdk8s wait reads
    # the log instead.
    said="hvdk8s: no python3 (3.8 or later) in the image: the launch line runs without its monitor (no stall probe, --stall-timeout or metrics)"
    echo "$said" >&2
    dir="${HVDK8S_MONITOR_DIR:-}"
    [ -n "$dir" ] && mkdir -p "$dir" 2>/dev/null && echo "$said" > "$dir/unwatched"
  fi
  if ! command -v awk >/dev/null 2>&1 || ! { [ -w "$out" ] || [ -w "$(dirname "$out")" ]; } \
      || ! fifo="$(mktemp -d)/out" || ! mkfifo "$fifo"; then
    "$@" &
    child=$!
    return 0
  fi
  awk -v kept="$fifo.result" '
    { print; fflush() }
    (at = index($0, "HVDK8S_RESULT ")) > 0 { json = substr($0, at) }
    (at = index($0, "total images/sec:")) > 0 { rate = substr($0, at) }
    END {
      if (length(json) + length(rate) > 4000) json = ""
      if (json != "") print json > kept
      if (rate != "") print rate > kept
    }' < "$fifo" &
  filter=$!
  "$@" > "$fifo" &
  child=$!
}
# With the launch line's exit status: the kept result into the termination message on 0.
hvdk8s_launched() {
  [ -n "$filter" ] || return 0
  [ "$filter" = monitor ] || wait "$filter" 2>/dev/null
  if [ "$1" -eq 0 ] && [ -s "$fifo.result" ]; then
    cat "$fifo.result" > "$out" 2>/dev/null
  fi
  rm -rf "${fifo%/out}"
  filter=""
}
# --- result (end) ---
take_leases
echo "hvdk8s: starting: $*"
# In the background so that SIGTERM runs on_term at once (sh defers traps until a
# foreground command ends).
hvdk8s_launch "$@"
wait "$child"
status=$?
child=""
hvdk8s_launched "$status"
if [ "$status" -eq 0 ] || [ "$RELEASE_ON_FAILURE" = "1" ]; then
  release_workers "$status"
fi
drop_leases
exit "$status"
