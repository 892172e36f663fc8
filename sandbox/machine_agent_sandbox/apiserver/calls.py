"""One request as the verbs see it (`Call`: who asks what of which resource) and its
answer (`Reply`); the patch content types and the finalizer the verbs know."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import status as st
from .auth import User
from .resources import ResourceType

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
FOREGROUND = "foregroundDeletion"


@dataclass
class Call:
    verb: str
    res: ResourceType
    version: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    query: dict[str, str] = field(default_factory=dict)
    user: User = field(default_factory=lambda: User("system:apiserver", ("system:masters",)))
    user_agent: str = ""
    warnings: list[str] = field(default_factory=list)
    # metadata errors found before the schema is checked, reported together with its own
    meta_errors: list[st.FieldError] = field(default_factory=list)

    @property
    def api_version(self) -> str:
        return self.res.api_version(self.version)

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun", "") == "All"

    @property
    def manager(self) -> str:
        return (self.query.get("fieldManager") or self.user_agent.split("/")[0][:128]
                or "unknown")


@dataclass
class Reply:
    code: int
    body: Obj
