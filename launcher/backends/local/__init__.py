"""The local backend (`backend.LocalBackend`): a job's ranks as processes on this machine.

Empty on purpose: the supervisor and rank wrappers import their submodule alone.
"""
