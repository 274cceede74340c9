"""What is sent: Kubernetes objects for both modes, the launch line, gangs, DRA claims, network annotations, the agent's manifests and the in-pod scripts."""
