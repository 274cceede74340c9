"""The Kubernetes backend (`backend.KubernetesBackend`) and its reads and writes of the API.

Empty on purpose: importing one submodule must not load the whole backend.
"""
