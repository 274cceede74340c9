"""Which GPUs the kubelet has given to which pods: a client of the kubelet PodResources API.

The kubelet serves `v1.PodResourcesLister` over a unix socket
(k8s.io/kubelet/pkg/apis/podresources/v1/api.proto). Only `List` is needed, and only a
few fields of its answer, so the call goes through grpcio without generated stubs and the
answer is read by a small protobuf wire-format decoder that skips every other field:

    ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
    PodResources             { string name = 1; string namespace = 2;
                               repeated ContainerResources containers = 3; }
    ContainerResources       { string name = 1; repeated ContainerDevices devices = 2; ... }
    ContainerDevices         { string resource_name = 1; repeated string device_ids = 2; ... }
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from launcher.errors import UserError

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"
GPU_RESOURCE_PREFIX = "nvidia.com/"
# Large nodes run hundreds of pods; grpc's 4 MiB default is too tight for their answer.
_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
# The NVIDIA device plugin names time-sliced replicas "<GPU uuid>::<replica>".
_REPLICA_SEPARATOR = "::"


class PodResourcesError(UserError):
    """The kubelet's PodResources API could not be reached or answered nonsense."""


@dataclass(frozen=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class ContainerResources:
    name: str
    devices: tuple[ContainerDevices, ...]


@dataclass(frozen=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...]


def list_pod_resources(socket_path: str = DEFAULT_SOCKET, *, timeout: float = 10.0):
    """`v1.PodResourcesLister/List` on the kubelet's socket: a tuple of `PodResources`."""
    try:
        # lazy: grpc (~55 ms, hvdk8s[agent]) only in the agent
        import grpc
    except ImportError as exc:
        raise PodResourcesError(f"cannot import grpc ({exc}); install hvdk8s[agent]") from None
    if not os.path.exists(socket_path):
        raise PodResourcesError(
            f"kubelet PodResources socket {socket_path} not found; mount the host's "
            "/var/lib/kubelet/pod-resources or pass --kubelet-socket"
        )
    target = "unix://" + os.path.abspath(socket_path)
    options = [("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)]
    with grpc.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(
            LIST_METHOD,
            request_serializer=lambda _request: b"",  # ListPodResourcesRequest is empty
            response_deserializer=None,  # raw bytes: decode errors then keep their message
        )
        try:
            answer = call(None, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") else "UNKNOWN"
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise PodResourcesError(
                f"kubelet PodResources List on {socket_path} failed: {code}: {details}"
            ) from None
    return decode_list_response(answer)


def decode_list_response(data: bytes) -> tuple[PodResources, ...]:
    return tuple(_pod(v) for n, v in _fields(data) if n == 1)


def _pod(data: bytes) -> PodResources:
    f = _message(data, {1: _string, 2: _string, 3: _container})
    return PodResources(_last(f[1]), _last(f[2]), tuple(f[3]))


def _container(data: bytes) -> ContainerResources:
    f = _message(data, {1: _string, 2: _devices})
    return ContainerResources(_last(f[1]), tuple(f[2]))


def _devices(data: bytes) -> ContainerDevices:
    f = _message(data, {1: _string, 2: _string})
    return ContainerDevices(_last(f[1]), tuple(f[2]))


def _message(data: bytes, schema: Mapping[int, Callable]) -> dict[int, list]:
    """{field number: its decoded values, in order} for the fields in `schema` (number ->
    decoder), as the message declarations in this module's docstring list them."""
    values: dict[int, list] = {n: [] for n in schema}
    for n, v in _fields(data):
        if n in schema:
            values[n].append(schema[n](v))
    return values


def _last(values: list[str]) -> str:
    # proto3: the last occurrence of a singular field wins; absent is "".
    return values[-1] if values else ""


def _string(value) -> str:
    if not isinstance(value, bytes):
        raise PodResourcesError("malformed PodResources answer: a string field is not length-delimited")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise PodResourcesError("malformed PodResources answer: a string is not UTF-8") from None


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one message: an int for varints, the bytes
    for length-delimited fields; fixed-width fields are skipped (none is read here)."""
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise PodResourcesError("malformed PodResources answer: truncated field")
            value = data[pos : pos + length]
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise PodResourcesError("malformed PodResources answer: truncated field")
            continue
        else:
            raise PodResourcesError(f"malformed PodResources answer: wire type {wire}")
        yield number, value


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise PodResourcesError("malformed PodResources answer: truncated varint")


def device_gpu_index(
    device_id: str, uuids: Mapping[str, int], mig_parents: Mapping[str, int], gpus: int
) -> int | None:
    """The GPU index behind a device plugin device ID, or None when it is no GPU of this node.

    Understands the NVIDIA device plugin's IDs: GPU UUIDs ("GPU-<uuid>"), time-sliced
    replicas ("GPU-<uuid>::<n>"), MIG devices ("MIG-<uuid>", and the old
    "MIG-GPU-<uuid>/<gi>/<ci>"), and the `deviceIDStrategy: index` forms ("3", "3:1").
    """
    base, sep, replica = device_id.rpartition(_REPLICA_SEPARATOR)
    if sep and replica.isdigit():
        device_id = base
    if device_id in uuids:
        return uuids[device_id]
    if device_id in mig_parents:
        return mig_parents[device_id]
    if device_id.startswith("MIG-GPU-"):
        parent = device_id[len("MIG-") :].split("/", 1)[0]
        return uuids.get(parent)
    head = device_id.split(":", 1)[0]
    if head.isdigit() and int(head) < gpus:
        return int(head)
    return None


def gpu_allocations(
    pods: Iterable[PodResources],
    *,
    uuids: Iterable[str],
    mig_parents: Mapping[str, int] | None = None,
    resource_prefix: str = GPU_RESOURCE_PREFIX,
) -> dict[str, tuple[int, ...]]:
    """{"<namespace>/<pod>": sorted GPU indices} for every pod holding a GPU of this node.

    A GPU counts as the pod's when the pod holds the whole GPU, a MIG slice of it or a
    time-sliced replica of it: placement hands out whole GPUs.
    """
    index = {uuid: i for i, uuid in enumerate(uuids)}
    parents = dict(mig_parents or {})
    allocated: dict[str, tuple[int, ...]] = {}
    for pod in pods:
        held = {
            gpu
            for container in pod.containers
            for devices in container.devices
            if devices.resource_name.startswith(resource_prefix)
            for device_id in devices.device_ids
            if (gpu := device_gpu_index(device_id, index, parents, len(index))) is not None
        }
        if held:
            allocated[f"{pod.namespace}/{pod.name}"] = tuple(sorted(held))
    return allocated
