"""The job as the user asked for it: the spec, its options and validation, names, Kubernetes quantities, experiment matrices."""
