"""PID 1 of a rehearsal pod, run inside its own network, UTS, IPC, mount and PID namespaces:
make the container's view (hostname, /etc with the kubelet's hosts and resolv.conf, a private
/tmp, /run, /dev/shm and /root, the pod's volumes bind-mounted), then exec the container's
command with the pod's environment, so the command itself is PID 1 as in a container.

With an image (the plan's `image_root`), the container's root is a private overlay of the
image's root filesystem with /proc, /sys, a /dev as runc makes it, the kubelet's hosts,
resolv.conf and hostname files and the pod's volumes on top; podinit pivots into it
(pivot_root(2), as runc does) and drops to the plan's identity (tests/rehearsal/image.py)
before the exec.

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
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
SYS_PIVOT_ROOT = 155  # x86_64
MNT_DETACH = 2
CAP_LAST_CAP = 40
# linux/capability.h numbers of the capabilities a plan may keep.
CAPABILITY_NUMBERS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
    "CAP_FSETID": 4, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
    "CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14,
    "CAP_SYS_CHROOT": 18, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_NICE": 23,
    "CAP_SYS_RESOURCE": 24, "CAP_MKNOD": 27, "CAP_AUDIT_WRITE": 29, "CAP_SETFCAP": 31}
# The device nodes runc bind-mounts or creates in a container's /dev (libcontainer/
# specconv DefaultDevices, plus /dev/tty).
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
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


def _libc_check(ret, what):
    if ret != 0:
        sys.exit(f"podinit: {what}: {os.strerror(ctypes.get_errno())}")


def _mount_volumes(plan, root):
    for m in plan["mounts"]:
        dst = root + m["path"]
        # The runtime creates a missing mount point in the container's root (runc mkdirall).
        os.makedirs(dst, exist_ok=True)
        if m["kind"] == "tmpfs":
            size = f",size={m['size']}" if m.get("size") else ""
            mount("-t", "tmpfs", "-o", f"mode=1777{size}", "tmpfs", dst)
        else:
            mount("--bind", m["source"], dst)
        if m.get("readOnly"):
            mount("-o", "remount,bind,ro", dst)


def container_in_image(plan):
    root = plan["rootfs"]
    mount("-t", "overlay", "overlay", "-o", f"lowerdir={plan['image_root']},upperdir="
          f"{plan['rootfs_upper']},workdir={plan['rootfs_work']}", root)
    mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", root + "/proc")
    mount("-t", "sysfs", "-o", "ro,nosuid,nodev,noexec", "sysfs", root + "/sys")
    mount("-t", "tmpfs", "-o", "mode=755,size=65536k,nosuid", "tmpfs", root + "/dev")
    for dev in DEVICES:
        open(f"{root}/dev/{dev}", "w").close()
        mount("--bind", f"/dev/{dev}", f"{root}/dev/{dev}")
    os.makedirs(root + "/dev/pts")
    mount("-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620,nosuid,noexec",
          "devpts", root + "/dev/pts")
    os.symlink("pts/ptmx", root + "/dev/ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    # The runtime's own 64 MiB /dev/shm; a pod's dshm volume goes over it.
    os.makedirs(root + "/dev/shm")
    mount("-t", "tmpfs", "-o", "mode=1777,size=64m,nosuid,nodev,noexec", "shm", root + "/dev/shm")
    subprocess.run(["hostname", plan["hostname"]], check=True)
    # The kubelet's files, bind-mounted over the image's (kuberuntime makeMounts).
    for name, source in plan["etc_files"].items():
        target = f"{root}/etc/{name}"
        if not os.path.exists(target):
            open(target, "w").close()
        mount("--bind", source, target)
    _mount_volumes(plan, root)
    # pivot_root into the image, as runc does, and let go of this machine's root.
    os.chdir(root)
    os.makedirs(".hvdk8s-oldroot", exist_ok=True)
    _libc_check(libc.syscall(SYS_PIVOT_ROOT, b".", b".hvdk8s-oldroot"), "pivot_root")
    os.chdir("/")
    _libc_check(libc.umount2(b"/.hvdk8s-oldroot", MNT_DETACH), "umount the old root")
    os.rmdir("/.hvdk8s-oldroot")
    who = plan["identity"]
    keep = {CAPABILITY_NUMBERS[c] for c in who["capabilities"] if c in CAPABILITY_NUMBERS}
    for cap in range(CAP_LAST_CAP + 1):
        if cap not in keep:  # EINVAL: a number this kernel does not have
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if who["no_new_privs"]:
        _libc_check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.setgroups(who["groups"])
    os.setgid(who["gid"])
    os.setuid(who["uid"])
    os.chdir(plan.get("workingDir") or "/")
    argv = plan["argv"]
    os.execvpe(argv[0], argv, plan["env"])


def container(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    if plan.get("image_root"):
        container_in_image(plan)
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
            mount("-t", "tmpfs", *(["-o", f"size={m['size']}"] if m.get("size") else []),
                  "tmpfs", dst)
        else:
            mount("--bind", m["source"], dst)
        if m.get("readOnly"):
            mount("-o", "remount,bind,ro", dst)
    os.chdir(plan.get("workingDir") or "/")
    argv = plan["argv"]
    os.execvpe(argv[0], argv, plan["env"])


if __name__ == "__main__":
    main(sys.argv[1])
