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

Run as a process: `python -m machine_agent_sandbox.apiserver --port N --state-dir D`.

Checked against a real kube-apiserver v1.36.2:
sandbox/tests/integration/apiserver/test_differential.py replays a recorded corpus of its
answers (CRUD, validation, SSA and managedFields, watch and bookmarks, pagination, dryRun,
deletion and finalizers, events, RBAC reviews, discovery) and every check matches. It
renews control-plane Leases every 2 s, so a list's resourceVersion moves as on a real
cluster.

Simplified relative to kube-apiserver (details in each module's docstring): no
conversion between served versions (apiVersion is relabelled and the read version's
schema prunes); no CEL validation rules; strategic merge patch on built-in kinds is a
JSON merge patch; an Exact list of a revision not yet compacted returns the current
objects; built-in kinds other than those resources.py lists are advertised in discovery
but not served; RBAC without aggregation or default roles beyond what
SelfSubjectRulesReview reports, non-resource URLs open to all; token expiry not
enforced; JSON and YAML bodies, protobuf for DeleteOptions and for the built-in kinds
Cluster API's providers write to a workload cluster (Secrets, ConfigMaps, RBAC: see
protobuf.py), as controller-runtime sends them.

Note for clients built on `requests`: REQUESTS_CA_BUNDLE (set on these machines)
silently overrides `Session.verify`; pass `verify=` per request or set
`session.trust_env = False` to trust the stand-in's CA.
"""

from .apiserver import ApiServer
from .auth import ADMIN_USER, MASTERS, User
from .faults import KINDS as FAULT_KINDS
from .faults import Fault

__all__ = ["ADMIN_USER", "FAULT_KINDS", "MASTERS", "ApiServer", "Fault", "User"]
