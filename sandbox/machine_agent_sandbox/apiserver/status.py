"""Kubernetes `Status` bodies and the error type that carries them to the HTTP layer.

Messages follow kube-apiserver's wording (k8s.io/apimachinery/pkg/api/errors and
k8s.io/apimachinery/pkg/util/validation/field), so clients that match on them behave
here as they do against the real server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


class ApiError(Exception):
    """An answer other than success: HTTP code, `reason` and a full Status body."""

    def __init__(self, code: int, reason: str, message: str,
                 details: Obj | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.plain = False  # answered as the real mux's plain-text "404 page not found"

    def body(self) -> Obj:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                 "status": "Failure", "message": message}
    if reason:  # a bare 500 (strconv errors) carries none
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success_status(name: str, group: str, plural: str, uid: str) -> Obj:
    """The body of a DELETE that removed the object at once."""
    details = {"name": name, **({"group": group} if group else {}), "kind": plural, "uid": uid}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def _details(name: str | None, group: str, kind: str) -> Obj:
    details: Obj = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def not_found(gr: str, group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{gr} "{name}" not found', _details(name, group, plural))


def already_exists(gr: str, group: str, plural: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{gr} "{name}" already exists',
                    _details(name, group, plural))


def conflict(gr: str, group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {gr} "{name}": {why}',
                    _details(name, group, plural))


OBJECT_MODIFIED = ("the object has been modified; please apply your changes to the latest "
                   "version and try again")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(gr: str, group: str, plural: str, name: str | None, why: str) -> ApiError:
    subject = f'{gr} "{name}"' if name else gr
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}",
                    _details(name, group, plural))


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource")


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(accepted)}")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": retry_after},
                    headers={"Retry-After": str(retry_after)})


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


def timeout(message: str, retry_after: int = 1, cause: str = "") -> ApiError:
    details: Obj = {"retryAfterSeconds": retry_after}
    if cause:  # storage's "Too large resource version" names itself as a cause
        details = {"causes": [{"reason": cause, "message": "Too large resource version"}],
                   **details}
    return ApiError(504, "Timeout", f"Timeout: {message}" if cause else message, details)


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) ---------------------


def go_value(value: Any) -> str:
    """Render a value the way Go's %#v shows it in field error messages (close enough)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '"null"'
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{go_value(v)}" for k, v in value.items())
        return "map[string]interface {}{" + inner + "}"
    return "[]interface {}{" + ", ".join(go_value(v) for v in value) + "}"


@dataclass(frozen=True)
class FieldError:
    reason: str  # FieldValueRequired, FieldValueInvalid, ...
    field: str
    body: str    # what follows "field: " in the message

    def cause(self) -> Obj:
        return {"reason": self.reason, "message": self.body, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def required(path: str) -> FieldError:
    return FieldError("FieldValueRequired", path, "Required value")


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, f"Invalid value: {go_value(value)}: {detail}")


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueTypeInvalid", path, f"Invalid value: {go_value(value)}: {detail}")


def not_supported(path: str, value: Any, allowed: list[Any]) -> FieldError:
    choices = ", ".join(go_value(a) for a in allowed)
    return FieldError("FieldValueNotSupported", path,
                      f"Unsupported value: {go_value(value)}: supported values: {choices}")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError("FieldValueTooLong", path, f"Too long: may not be more than {limit} bytes")


def too_many(path: str, actual: int, limit: int) -> FieldError:
    return FieldError("FieldValueTooMany", path,
                      f"Too many: {actual}: must have at most {limit} items")


def duplicate(path: str, value: Any) -> FieldError:
    shown = json.dumps(value, separators=(",", ":")) if isinstance(value, dict) \
        else go_value(value)
    return FieldError("FieldValueDuplicate", path, f"Duplicate value: {shown}")


def forbidden_field(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, f"Forbidden: {detail}")


@dataclass
class InvalidObject:
    """Collects field errors for one object; `error()` is the 422 Invalid answer."""

    kind: str
    group: str
    name: str
    errors: list[FieldError] = field(default_factory=list)

    def error(self) -> ApiError:
        qualified = f"{self.kind}.{self.group}" if self.group else self.kind
        # an aggregate error prints each distinct message once (apimachinery's NewAggregate)
        shown = list(dict.fromkeys(str(e) for e in self.errors))
        summary = shown[0] if len(shown) == 1 else "[" + ", ".join(shown) + "]"
        details = _details(self.name, self.group, self.kind)
        details["causes"] = [e.cause() for e in self.errors]
        return ApiError(422, "Invalid", f'{qualified} "{self.name}" is invalid: {summary}',
                        details)


def invalid_object(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    return InvalidObject(kind, group, name, list(errors)).error()
