"""A local stand-in for the Kubernetes management API server — an emulator for tests and
the `machine-agent demo` sandbox, not a Kubernetes implementation.

It serves, over HTTPS with a generated CA and bearer tokens, the real Cluster API and
in-cluster IPAM CRDs (schemas validated, status subresource, generation, finalizers,
managedFields and server-side apply, watches with bookmarks and compaction) and the
built-in kinds a node bootstrap or a CNI manifest touches, with RBAC, fault injection,
request counters and the in-cluster IPAM provider's claim controller.

    with ApiServer(tmp_path) as api:
        token = api.make_token("system:serviceaccount:default:agent")
        requests.get(f"{api.url}/api/v1/namespaces", verify=api.ca_path,
                     headers={"Authorization": f"Bearer {api.admin_token}"})

Run as a process: `python -m agent.sandbox.apiserver --port N --state-dir D`.
Each module's docstring says what it simplifies relative to the real server.
"""

from .apiserver import ApiServer
from .auth import ADMIN_USER, MASTERS, User
from .faults import KINDS as FAULT_KINDS
from .faults import Fault

__all__ = ["ADMIN_USER", "FAULT_KINDS", "MASTERS", "ApiServer", "Fault", "User"]
