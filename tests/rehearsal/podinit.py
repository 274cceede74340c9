"""PID 1 of a rehearsal pod, run inside its own network, UTS, IPC, mount and PID namespaces:
make the container's view (hostname, /etc with the kubelet's hosts and resolv.conf, a private
/tmp, /run, /dev/shm and /root, the pod's volumes bind-mounted), then exec the container's
command with the pod's environment, so the command itself is PID 1 as in a container.

Standalone on purpose (no project imports): it runs before anything is set up.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys

CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)

# Where a pod may create a missing mount point: places that are private to the pod.
PRIVATE = ("/etc/", "/root/", "/tmp/", "/run/")


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def main(plan_path):
    """Fork PID 1 of a new PID namespace and report how it ended as a runtime does (128+N
    for a signal); unshare(1) --fork would, but util-linux 2.38 exits 1 instead."""
    if libc.unshare(CLONE_NEWPID) != 0:
        sys.exit(f"podinit: unshare(CLONE_NEWPID): {os.strerror(ctypes.get_errno())}")
    pid = os.fork()
    if pid == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the harness gone: the pod goes too
        container(plan_path)
    _, status = os.waitpid(pid, 0)
    sys.exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def container(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    mount("-t", "proc", "proc", "/proc")
    subprocess.run(["hostname", plan["hostname"]], check=True)
    mount("-t", "overlay", "overlay", "-o",
          f"lowerdir=/etc,upperdir={plan['etc_upper']},workdir={plan['etc_work']}", "/etc")
    # The image's python on the system PATH, where sshd sessions (mpirun's orted) look.
    mount("-t", "overlay", "overlay", "-o", f"lowerdir=/usr/local/bin,upperdir="
          f"{plan['bin_upper']},workdir={plan['bin_work']}", "/usr/local/bin")
    # The image's own files under /tmp or /run (a checkout there) stay visible: held on a
    # staging mount while the pod gets its private tmpfs, then mounted back in place.
    staged = []
    for i, path in enumerate(plan.get("keep") or []):
        stage = os.path.join(plan["stage_dir"], str(i))
        os.makedirs(stage, exist_ok=True)
        mount("--rbind", path, stage)
        staged.append((stage, path))
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
    # A container's own /dev/shm (the runtime's 64 MiB one; a pod's dshm volume goes over
    # it), as it has its own IPC namespace (kubelet.py): pods share no memory.
    mount("-t", "tmpfs", "-o", "mode=1777,size=64m,nosuid,nodev,noexec", "shm", "/dev/shm")
    for stage, path in staged:
        os.makedirs(path, exist_ok=True)
        mount("--rbind", stage, path)
    # /root as the image has it (the venv's interpreter may live there), changes private;
    # no ~/.ssh of this machine: a container starts without one.
    mount("-t", "overlay", "overlay", "-o", f"lowerdir=/root,upperdir={plan['root_home']},"
          f"workdir={plan['root_work']}", "/root")
    if os.path.isdir("/root/.ssh"):
        mount("-t", "tmpfs", "-o", "mode=700", "tmpfs", "/root/.ssh")
    for m in plan["mounts"]:
        dst = m["path"]
        if not os.path.isdir(dst):
            if not dst.startswith(PRIVATE):
                sys.exit(f"podinit: mount point {dst} does not exist in the image")
            os.makedirs(dst)
        if m["kind"] == "tmpfs":
            mount("-t", "tmpfs", "tmpfs", dst)
        else:
            mount("--bind", m["source"], dst)
        if m.get("readOnly"):
            mount("-o", "remount,bind,ro", dst)
    os.chdir(plan.get("workingDir") or "/")
    argv = plan["argv"]
    os.execvpe(argv[0], argv, plan["env"])


if __name__ == "__main__":
    main(sys.argv[1])
