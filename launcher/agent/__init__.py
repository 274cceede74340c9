"""The topology agent: what runs in the DaemonSet on each GPU node."""
