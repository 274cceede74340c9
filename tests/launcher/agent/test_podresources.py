"""The kubelet PodResources client: wire decoding, the gRPC call, device ID mapping."""

from __future__ import annotations

from concurrent import futures

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from launcher.agent import podresources
from launcher.agent.podresources import ContainerDevices, ContainerResources, PodResources

F = descriptor_pb2.FieldDescriptorProto


# k8s.io/kubelet/pkg/apis/podresources/v1/api.proto (1.31+): the messages of List's answer,
# field by field as the .proto declares them.
API_PROTO = {
    "NUMANode": ["int64 ID = 1"],
    "TopologyInfo": ["repeated NUMANode nodes = 1"],
    "ContainerDevices": ["string resource_name = 1", "repeated string device_ids = 2",
                         "TopologyInfo topology = 3"],
    "ContainerMemory": ["string memory_type = 1", "uint64 size = 2", "TopologyInfo topology = 3"],
    "CDIDevice": ["string name = 1"],
    "ClaimResource": ["repeated CDIDevice cdi_devices = 1", "string driver_name = 2",
                      "string pool_name = 3", "string device_name = 4"],
    "DynamicResource": ["string claim_name = 2", "string claim_namespace = 3",
                        "repeated ClaimResource claim_resources = 4"],
    "ContainerResources": ["string name = 1", "repeated ContainerDevices devices = 2",
                           "repeated int64 cpu_ids = 3", "repeated ContainerMemory memory = 4",
                           "repeated DynamicResource dynamic_resources = 5"],
    "PodResources": ["string name = 1", "string namespace = 2",
                     "repeated ContainerResources containers = 3"],
    "ListPodResourcesResponse": ["repeated PodResources pod_resources = 1"],
}
SCALARS = {"string": F.TYPE_STRING, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64}


def _podresources_messages():
    """Message classes built from API_PROTO, so the decoder is tested on what protobuf itself
    encodes, including the fields it skips."""
    proto = descriptor_pb2.FileDescriptorProto(name="podresources_v1_test.proto", package="v1", syntax="proto3")
    for name, fields in API_PROTO.items():
        msg = proto.message_type.add(name=name)
        for declaration in fields:
            *repeated, ftype, fname, _, number = declaration.split()
            f = msg.field.add(name=fname, number=int(number),
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL,
                              type=SCALARS.get(ftype, F.TYPE_MESSAGE))
            if ftype not in SCALARS:
                f.type_name = f".v1.{ftype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("v1.ListPodResourcesResponse"))


ListPodResourcesResponse = _podresources_messages()

GPU = [f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}" for i in range(4)]


def kubelet_answer() -> bytes:
    response = ListPodResourcesResponse()
    train = response.pod_resources.add(name="train-worker-0", namespace="ml")
    main = train.containers.add(name="worker", cpu_ids=[2, 3, 64, 65])
    main.memory.add(memory_type="memory", size=1 << 34).topology.nodes.add(ID=1)
    gpus = main.devices.add(resource_name="nvidia.com/gpu", device_ids=[GPU[2], GPU[0]])
    gpus.topology.nodes.add(ID=0)
    main.devices.add(resource_name="rdma/hca", device_ids=["mlx5_0"])
    claim = main.dynamic_resources.add(claim_name="c", claim_namespace="ml")
    claim.claim_resources.add(driver_name="gpu.nvidia.com", device_name="gpu-3").cdi_devices.add(name="nvidia.com/gpu=3")
    train.containers.add(name="sidecar")
    response.pod_resources.add(name="web", namespace="default").containers.add(name="nginx")
    shared = response.pod_resources.add(name="notebook", namespace="team-a")
    shared.containers.add(name="jupyter").devices.add(resource_name="nvidia.com/gpu.shared", device_ids=[f"{GPU[1]}::3"])
    return response.SerializeToString()


def test_decoder_reads_what_protobuf_encodes_and_skips_other_fields():
    pods = podresources.decode_list_response(kubelet_answer())

    assert pods[0] == PodResources(
        name="train-worker-0",
        namespace="ml",
        containers=(
            ContainerResources(
                "worker",
                (
                    ContainerDevices("nvidia.com/gpu", (GPU[2], GPU[0])),
                    ContainerDevices("rdma/hca", ("mlx5_0",)),
                ),
            ),
            ContainerResources("sidecar", ()),
        ),
    )
    assert [(p.namespace, p.name) for p in pods] == [("ml", "train-worker-0"), ("default", "web"), ("team-a", "notebook")]
    assert podresources.decode_list_response(b"") == ()


@pytest.mark.parametrize("cut", [1, 5, 17])
def test_truncated_answers_are_errors_not_garbage(cut):
    data = kubelet_answer()
    with pytest.raises(podresources.PodResourcesError, match="malformed"):
        podresources.decode_list_response(data[:-cut])


def test_gpu_allocations_by_pod():
    pods = podresources.decode_list_response(kubelet_answer())

    allocated = podresources.gpu_allocations(pods, uuids=GPU)

    # Sorted indices; non-GPU resources and GPU-less pods left out; a time-sliced
    # replica (renamed resource nvidia.com/gpu.shared) holds its GPU.
    assert allocated == {"ml/train-worker-0": (0, 2), "team-a/notebook": (1,)}


@pytest.mark.parametrize(
    "device_id, expected",
    [
        (GPU[3], 3),
        (f"{GPU[3]}::0", 3),  # time-slicing replica
        ("MIG-5c0c8c1e-aaaa-bbbb-cccc-000000000001", 1),  # MIG, UUID form (via NVML)
        (f"MIG-{GPU[2]}/7/0", 2),  # MIG, old "MIG-GPU-<uuid>/<gi>/<ci>" form
        ("2", 2),  # deviceIDStrategy: index
        ("1:3", 1),  # index strategy, MIG device 3 of GPU 1
        ("7", None),  # index past this node's GPUs
        ("GPU-ffffffff-0000-0000-0000-000000000000", None),  # another node's GPU
        ("mlx5_0", None),
    ],
)
def test_device_gpu_index(device_id, expected):
    uuids = {u: i for i, u in enumerate(GPU)}
    mig = {"MIG-5c0c8c1e-aaaa-bbbb-cccc-000000000001": 1}
    assert podresources.device_gpu_index(device_id, uuids, mig, len(GPU)) == expected


def test_list_pod_resources_over_a_unix_socket(tmp_path):
    grpc = pytest.importorskip("grpc")
    answer = kubelet_answer()
    requests = []

    def list_pods(request: bytes, context):
        requests.append(request)
        return answer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister", {"List": grpc.unary_unary_rpc_method_handler(list_pods)}
    )
    server.add_generic_rpc_handlers((handler,))
    socket = tmp_path / "kubelet.sock"
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        pods = podresources.list_pod_resources(str(socket), timeout=5)
    finally:
        server.stop(None)

    assert requests == [b""]  # an empty ListPodResourcesRequest
    assert pods == podresources.decode_list_response(answer)


def test_missing_socket_names_the_option(tmp_path):
    with pytest.raises(podresources.PodResourcesError, match="--kubelet-socket"):
        podresources.list_pod_resources(str(tmp_path / "absent.sock"))


def test_unimplemented_service_is_a_one_line_error(tmp_path):
    grpc = pytest.importorskip("grpc")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    socket = tmp_path / "kubelet.sock"
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        with pytest.raises(podresources.PodResourcesError, match="UNIMPLEMENTED") as err:
            podresources.list_pod_resources(str(socket), timeout=5)
    finally:
        server.stop(None)
    assert "\n" not in str(err.value)
