"""ServiceAccount tokens from the TokenRequest API are bound to their account, as
kube-apiserver's token validator binds them (pkg/serviceaccount/claims.go): the user is
the account, with its uid; deleting the account refuses its tokens with 401, and a new
account of the same name (another uid) does not bring them back. The tests revoke a
node's credential this way, against the stand-in and a real server alike. (A real server
caches a token's successful authentication for 10 s, hence the bounded waits.)"""

from __future__ import annotations

from sandbox.tests.integration.apiserver.kubeclient import Kube, wait_until

REFUSAL_WAIT = 60.0
"""A real server's 10 s token cache and its ServiceAccount informer's lag, with room."""


def _who(client: Kube) -> dict[str, object]:
    review = client.check(client.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}), 201)
    info: dict[str, object] = review["status"]["userInfo"]
    return info


def _refused(client: Kube, ns: str) -> bool:
    return client.get(f"/api/v1/namespaces/{ns}/serviceaccounts/agent").status_code == 401


def test_the_token_is_the_accounts_user_with_its_uid(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    user, agent = service_account
    account = admin.check(admin.get(f"/api/v1/namespaces/{ns}/serviceaccounts/agent"), 200)
    who = _who(agent)
    assert who["username"] == user
    assert who["uid"] == account["metadata"]["uid"]
    groups = who["groups"]
    assert isinstance(groups, list)
    assert {"system:serviceaccounts", f"system:serviceaccounts:{ns}",
            "system:authenticated"} <= set(groups)


def test_deleting_the_account_refuses_its_tokens_with_401(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    _user, agent = service_account
    admin.check(admin.delete(f"/api/v1/namespaces/{ns}/serviceaccounts/agent"), 200)
    wait_until(lambda: _refused(agent, ns), timeout=REFUSAL_WAIT, every=0.2)
    reply = agent.check(agent.get(f"/api/v1/namespaces/{ns}/serviceaccounts"), 401)
    assert (reply["kind"], reply["reason"], reply["message"], reply["code"]) == (
        "Status", "Unauthorized", "Unauthorized", 401)


def test_a_new_account_of_the_same_name_does_not_revive_the_old_token(
        admin: Kube, ns: str, service_account: tuple[str, Kube]) -> None:
    _user, agent = service_account
    admin.check(admin.delete(f"/api/v1/namespaces/{ns}/serviceaccounts/agent"), 200)
    admin.check(admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "agent"}}), 201)
    wait_until(lambda: _refused(agent, ns), timeout=REFUSAL_WAIT, every=0.2)
    agent.check(agent.get(f"/api/v1/namespaces/{ns}/serviceaccounts"), 401)
