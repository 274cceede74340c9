"""This machine's hardware as its drivers report it (NVML): read by the local backend for
its own GPUs and by the node agent for the node it runs on, so neither imports the other."""
