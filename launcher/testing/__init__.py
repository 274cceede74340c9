"""Test doubles of what hvdk8s talks to, for tests, benchmarks and anyone scripting hvdk8s.

    kubeapi   an in-process Kubernetes API server (HTTP, watch, scheduler, kubelet, and
              models of the MPI Operator, Kueue and Volcano) that the real client talks to

It lives in the product tree, not under tests/, because the tests, the pod rehearsal and
`benchmarks/cli/bench_list.py` all use it, and benchmarks do not import the test tree (as
client-go ships its fake clientset). Nothing in the CLI imports it: it costs no start-up
time. Its pytest fixtures stay in tests/kubeapi_fixtures.py.
"""
