"""The files hvdk8s reads and writes: cluster files, calibrations, records, results."""
