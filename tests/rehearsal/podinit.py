"""PID 1 of a rehearsal pod, run inside its own network, UTS, mount and PID namespaces:
make the container's view (hostname, /etc with the kubelet's hosts and resolv.conf, a private
/tmp, /run and /root, the pod's volumes bind-mounted), then exec the container's command with
the pod's environment, so the command itself is PID 1 as in a container.

Standalone on purpose (no project imports): it runs before anything is set up.
"""

import json
import os
import subprocess
import sys

# Where a pod may create a missing mount point: places that are private to the pod.
PRIVATE = ("/etc/", "/root/", "/tmp/", "/run/")


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def main(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    subprocess.run(["hostname", plan["hostname"]], check=True)
    mount("-t", "overlay", "overlay", "-o",
          f"lowerdir=/etc,upperdir={plan['etc_upper']},workdir={plan['etc_work']}", "/etc")
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
    mount("--bind", plan["root_home"], "/root")
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
