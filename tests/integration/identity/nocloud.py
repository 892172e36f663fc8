"""Node roots as cloud-init leaves them after a NoCloud boot, rendered by Debian's
cloud-init itself (render_nocloud.py in the system Python), and AgentConfig user-data."""

from __future__ import annotations

from email.mime.application import MIMEApplication
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

from agent.host import Host

SCRIPT = Path(__file__).with_name("render_nocloud.py")
SYSTEM_PYTHON = "/usr/bin/python3"
"""Debian's cloud-init lives in the system Python; CI installs it (.ci/apt.d)."""
CLOUD_CONFIG = "#cloud-config\nhostname: node-7\n"


def agent_user_data(agent_yaml: str, *, filename: str = "machine-agent.yaml") -> bytes:
    """Multipart user-data as users write it: a cloud-config part and the agent's part
    (application/x-machine-agent+yaml, base64 as MIMEApplication encodes it)."""
    message = MIMEMultipart()
    message.attach(MIMEText(CLOUD_CONFIG, "cloud-config"))
    part = MIMEApplication(agent_yaml.encode(), "x-machine-agent+yaml")
    part.add_header("Content-Disposition", "attachment", filename=filename)
    message.attach(part)
    return message.as_bytes()


def seed_nocloud(root: Path, meta_data: str, user_data: bytes | str) -> Path:
    seed = root / "var/lib/cloud/seed/nocloud"
    seed.mkdir(parents=True, exist_ok=True)
    (seed / "meta-data").write_text(meta_data)
    data = user_data.encode() if isinstance(user_data, str) else user_data
    (seed / "user-data").write_bytes(data)
    return seed


def render_nocloud(root: Path, *, stages: int = 4) -> None:
    """Run cloud-init's NoCloud datasource and status bookkeeping on the seed under
    `root` (its first `stages` stages), writing /run/cloud-init and /var/lib/cloud there."""
    Host(root).run([SYSTEM_PYTHON, str(SCRIPT), str(root), "--stages", str(stages)],
                   timeout=120)


def nocloud_root(root: Path, meta_data: str, user_data: bytes | str, *,
                 stages: int = 4) -> Path:
    seed_nocloud(root, meta_data, user_data)
    render_nocloud(root, stages=stages)
    return root
