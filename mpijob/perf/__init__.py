"""How fast it runs: the throughput model, its cited figures, overlap, links, calibration, and the cluster simulator."""
