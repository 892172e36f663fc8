"""What every request handler shares: the objects, the tokens and rules, the faults."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .auth import Tokens
from .clientcerts import ClientCA
from .faults import Counters, Faults
from .objects import Objects
from .rbac import Authorizer


@dataclass
class Context:
    objects: Objects
    tokens: Tokens
    authorizer: Authorizer
    faults: Faults
    counters: Counters
    bookmark_interval: float
    address: str = ""
    client_ca: ClientCA | None = None
    """Verifies and issues client certificates (set once the server's TLS is made)."""
    stop: threading.Event = field(default_factory=threading.Event)
