"""What both Kubernetes backends share: the offline one, which a client dry run uses when no
cluster is asked anything, and the live one (launcher.backends.kubernetes.backend, which
extends this). The job's objects are rendered here, once: a dry run prints them and the
live backend's `submit` creates exactly them.

Light on purpose: a client dry run imports this, not the API client.
"""

from __future__ import annotations

from launcher.backends.base import BaseBackend, Prepared, SubmitOptions
from launcher.preparing.planning import Plan


class KubernetesObjects(BaseBackend):
    name = "offline"

    def prepare(self, plan: Plan, options: SubmitOptions) -> Prepared:
        """Render the job's objects, once; computed here without a call to anything."""
        # lazy: choosing a backend imports this module for every job command; rendering and
        # SSH keys (pydantic models, cryptography) load only to submit or dry-run
        from launcher.preparing.benchmark_program import benchmark_source, elastic_benchmark_source
        from launcher.preparing.sshkeys import generate_ssh_keys
        from mpijob.k8s.manifests import render

        spec = plan.spec
        objects = render(
            spec, mode=options.mode, placement=plan.placement,
            ssh=generate_ssh_keys(comment=f"hvdk8s-{spec.name}") if options.mode == "pods" else None,
            benchmark_source=benchmark_source() if spec.runs_benchmark else None,
            elastic_source=elastic_benchmark_source() if spec.runs_benchmark and spec.elastic
            else None,
            prediction=plan.prediction.to_json() if plan.prediction is not None else None,
            trainer_version=options.trainer_version, managed_by=options.managed_by)
        return Prepared(spec, plan, tuple(objects))
