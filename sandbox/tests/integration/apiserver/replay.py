"""Replays the recorded kube-apiserver corpus (corpus/, see its README.md) against a server
and compares every answer with the real server's.

A case is a list of steps (request, recorded response). The replayer sends each request
with the target's own uids, resourceVersions and continue tokens in place of the recorded
ones (the `refs` of a step name where each came from; bodies echoed back are rewritten
through a map from every recorded value to the target's value at the same place), then
normalises the target's answer as the corpus does (volatile values replaced by <uid>,
<rv>, <ts>, <continue>) and compares it with the recorded `*_normalized` answer.

Checks per step: the status code; the media type; the `Warning` header (where either
side sent one); the body (Status reason/message/details included) without
managedFields; managedFields on their own; a watch's whole event sequence. Known
nondeterminism of the real server is tolerated as the README says: the order of
`resources` in a CRD group-version's discovery, the order of SelfSubjectRulesReview rules;
and one more: managedFields entries are ordered by their time to the second, so entries
written within one second when recorded may straddle a second when replayed (the same
entries, in the order the rule gives for the target's own times, match). Two values
name the server itself and are blanked on both sides: /api's serverAddressByClientCIDRs
(the recording server's advertise address and port) and the `hash` of each /openapi/v3
entry (a SHA-512 of the OpenAPI document behind it; the stand-in's documents hold its CRD
schemas, not the real server's generated ones, so their hashes differ while the paths and
URL shape are compared). A Table's `date` cells (ages, rounded to the second) are
blanked as timestamps are.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import requests
import yaml

Obj = dict[str, Any]

CORPUS = Path(__file__).parent / "corpus"
AGENT_CORPUS = Path(__file__).parent / "agent-corpus"
"""The requests the agent itself sends (agent_requests.py), in the same format."""
_VOLATILE = {"uid": "<uid>", "resourceVersion": "<rv>", "creationTimestamp": "<ts>",
             "deletionTimestamp": "<ts>"}
_MESSAGE_RVS = (
    re.compile(r"(in record \()(\d+)(\))"),
    re.compile(r"(too old resource version: \d+ \()(\d+)(\))"),
    re.compile(r"(current: )(\d+)()"),
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_SUBSTITUTED = ("uid", "resourceVersion", "continue")


def cases() -> list[Path]:
    return sorted([*CORPUS.glob("*.json"), *AGENT_CORPUS.glob("*.json")],
                  key=lambda p: p.stem)


def load(path: Path) -> Obj:
    case: Obj = json.loads(path.read_text())
    return case


# --- normalisation ---------------------------------------------------------------------


def _message(text: str) -> str:
    for pattern in _MESSAGE_RVS:
        text = pattern.sub(r"\1<rv>\3", text)
    return _UUID.sub(lambda m: m.group(0) if m.group(0) == _ZERO_UUID else "<uid>", text)


def normalize(value: Any, key: str = "", parent: str = "") -> Any:
    """The corpus's normalisation of a decoded body or watch event."""
    if isinstance(value, dict):
        out: Obj = {}
        for k, v in value.items():
            if k in _VOLATILE and isinstance(v, str) and v:
                out[k] = _VOLATILE[k]
            elif k == "time" and parent == "managedFields" and isinstance(v, str):
                out[k] = "<ts>"
            elif k == "continue" and key == "metadata" and isinstance(v, str) and v:
                out[k] = "<continue>"
            elif k.startswith("k:"):  # a managedFields key naming an owner by its uid
                out[_UUID.sub("<uid>", k)] = normalize(v, k, key)
            else:
                out[k] = normalize(v, k, key)
        return out
    if isinstance(value, list):
        return [normalize(v, key, key) for v in value]
    if isinstance(value, str) and key == "message":
        return _message(value)
    return value


_OPENAPI_HASH = re.compile(r"\?hash=[0-9A-F]{128}$")


def _tolerate(body: Any) -> Any:
    """Sort what the real server itself returns in no fixed order; blank what cannot be
    the same on another server (see the module's docstring)."""
    if not isinstance(body, dict):
        return body
    body = copy.deepcopy(body)
    kind = body.get("kind")
    for cidr in body.get("serverAddressByClientCIDRs") or []:
        cidr["serverAddress"] = "<address>"
    if set(body) == {"paths"} and isinstance(body["paths"], dict):
        for entry in body["paths"].values():
            if isinstance(entry, dict) and "serverRelativeURL" in entry:
                entry["serverRelativeURL"] = _OPENAPI_HASH.sub(
                    "?hash=<hash>", entry["serverRelativeURL"])
    if kind == "Table":
        # a `date` column shows the object's age, rounded to the second: time-dependent
        dates = [i for i, c in enumerate(body.get("columnDefinitions") or [], start=0)
                 if c.get("type") == "date"]
        for row in body.get("rows") or []:
            for i in dates:
                if i < len(row.get("cells") or []):
                    row["cells"][i] = "<age>"
    if kind == "APIResourceList" and ".x-k8s.io/" in str(body.get("groupVersion")):
        body["resources"] = sorted(body.get("resources") or [], key=lambda r: r.get("name"))
    if kind == "APIGroupDiscoveryList":
        for group in body.get("items") or []:
            if group.get("metadata", {}).get("name", "").endswith(".x-k8s.io"):
                for version in group.get("versions") or []:
                    version["resources"] = sorted(version.get("resources") or [],
                                                  key=lambda r: r.get("resource"))
    if kind == "SelfSubjectRulesReview":
        status = body.get("status") or {}
        for rules in ("resourceRules", "nonResourceRules"):
            if rules in status:
                status[rules] = sorted(status[rules], key=lambda r: json.dumps(r, sort_keys=True))
    return body


def split_managed_fields(value: Any) -> tuple[Any, list[Any]]:
    """(value without any metadata.managedFields, the managedFields found, in order)."""
    found: list[Any] = []

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                if k == "managedFields" and isinstance(item, list):
                    found.append(item)
                    continue
                out[k] = walk(item)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value), found


# --- replaying -------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any = None         # decoded JSON
    text: str | None = None  # anything else
    events: list[Obj] | None = None  # a watch's events (status 200)


@dataclass
class Target:
    """Where to replay: the server's URL, how to trust it, and a bearer token for each
    of the corpus's token names (None: no Authorization header)."""
    base: str
    verify: str | bool
    tokens: dict[str, str | None]
    before_case: Callable[[str], None] = lambda case: None


SideAction = Callable[["Replay"], None]


@dataclass
class Replay:
    target: Target
    case: Obj
    answers: list[Answer] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)  # recorded -> target value

    def __post_init__(self) -> None:
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.verify = self.target.verify

    # requests made outside the recorded steps (the corpus's notes)
    def admin(self, method: str, path: str, body: Obj | None = None,
              content_type: str = "application/merge-patch+json") -> None:
        headers = {"Authorization": f"Bearer {self.target.tokens['admin']}",
                   "User-Agent": self.case.get("user_agent", "corpus-recorder/1.0"),
                   "Content-Type": content_type}
        self.session.request(method, self.target.base + path, headers=headers, timeout=10,
                             data=json.dumps(body) if body is not None else None)

    def run(self, side_actions: dict[int, SideAction] | None = None) -> list[Answer]:
        self.target.before_case(self.case["case"])
        for index, step in enumerate(self.case["steps"]):
            action = (side_actions or {}).get(index)
            timer = None
            if action is not None:
                timer = threading.Timer(0.5, action, args=(self,))
                timer.start()
            try:
                answer = self._send(step)
            finally:
                if timer is not None:
                    timer.join()
            self.answers.append(answer)
            self._learn(step["response"], answer)
        return self.answers

    def _send(self, step: Obj) -> Answer:
        request = step["request"]
        headers = dict(request.get("headers") or {})
        token = self.target.tokens.get(request.get("token", "none"))
        if token:
            headers["Authorization"] = f"Bearer {token}"
        path = request["path"]
        data: bytes | None = None
        if "body" in request:
            body = self._substitute(copy.deepcopy(request["body"]))
            for ref in request.get("refs") or []:
                if ref["where"].startswith("body:"):
                    _set_pointer(body, ref["where"][5:], self._resolve(ref["from"]))
            data = json.dumps(body).encode()
        elif "body_text" in request:
            data = request["body_text"].encode()
        path = self._query(path, request.get("refs") or [])
        watch = bool(step.get("watch"))
        resp = self.session.request(request["method"], self.target.base + path,
                                    headers=headers, data=data, stream=watch,
                                    timeout=_timeout(path))
        with resp:
            return _answer(resp, watch)

    def _query(self, path: str, refs: list[Obj]) -> str:
        parts = urlsplit(path)
        query = parse_qsl(parts.query, keep_blank_values=True)
        wanted = {ref["where"][6:]: self._resolve(ref["from"]) for ref in refs
                  if ref["where"].startswith("query:")}
        if not wanted:
            return path
        query = [(k, str(wanted.get(k, v))) for k, v in query]
        return parts.path + "?" + urlencode(query, quote_via=quote, safe="")

    def _resolve(self, ref: str) -> Any:
        """`steps[N].response.body.a.b` on the target's own answers."""
        match = re.fullmatch(r"steps\[(\d+)\]\.response\.body\.(.+)", ref)
        assert match, f"unsupported ref {ref}"
        index, parts = int(match.group(1)), match.group(2).split(".")
        value: Any = self.answers[index].body
        recorded: Any = self.case["steps"][index]["response"]["body"]
        for part in parts:
            recorded = recorded[part]
            value = value.get(part) if isinstance(value, dict) else None
        # a target that lacks the value gets the recorded one (and fails that step's checks)
        return recorded if value is None else value

    def _substitute(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self._substitute(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self._substitute(v, key) for v in value]
        if key in _SUBSTITUTED and isinstance(value, str):
            return self.mapping.get(value, value)
        return value

    def _learn(self, recorded: Obj, answer: Answer) -> None:
        def walk(rec: Any, act: Any, key: str = "") -> None:
            if isinstance(rec, dict) and isinstance(act, dict):
                for k, v in rec.items():
                    if k in act:
                        walk(v, act[k], k)
            elif isinstance(rec, list) and isinstance(act, list):
                for r, a in zip(rec, act, strict=False):
                    walk(r, a, key)
            elif key in _SUBSTITUTED and isinstance(rec, str) and isinstance(act, str) \
                    and rec and act:
                self.mapping.setdefault(rec, act)

        walk(recorded.get("body"), answer.body)
        walk(recorded.get("events"), answer.events)


def _timeout(path: str) -> float:
    seconds = dict(parse_qsl(urlsplit(path).query)).get("timeoutSeconds")
    return float(seconds) + 10 if seconds else 15.0


def _answer(resp: requests.Response, watch: bool) -> Answer:
    headers = {k.title(): v for k, v in resp.headers.items()}
    media = headers.get("Content-Type", "")
    if watch and resp.status_code == 200:
        events = [json.loads(line) for line in resp.iter_lines() if line.strip()]
        return Answer(resp.status_code, headers, events=events)
    raw = resp.content
    if "json" in media or (media.startswith("text/plain") and raw[:1] == b"{"):
        try:
            return Answer(resp.status_code, headers, body=json.loads(raw))
        except ValueError:
            pass
    if "yaml" in media:
        return Answer(resp.status_code, headers, body=yaml.safe_load(raw))
    return Answer(resp.status_code, headers, text=raw.decode(errors="replace"))


def _set_pointer(body: Obj, pointer: str, value: Any) -> None:
    parts = pointer.strip("/").split("/")
    node: Any = body
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


# --- comparing -------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    case: str
    step: int
    label: str
    aspect: str
    expected: Any
    actual: Any

    @property
    def ok(self) -> bool:
        return bool(self.expected == self.actual)

    @property
    def id(self) -> str:
        return f"{self.case}[{self.step}]:{self.aspect}"

    def describe(self) -> str:
        exp = json.dumps(self.expected, sort_keys=True)[:1500]
        act = json.dumps(self.actual, sort_keys=True)[:1500]
        return f"{self.id} ({self.label})\n  real:     {exp}\n  stand-in: {act}"


def _media(headers: dict[str, str]) -> str:
    return headers.get("Content-Type", "").split(";")[0].strip()


def _entry_key(entry: Obj) -> tuple[str, ...]:
    return tuple(str(entry.get(k, "")) for k in ("operation", "manager", "apiVersion",
                                                 "subresource"))


def _same_entries_in_time_order(expected: list[Any], actual: list[Any],
                                raw: list[Any]) -> bool:
    """managedFields are ordered by (operation, time to the second, manager, ...): two
    entries written within one second on the real server may straddle a second on a
    replay. Tolerated when the entries are the same and the target's own order follows
    that rule with its own times."""
    if len(expected) != len(actual):
        return False
    for exp, act, own in zip(expected, actual, raw, strict=True):
        if sorted(exp, key=_entry_key) != sorted(act, key=_entry_key):
            return False
        rule = [(e.get("operation", ""), e.get("time", ""), *_entry_key(e)[1:]) for e in own]
        if rule != sorted(rule):
            return False
    return True


def compare(case: Obj, answers: list[Answer]) -> list[Check]:
    checks: list[Check] = []
    for index, (step, answer) in enumerate(zip(case["steps"], answers, strict=True)):
        rec = step["response"]

        def check(aspect: str, expected: Any, actual: Any, index: int = index,
                  step: Obj = step) -> None:
            checks.append(Check(case["case"], index, step["label"], aspect, expected, actual))

        check("status", rec["status"], answer.status)
        rec_headers = {k.title(): v for k, v in rec.get("headers", {}).items()}
        check("content-type", _media(rec_headers), _media(answer.headers))
        if "Warning" in rec_headers or "Warning" in answer.headers:
            check("warning", rec_headers.get("Warning"), answer.headers.get("Warning"))
        if "events_normalized" in rec and rec["status"] == 200:
            actual_events = None if answer.events is None else normalize(answer.events)
            check("events", rec["events_normalized"], actual_events)
        elif "body_normalized" in rec:
            expected, expected_mf = split_managed_fields(_tolerate(rec["body_normalized"]))
            actual, actual_mf = split_managed_fields(_tolerate(normalize(answer.body)))
            if answer.body is None:
                actual = answer.text
            check("body", expected, actual)
            if expected_mf or actual_mf:
                _, raw_mf = split_managed_fields(answer.body)
                if _same_entries_in_time_order(expected_mf, actual_mf, raw_mf):
                    actual_mf = expected_mf
                check("managedFields", expected_mf, actual_mf)
        elif "body_text" in rec:
            actual_text = answer.text if answer.text is not None else answer.body
            check("body", rec["body_text"], actual_text)
    return checks


# --- the corpus's notes: what the recorder did outside the recorded steps ---------------

MACHINES = "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines"


def _annotate_filtered_out(replay: Replay) -> None:
    replay.admin("PATCH", f"{MACHINES}/case-l-norole",
                 {"metadata": {"annotations": {"touched": "yes"}}})


def _live_changes(replay: Replay) -> None:
    replay.admin("PATCH", f"{MACHINES}/case-l-m1", {"metadata": {"labels": {"live": "1"}}})
    replay.admin("DELETE", f"{MACHINES}/case-l-m3")


def side_actions(case: Obj) -> dict[int, SideAction]:
    """The steps during which the recorder changed something (README notes of case l)."""
    actions: dict[int, SideAction] = {}
    for index, step in enumerate(case["steps"]):
        if step["label"].startswith("WATCH allowWatchBookmarks=true, timeoutSeconds=5, a "
                                    "filtered-out change"):
            actions[index] = _annotate_filtered_out
        elif step["label"].startswith("live WATCH"):
            actions[index] = _live_changes
    return actions


def replay_case(path: Path, target: Target) -> list[Check]:
    case = load(path)
    answers = Replay(target, case).run(side_actions(case))
    return compare(case, answers)

