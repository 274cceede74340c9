"""hvdk8s's pure core: data in, data out, no I/O. One subpackage per concept:

- `jobspec`: The job as the user asked for it: the spec, its options and validation, names,
  Kubernetes quantities, experiment matrices.
- `scheduling`: Where a job runs: GPU topology, node presets, the cluster model, placement (GPU
  sets, nodes, racks), network position, DRA devices and what a cluster offers (doctor).
- `perf`: How fast it runs: the throughput model, its cited figures, overlap, links, calibration,
  and the cluster simulator.
- `k8s`: What is sent: Kubernetes objects for both modes, the launch line, gangs, DRA claims,
  network annotations, the agent's manifests and the in-pod scripts.

`errors` (the exceptions every part raises) and `plural` stay at the top.
"""
