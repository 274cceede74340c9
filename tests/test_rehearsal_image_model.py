"""The rehearsal's model of what a container of an image runs as (tests/rehearsal/image.py):
the image's USER, the pod's securityContext over it, groups, HOME and capabilities."""

from __future__ import annotations

import pytest

from tests.rehearsal.image import (
    DEFAULT_CAPABILITIES,
    CreateContainerConfigError,
    Image,
    process_identity,
)


@pytest.fixture
def image(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                         "mpiuser:x:1000:1000::/home/mpiuser:/bin/bash\n")
    (tmp_path / "etc/group").write_text("root:x:0:\nmpiuser:x:1000:\nvideo:x:44:mpiuser\n")
    return lambda user: Image(ref="x", root=tmp_path, env={}, user=user, working_dir="/",
                              entrypoint=[], cmd=[])


def _pod(pod_sc=None, container_sc=None):
    container = {"name": "c", **({"securityContext": container_sc} if container_sc else {})}
    return {"spec": {"containers": [container], **({"securityContext": pod_sc} if pod_sc else {})}}, container


def test_the_images_user_by_name_with_its_groups_home_and_default_capabilities(image):
    pod, c = _pod()
    who = process_identity(image("mpiuser"), pod, c, {})
    assert (who["uid"], who["gid"], who["home"]) == (1000, 1000, "/home/mpiuser")
    assert who["groups"] == [44, 1000]
    assert who["capabilities"] == sorted(DEFAULT_CAPABILITIES) and not who["no_new_privs"]


def test_run_as_user_beats_the_image_and_the_container_beats_the_pod(image):
    pod, c = _pod({"runAsUser": 0, "runAsGroup": 5}, {"runAsUser": 1000})
    who = process_identity(image("root"), pod, c, {"HOME": "/work"})
    assert (who["uid"], who["gid"], who["home"]) == (1000, 5, "/work")


def test_an_unknown_uid_gets_group_0_and_home_slash(image):
    pod, c = _pod({"runAsUser": 4242})
    who = process_identity(image("root"), pod, c, {})
    assert (who["uid"], who["gid"], who["home"]) == (4242, 0, "/")


def test_restricted_container_has_no_capabilities_and_no_new_privileges(image):
    pod, c = _pod({"runAsUser": 1000}, {"allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}})
    who = process_identity(image("root"), pod, c, {})
    assert who["capabilities"] == [] and who["no_new_privs"]


def test_run_as_non_root_refuses_a_root_image(image):
    pod, c = _pod({"runAsNonRoot": True})
    with pytest.raises(CreateContainerConfigError, match="runAsNonRoot"):
        process_identity(image("root"), pod, c, {})
    assert process_identity(image("mpiuser"), pod, c, {})["uid"] == 1000


def test_a_user_the_image_does_not_have_is_a_config_error(image):
    pod, c = _pod()
    with pytest.raises(CreateContainerConfigError, match="unable to find user nobody2"):
        process_identity(image("nobody2"), pod, c, {})
