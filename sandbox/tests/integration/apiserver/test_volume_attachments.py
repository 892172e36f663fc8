"""VolumeAttachments (storage.k8s.io/v1) are served: Cluster API's Machine deletion lists
a Node's attachments before it lets the Machine go, and fails on a server without them."""

from __future__ import annotations

from sandbox.tests.integration.apiserver.kubeclient import Kube

VA = "/apis/storage.k8s.io/v1/volumeattachments"


def test_volume_attachments_are_served_and_listed(admin: Kube) -> None:
    body = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": "va-test-worker-0"},
            "spec": {"attacher": "csi.example.com", "nodeName": "worker-0",
                     "source": {"persistentVolumeName": "pv-0"}}}
    admin.check(admin.post(VA, json=body), 201)
    try:
        listed = admin.check(admin.get(VA), 200)
        assert listed["kind"] == "VolumeAttachmentList"
        assert "va-test-worker-0" in [v["metadata"]["name"] for v in listed["items"]]
    finally:
        admin.delete(f"{VA}/va-test-worker-0")
