"""Seeds the test Nautobot (run by up.sh through `nautobot-server nbshell`): the API user
and its fixed token, and the custom fields the plugin relies on. Idempotent."""

import os

from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from nautobot.extras.models import CustomField
from nautobot.ipam.models import IPAddress, Prefix
from nautobot.users.models import Token

user, _ = get_user_model().objects.get_or_create(
    username="machine-agent", defaults={"is_superuser": True, "is_staff": True})
Token.objects.get_or_create(user=user, key=os.environ.get(
    "NAUTOBOT_TOKEN", "6d616368696e652d6167656e742d746573743031"))
for key, label, model in (("machine_agent_claim_key", "machine-agent claim key", IPAddress),
                          ("gateway", "Gateway", Prefix)):
    field, _ = CustomField.objects.get_or_create(
        key=key, defaults={"label": label, "type": "text", "filter_logic": "exact"})
    field.content_types.add(ContentType.objects.get_for_model(model))
print("seeded")
