"""A scripted stand-in for requests.Session: answers in order, records every request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.structures import CaseInsensitiveDict


def response(code: int, body: Any = None, headers: dict[str, str] | None = None,
             lines: list[Any] | None = None) -> requests.Response:
    r = requests.Response()
    r.status_code = code
    if lines is not None:
        r._content = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    else:
        r._content = json.dumps(body if body is not None else {}).encode()
    r._content_consumed = True  # type: ignore[attr-defined]
    r.headers = CaseInsensitiveDict({"Content-Type": "application/json", **(headers or {})})
    return r


def status(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None
           ) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "code": code, "reason": reason, "message": message}
    if causes:
        doc["details"] = {"causes": causes}
    return doc


@dataclass
class Sent:
    method: str
    url: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any
    kwargs: dict[str, Any]


@dataclass
class FakeSession:
    answers: list[requests.Response | Exception] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    trust_env: bool = True

    def request(self, method: str, url: str, *, params: Any = None, data: Any = None,
                headers: Any = None, **kwargs: Any) -> requests.Response:
        self.sent.append(Sent(method, url, dict(params or {}), dict(headers or {}),
                              json.loads(data) if data else None, kwargs))
        if not self.answers:
            raise AssertionError(f"unexpected request {method} {url}")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
