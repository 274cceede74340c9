"""Where a job runs: GPU topology, node presets, the cluster model, placement (GPU sets, nodes, racks), network position, DRA devices and what a cluster offers (doctor)."""
