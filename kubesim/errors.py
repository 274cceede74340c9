"""metav1.Status error bodies, worded like the real kube-apiserver's.

Messages matter: clients (and humans reading test failures) parse `reason`
and match on the message text, so they follow apimachinery's errors package.
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str | None, group: str, kind: str) -> dict:
    d: dict = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = kind
    return d


def qualified(group: str, plural: str) -> str:
    """GroupResource.String(): 'pods', 'jobs.batch', 'mpijobs.kubeflow.org'."""
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(group, plural)} "{name}" not found',
                    _details(name, group, plural))


def resource_not_found() -> ApiError:
    # What the apiserver answers for a path no installed API serves.
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{qualified(group, plural)} "{name}" already exists',
                    _details(name, group, plural))


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
                    _details(name, group, plural))


MODIFIED_CONFLICT = ("the object has been modified; please apply your changes to the latest "
                     "version and try again")


def invalid(group: str, kind: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """causes: (field, message-without-field) pairs, e.g. ("metadata.name", 'Invalid value: ...')."""
    texts = [f"{field}: {msg}" for field, msg in causes]
    qkind = f"{kind}.{group}" if group else kind
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(name, group, kind)
    details["causes"] = [{"reason": _cause_reason(msg), "message": msg, "field": field}
                         for field, msg in causes]
    return ApiError(422, "Invalid", f'{qkind} "{name}" is invalid: {joined}', details)


def _cause_reason(msg: str) -> str:
    for prefix, reason in (("Invalid value", "FieldValueInvalid"),
                           ("Required value", "FieldValueRequired"),
                           ("Forbidden", "FieldValueForbidden"),
                           ("Unsupported value", "FieldValueNotSupported"),
                           ("Duplicate value", "FieldValueDuplicate"),
                           ("Too long", "FieldValueTooLong")):
        if msg.startswith(prefix):
            return reason
    return "FieldValueInvalid"


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(group: str, plural: str, name: str | None, message: str) -> ApiError:
    q = qualified(group, plural)
    prefix = f'{q} "{name}" is forbidden' if name else f"{q} is forbidden"
    return ApiError(403, "Forbidden", f"{prefix}: {message}", _details(name, group, plural))


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource", {})


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}", {})


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def service_unavailable(message: str = "the server is currently unable to handle the request"):
    return ApiError(503, "ServiceUnavailable", message, {})


def too_many_requests(retry_after: int | None = 1) -> ApiError:
    if retry_after is None:
        return ApiError(429, "TooManyRequests", "Too many requests, please try again later.", {})
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": retry_after}, {"Retry-After": str(retry_after)})


def continue_expired() -> ApiError:
    # etcd3/store.go GetList, on ErrCompacted with a continue token
    return gone(
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in "
        "this response to retrieve the remainder of the results. Continuing with the provided "
        "token results in an inconsistent list - objects that were created, modified, or "
        "deleted between the time the first chunk was returned and now may show up in the "
        "list.")
