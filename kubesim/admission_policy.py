"""The ValidatingAdmissionPolicy admission plugin, modelled on k8s.io/apiserver
pkg/admission/plugin/policy (generic/policy_dispatcher.go CollectParams,
matching/matching.go, webhook/predicates/{rules,namespace,object}, validating/dispatcher.go
and validator.go, cel/activation.go and filter.go), with CEL from cel-python.

For each write (CREATE, UPDATE, DELETE; not CONNECT), every ValidatingAdmissionPolicy whose
matchConstraints match the request (namespaceSelector, objectSelector, excludeResourceRules,
resourceRules with scope, operations, groups, versions, `res/sub` and resourceNames) is
checked through each binding naming it whose matchResources match, once per param the
binding's paramRef selects (name or selector, namespace, parameterNotFoundAction). Its
matchConditions must all be true (any error: failurePolicy), then each validation's
expression must be true. Variables: `object`, `oldObject` (null on CREATE/DELETE),
`request` (the AdmissionRequest as its JSON: empty fields are absent, so `has()` is how to
test them), `params`, `namespaceObject`, `variables` (spec.variables, in order).

The first denial ends the request, as validating/dispatcher.go words it:
`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<p>' with binding '<b>'
denied request: <message>`, with the validation's reason (default Invalid, so 422) and the
message as the one cause. A validation's message is its messageExpression's value (a string
of one line, at most 5 KiB), else `message`, else `failed expression: <expression>`; an
evaluation error is `expression '<e>' resulted in error: <why>` and counts as a denial
unless failurePolicy is Ignore. Bindings with `Warn` add a warning; `Audit` is dropped (the
model keeps no audit log). The admission registration kinds themselves are exempt
(rules.IsExemptAdmissionConfigurationResource).

Not modelled: CEL type checking against schemas (a policy is not refused at create time,
and a type error shows only when evaluated), the runtime cost budget, `authorizer`,
auditAnnotations, matchPolicy Equivalent (only the request's own group/version match).

Each write is checked as the user the HTTP request authenticated as (`acting_as`, set by
the request handler); writes the model's own controllers and test helpers make are checked
as kube-controller-manager.
"""

from __future__ import annotations

import contextlib
import threading

from . import errors
from .selectors import LabelSelector

GROUP = "admissionregistration.k8s.io"
POLICIES, BINDINGS = f"{GROUP}/validatingadmissionpolicies", \
    f"{GROUP}/validatingadmissionpolicybindings"
_EXEMPT_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                 "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
# celconfig.MaxEvaluatedMessageExpressionSizeBytes
MAX_MESSAGE_BYTES = 5 * 1024
CONTROLLER_MANAGER = "system:kube-controller-manager"


class _User:
    def __init__(self, name: str, groups=("system:authenticated",), uid: str = "",
                 extra: dict | None = None):
        self.name, self.groups, self.uid, self.extra = name, tuple(groups), uid, extra or {}


class PolicyError(Exception):
    """A configuration error of a policy or binding (PolicyError in the dispatcher)."""


def _reason_code(reason: str) -> int:
    """validating/dispatcher.go reasonToCode."""
    return {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(reason, 422)


class ValidatingAdmissionPolicies:
    def __init__(self, store, registry):
        self.store, self.registry = store, registry
        self._local = threading.local()
        self._programs: dict[str, object] = {}
        self._lock = threading.Lock()
        self.warn = None  # callable(list[str]): the request's `Warning` headers

    @contextlib.contextmanager
    def acting_as(self, user):
        """Writes inside are checked as `user` (name, groups, uid, extra)."""
        previous = getattr(self._local, "user", None)
        self._local.user = user
        try:
            yield
        finally:
            self._local.user = previous

    def _user(self):
        return getattr(self._local, "user", None) or _User(CONTROLLER_MANAGER)

    # -- the plugin's Validate ----------------------------------------------------------------
    def validate(self, rt, operation: str, obj: dict | None, old: dict | None,
                 subresource: str | None = None, dry_run: bool = False) -> None:
        if rt.group == GROUP and rt.kind in _EXEMPT_KINDS:
            return
        bindings = self.store.items(BINDINGS)
        if not bindings:
            return
        meta = (obj or old or {}).get("metadata") or {}
        attrs = _Attributes(rt, operation, obj, old, subresource or "", dry_run,
                            meta.get("namespace") or "", meta.get("name") or "",
                            meta.get("generateName") or "", self._user())
        denied: list[tuple[dict, dict | None, str, str]] = []
        warnings: list[str] = []
        for policy in sorted(self.store.items(POLICIES), key=lambda p: p["metadata"]["name"]):
            spec = policy.get("spec") or {}
            name = policy["metadata"]["name"]
            fail = spec.get("failurePolicy") or "Fail"
            try:
                if not self._matches(spec.get("matchConstraints"), attrs, required=True):
                    continue
            except PolicyError as e:
                if fail != "Ignore":
                    denied.append((policy, None, f"failed to configure policy: {e}", ""))
                continue
            for binding in sorted((b for b in bindings
                                   if (b.get("spec") or {}).get("policyName") == name),
                                  key=lambda b: b["metadata"]["name"]):
                bspec = binding.get("spec") or {}
                try:
                    if not self._matches(bspec.get("matchResources"), attrs, required=False):
                        continue
                    params = self._params(spec.get("paramKind"), bspec.get("paramRef"),
                                          attrs.namespace)
                except PolicyError as e:
                    if fail != "Ignore":
                        denied.append((policy, binding, f"failed to configure binding: {e}", ""))
                    continue
                actions = bspec.get("validationActions") or []
                for param in params:
                    for message, reason in self._decisions(spec, fail, attrs, param):
                        if "Deny" in actions:
                            denied.append((policy, binding, message, reason))
                        if "Warn" in actions:
                            warnings.append(
                                f"Validation failed for ValidatingAdmissionPolicy '{name}' "
                                f"with binding '{binding['metadata']['name']}': {message}")
        if warnings and self.warn is not None:
            self.warn(warnings)
        if denied:
            policy, binding, message, reason = denied[0]
            raise _denial(attrs, policy, binding, message, reason)

    # -- matching -----------------------------------------------------------------------------
    def _matches(self, constraints: dict | None, a: _Attributes, required: bool) -> bool:
        """matching.Matcher.Matches (policy_matcher.go: a policy must have constraints, a
        binding without matchResources matches everything its policy does)."""
        if constraints is None:
            if required:
                raise PolicyError("policy contained no match constraints, a required field")
            return True
        if not self._namespace_selected(constraints.get("namespaceSelector"), a):
            return False
        selector = LabelSelector.from_api(constraints.get("objectSelector") or {})
        # predicates/object: either the new or the old object's labels may match
        if not any(selector.matches(((o or {}).get("metadata") or {}).get("labels") or {})
                   for o in (a.obj, a.old) if o is not None):
            return False
        if any(_rule_matches(r, a) for r in constraints.get("excludeResourceRules") or []):
            return False
        rules = constraints.get("resourceRules") or []
        return not rules or any(_rule_matches(r, a) for r in rules)

    def _namespace_selected(self, selector: dict | None, a: _Attributes) -> bool:
        """predicates/namespace MatchNamespaceSelector: cluster-scoped objects other than
        Namespaces always match; a Namespace being written is judged by its new labels."""
        if not a.namespace and a.rt.key != "/namespaces":
            return True
        parsed = LabelSelector.from_api(selector or {})
        if parsed.empty:
            return True
        if a.rt.key == "/namespaces" and not a.subresource and a.operation != "DELETE":
            labels = ((a.obj or {}).get("metadata") or {}).get("labels")
        else:
            ns = self.store.get("/namespaces", "", a.namespace or a.name)
            if ns is None:
                raise errors.not_found("", "namespaces", a.namespace or a.name)
            labels = ns["metadata"].get("labels")
        return parsed.matches(labels or {})

    def _params(self, kind: dict | None, ref: dict | None, namespace: str) -> list:
        """generic.CollectParams: [None] when the policy takes none or the binding names
        none; else the objects paramRef selects, refused when none and the binding says
        parameterNotFoundAction: Deny."""
        if not kind or not ref:
            return [None]
        api_version = kind.get("apiVersion") or ""
        group, _, version = api_version.rpartition("/")
        prt = next((r for r in self.registry.all() if r.group == group
                    and r.version == version and r.kind == kind.get("kind")), None)
        if prt is None:
            raise PolicyError(f"paramKind kind `&ParamKind{{APIVersion:{api_version},"
                              f"Kind:{kind.get('kind')},}}` not known")
        ns = ""
        if prt.namespaced:
            ns = ref.get("namespace") or namespace
            if not ns:
                raise PolicyError("cannot use namespaced paramRef in policy binding that "
                                  "matches cluster-scoped resources")
        elif ref.get("namespace"):
            raise PolicyError("paramRef.namespace must not be provided for a cluster-scoped "
                              "`paramKind`")
        if ref.get("name"):
            if ref.get("selector") is not None:
                raise PolicyError("paramRef.name and paramRef.selector are mutually exclusive")
            found = self.store.get(prt.key, ns, ref["name"])
            params = [found] if found is not None else []
        elif ref.get("selector") is not None:
            selector = LabelSelector.from_api(ref["selector"])
            params = [o for o in self.store.items(prt.key, ns or None)
                      if selector.matches(o["metadata"].get("labels") or {})]
        else:
            raise PolicyError("one of name or selector must be provided")
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise PolicyError("no params found for policy binding with `Deny` "
                              "parameterNotFoundAction")
        return [{**p, "apiVersion": api_version, "kind": kind.get("kind")} for p in params]

    # -- evaluation (validator.go) ------------------------------------------------------------
    def _decisions(self, spec: dict, fail: str, a: _Attributes, param) -> list[tuple[str, str]]:
        """(message, reason) of each denial of one policy-binding-param."""
        from . import cel  # cel-python only where a policy is bound

        activation = {"object": a.obj, "oldObject": a.old, "params": param,
                      "request": a.request(), "namespaceObject": self._namespace_object(a)}
        env = cel.activation(activation)
        env["variables"] = cel.variables(
            [(v.get("name") or "", self._program(v.get("expression") or ""))
             for v in spec.get("variables") or []], env)
        errs = []
        for condition in spec.get("matchConditions") or []:
            value, err = self._eval(condition.get("expression") or "", env)
            if err is not None:
                errs.append(err)
            elif value is False:
                return []  # preconditions not met: the policy does not apply
        if errs:
            # utilerrors.NewAggregate: one error alone, several as [a, b]
            msg = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
            return [] if fail == "Ignore" else [(msg, "")]
        out = []
        for v in spec.get("validations") or []:
            expression = v.get("expression") or ""
            value, err = self._eval(expression, env)
            if err is not None:
                if fail != "Ignore":
                    out.append((err, ""))
                continue
            if value is True:
                continue
            message = ""
            if v.get("messageExpression"):
                text, merr = self._eval(v["messageExpression"], env)
                if merr is None and isinstance(text, str):
                    text = text.strip()
                    if len(text.encode()) <= MAX_MESSAGE_BYTES and "\n" not in text:
                        message = text
            message = message or (v.get("message") or "").strip() or \
                f"failed expression: {expression.strip()}"
            out.append((message, v.get("reason") or "Invalid"))
        return out

    def _program(self, expression: str):
        from . import cel

        with self._lock:
            program = self._programs.get(expression)
            if program is None:
                program = self._programs[expression] = cel.compile_expression(expression)
            return program

    def _eval(self, expression: str, env: dict):
        """(python value, None) or (None, the evaluation error as cel/activation.go words
        it)."""
        from . import cel

        program = self._program(expression)
        if isinstance(program, str):
            return None, f"compilation error: {program}"
        try:
            return cel.to_python(program.evaluate(env)), None
        except Exception as e:  # every CEL runtime error is the policy's
            return None, f"expression '{expression}' resulted in error: {cel.error_text(e)}"

    def _namespace_object(self, a: _Attributes) -> dict | None:
        """cel.CreateNamespaceObject: the request's Namespace (none for cluster-scoped
        objects and for a Namespace itself), metadata trimmed to what it copies."""
        if not a.namespace or a.rt.key == "/namespaces":
            return None
        ns = self.store.get("/namespaces", "", a.namespace)
        if ns is None:
            return None
        keep = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "labels", "annotations", "finalizers")
        meta = {k: v for k, v in ns["metadata"].items() if k in keep}
        return {"metadata": meta, "spec": ns.get("spec") or {}, "status": ns.get("status") or {}}


class _Attributes:
    """admission.Attributes of one write."""

    def __init__(self, rt, operation, obj, old, subresource, dry_run, namespace, name,
                 generate_name, user):
        self.rt, self.operation, self.obj, self.old = rt, operation, obj, old
        self.subresource, self.dry_run, self.namespace = subresource, dry_run, namespace
        self.name, self.generate_name, self.user = name, generate_name, user

    def request(self) -> dict:
        """cel.CreateAdmissionRequest as its JSON (k8s.io/api/admission/v1 AdmissionRequest:
        subResource, name, namespace and the user's fields are omitempty)."""
        gvk = {"group": self.rt.group, "version": self.rt.version, "kind": self.rt.kind}
        gvr = {"group": self.rt.group, "version": self.rt.version, "resource": self.rt.plural}
        user: dict = {}
        if self.user.name:
            user["username"] = self.user.name
        if self.user.uid:
            user["uid"] = self.user.uid
        if self.user.groups:
            user["groups"] = list(self.user.groups)
        if self.user.extra:
            user["extra"] = {k: list(v) for k, v in self.user.extra.items()}
        options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                   "DELETE": "DeleteOptions"}[self.operation]
        request = {"uid": "", "kind": gvk, "resource": gvr, "requestKind": dict(gvk),
                   "requestResource": dict(gvr), "operation": self.operation,
                   "userInfo": user, "dryRun": self.dry_run,
                   "options": {"kind": options, "apiVersion": "meta.k8s.io/v1"}}
        for key, value in (("subResource", self.subresource),
                           ("requestSubResource", self.subresource),
                           ("name", self.name), ("namespace", self.namespace)):
            if value:
                request[key] = value
        return request


def _rule_matches(rule: dict, a: _Attributes) -> bool:
    """predicates/rules.Matcher plus resourceNames (matching.go matchesResourceRules)."""
    scope = rule.get("scope") or "*"
    is_namespace = a.rt.key == "/namespaces"
    if scope == "Namespaced" and (is_namespace or not a.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not a.namespace):
        return False
    if not any(op in ("*", a.operation) for op in rule.get("operations") or []):
        return False
    if not any(g in ("*", a.rt.group) for g in rule.get("apiGroups") or []):
        return False
    if not any(v in ("*", a.rt.version) for v in rule.get("apiVersions") or []):
        return False
    if not any(_resource_matches(r, a.rt.plural, a.subresource)
               for r in rule.get("resources") or []):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


def _resource_matches(pattern: str, resource: str, subresource: str) -> bool:
    res, _, sub = pattern.partition("/")
    return res in ("*", resource) and sub in ("*", subresource)


def _denial(a: _Attributes, policy: dict, binding: dict | None, message: str,
            reason: str) -> errors.ApiError:
    """validating/dispatcher.go: the first denial as admission.NewForbidden words it, with
    the decision's reason and code."""
    pname = policy["metadata"]["name"]
    if binding is not None:
        text = (f"ValidatingAdmissionPolicy '{pname}' with binding "
                f"'{binding['metadata']['name']}' denied request: {message}")
    else:
        text = f"ValidatingAdmissionPolicy '{pname}' denied request: {message}"
    # admission.extractResourceName: the request's name, else the object's generateName
    name = a.name or a.generate_name or "Unknown"
    resource = errors.qualified(a.rt.group, a.rt.plural)
    reason = reason or "Invalid"
    details: dict = {"name": name, "kind": a.rt.plural, "causes": [{"message": text}]}
    if a.rt.group:
        details["group"] = a.rt.group
    return errors.ApiError(_reason_code(reason), reason,
                           f'{resource} "{name}" is forbidden: {text}', details)

