"""CABPK's cloud-config is a cloud-init jinja template: rendered by the agent as Debian's
cloud-init renders it, with the instance data cloud-init itself wrote for a NoCloud seed,
for what real providers' templates ask for (CAPO's provider-id from `instance_id`, the
node name from `local_hostname`, `{% %}` statements); what the instance data cannot
answer is refused naming the variable, where cloud-init would write a placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import AgentError
from agent.host import Host
from agent.phases.join.cloudconfig import parse_cloud_config
from agent.phases.join.template import read_instance_data, render_cloud_config
from tests.integration.identity.nocloud import SYSTEM_PYTHON, nocloud_root

SCRIPT = Path(__file__).with_name("render_jinja.py")
META = ("instance-id: 8c1f7e0a-3c2b-4f7e-9d1e-2a5b6c7d8e9f\nlocal-hostname: worker-7\n"
        "availability-zone: zone-b\n")
# As CAPO's and CABPK's templates write it (KubeadmConfig files, kubeletExtraArgs,
# preKubeadmCommands), with the statements cloud-init's jinja allows.
TEMPLATE = """## template: jinja
#cloud-config
{% set zone = v1.availability_zone | default('none') %}

write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      discovery:
        bootstrapToken:
          apiServerEndpoint: 192.0.2.10:6443
          token: abcdef.0123456789abcdef
          unsafeSkipCAVerification: true
      kind: JoinConfiguration
      nodeRegistration:
        kubeletExtraArgs:
        - name: provider-id
          value: openstack:///'{{ instance_id }}'
        name: '{{ local_hostname }}'
-   path: /etc/node-facts
    content: |
      zone={{ zone }} host={{ ds.meta_data.local_hostname }} id={{ v1.instance_id }}
{% if ds.meta_data.rack is defined %}
      rack={{ ds.meta_data.rack }}
{% endif %}
      parts={% for part in local_hostname.split('-') %}{{ part }};{% endfor %}

runcmd:
  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml'
"""


def cloud_init_renders(root: Path, text: str) -> str:
    payload = root / "payload"
    payload.write_text(text)
    result = Host(root).run([SYSTEM_PYTHON, str(SCRIPT), str(root), str(payload)],
                            timeout=120)
    return result.stdout


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return nocloud_root(tmp_path, META, "#cloud-config\n{}\n")


def test_the_template_renders_as_cloud_init_renders_it(root: Path) -> None:
    instance = read_instance_data(Host(root))
    assert instance is not None
    ours = render_cloud_config(TEMPLATE, instance, node_name="not-this")
    assert ours == cloud_init_renders(root, TEMPLATE)
    parsed = parse_cloud_config(TEMPLATE, node_name="not-this", instance=instance)
    join = parsed.file("/run/kubeadm/kubeadm-join-config.yaml")
    assert join is not None
    text = join.content.decode()
    assert "value: openstack:///'8c1f7e0a-3c2b-4f7e-9d1e-2a5b6c7d8e9f'" in text
    assert "name: 'worker-7'" in text
    facts = parsed.file("/etc/node-facts")
    assert facts is not None and facts.content.decode() == (
        "zone=zone-b host=worker-7 id=8c1f7e0a-3c2b-4f7e-9d1e-2a5b6c7d8e9f\nparts=worker;7;\n")


def test_a_variable_the_instance_data_does_not_hold_is_refused_by_name(root: Path) -> None:
    text = TEMPLATE.replace("{{ instance_id }}", "{{ ds.meta_data.server_uuid }}")
    # cloud-init writes a placeholder into the data and goes on
    assert "openstack:///'CI_MISSING_JINJA_VAR/server_uuid'" in cloud_init_renders(root, text)
    with pytest.raises(AgentError) as info:
        parse_cloud_config(text, node_name="worker-7", instance=read_instance_data(Host(root)))
    assert str(info.value).startswith(
        "the bootstrap data's jinja template uses 'ds.meta_data.server_uuid', which this "
        "node's cloud-init instance data (/run/cloud-init/instance-data-sensitive.json) "
        "does not hold")
    assert "cloud-init query --all" in info.value.hint
