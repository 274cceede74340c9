"""hvdk8s trainer status: a job's progress posted to Kubeflow Trainer's status endpoint.

Trainer (v2.3.0, the `TrainJobStatus` feature gate on) injects into the containers of a
TrainJob's trainer pods (the replicated job labelled
`trainer.kubeflow.org/trainjob-ancestor-step: trainer`: hvdk8s's `node` pods) three
variables; hvdk8s's launcher, where this runs, gets the same from submit
(mpijob/k8s/trainer_progress.py):

    KUBEFLOW_TRAINER_SERVER_URL      https://<service>.<namespace>.svc:<port>
                                     /apis/trainer.kubeflow.org/v1alpha1/namespaces/NS/
                                     trainjobs/NAME/status
    KUBEFLOW_TRAINER_SERVER_CA_CERT  the CA of that endpoint (a file)
    KUBEFLOW_TRAINER_SERVER_TOKEN    a projected ServiceAccount token for it (a file the
                                     kubelet rotates: read again at each post)

A POST of `{"trainerStatus": {...}}` with `Authorization: Bearer <token>` sets the
TrainJob's `status.trainerStatus` (progressPercentage 0-100, estimatedRemainingSeconds,
metrics as name/value strings, lastUpdatedTime); docs/trainer-status.md cites the sources.

    poster = from_environ(os.environ)      # None where Trainer injected nothing
    if poster is not None:
        poster.post(step, total_steps, images_per_sec, eta_seconds)

`post` sends at most one request per MIN_INTERVAL seconds (as Trainer's SDK throttles
itself), the last step always; it never raises, says its first failure once on stderr, and
backs off after failures so an endpoint that does not answer costs little. One file,
Python 3.8, no dependency.
"""

# mypy: ignore-errors
# (it runs under the image's Python, 3.8 or later; hvdk8s never imports it)

import datetime
import json
import math
import ssl
import sys
import time
import urllib.error
import urllib.request

URL_VARIABLE = "KUBEFLOW_TRAINER_SERVER_URL"
CA_VARIABLE = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_VARIABLE = "KUBEFLOW_TRAINER_SERVER_TOKEN"
# Trainer's SDK: at most one update per 5 s, so a fast loop does not load the controller.
MIN_INTERVAL = 5.0
# After a failure: wait longer each time, up to this (a black-holed endpoint costs a
# TIMEOUT at most once per MAX_BACKOFF).
MAX_BACKOFF = 60.0
TIMEOUT = 5.0
# The metric names hvdk8s reports (Trainer's Metric: name and value, 1-64 characters each).
STEP_METRIC = "step"
TOTAL_STEPS_METRIC = "total_steps"
RATE_METRIC = "images_per_sec"
_INT32_MAX = 2 ** 31 - 1


def from_environ(environ, *, clock=time.monotonic, log=None):
    """A Poster for the endpoint Trainer injected, None where it injected nothing."""
    url, ca, token = (environ.get(k, "") for k in (URL_VARIABLE, CA_VARIABLE, TOKEN_VARIABLE))
    if not (url and ca and token):
        return None
    return Poster(url, ca, token, clock=clock, log=log)


def status_body(step, total_steps, images_per_sec, eta_seconds, now=None):
    """The request's JSON: Trainer's UpdateTrainJobStatusRequest."""
    status = {}
    if total_steps:
        status["progressPercentage"] = max(0, min(100, int(100 * step // total_steps)))
    if _finite(eta_seconds):
        status["estimatedRemainingSeconds"] = max(0, min(_INT32_MAX, int(round(eta_seconds))))
    metrics = [{"name": STEP_METRIC, "value": str(int(step))}]
    if total_steps:
        metrics.append({"name": TOTAL_STEPS_METRIC, "value": str(int(total_steps))})
    if _finite(images_per_sec):
        metrics.append({"name": RATE_METRIC, "value": f"{images_per_sec:.6g}"})
    status["metrics"] = metrics
    when = now or datetime.datetime.now(datetime.timezone.utc)
    status["lastUpdatedTime"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"trainerStatus": status}


def _finite(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


class Poster:
    def __init__(self, url, ca_file, token_file, *, clock=time.monotonic, log=None):
        self.url, self.ca_file, self.token_file = url, ca_file, token_file
        self.clock = clock
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self.sent = 0  # requests the endpoint accepted
        self.failures = 0  # in a row
        self._next = None  # the clock's time before which nothing is sent
        self._said = False

    def post(self, step, total_steps, images_per_sec, eta_seconds):
        """Report the job's progress; never raises."""
        try:
            now = self.clock()
            last = bool(total_steps) and step >= total_steps
            if self._next is not None and now < self._next and not last:
                return
            self._next = now + MIN_INTERVAL
            self._send(status_body(step, total_steps, images_per_sec, eta_seconds))
            self.sent += 1
            self.failures = 0
        except Exception as exc:  # reporting must never stop the job
            self.failures += 1
            self._next = self.clock() + min(MAX_BACKOFF, MIN_INTERVAL * 2 ** self.failures)
            if not self._said:
                self._said = True
                self.log(f"hvdk8s: posting progress to Kubeflow Trainer's status endpoint "
                         f"failed ({_why(exc)}); trying again less often, saying no more")

    def _send(self, body):
        with open(self.token_file) as f:
            token = f.read().strip()
        # The CA is read each time too: Trainer rotates its certificates.
        with open(self.ca_file) as f:
            context = ssl.create_default_context(cadata=f.read())
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as answer:
            answer.read()


def _why(exc):
    """The endpoint's own words where it gave them (a metav1.Status), else the error."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            said = json.loads(exc.read().decode() or "{}").get("message")
        except (ValueError, AttributeError, OSError):
            said = None
        return f"HTTP {exc.code}" + (f": {said}" if said else "")
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc) or type(exc).__name__
