"""Seed a test NetBox: the API user and token, and the IPAM data the machine-agent plugin tests use.

Run by up.sh with the NetBox venv's python (NETBOX_ROOT set, configuration in place):

    $NETBOX_VENV/bin/python seed.py KEY SECRET

Idempotent: every object is looked up by its natural key and brought to the wanted state.
Prints `NAME=value` lines for the env file on stdout; anything else goes to stderr.
"""

import os
import sys

os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'netbox.settings')

import django

django.setup()

from core.models import ObjectType  # noqa: E402
from extras.choices import (  # noqa: E402
    CustomFieldFilterLogicChoices,
    CustomFieldStatusChoices,
    CustomFieldTypeChoices,
)
from extras.models import CustomField, Tag  # noqa: E402
from ipam.models import IPAddress, IPRange, Prefix  # noqa: E402
from users.models import Token, User  # noqa: E402

USERNAME = 'machine-agent-test'
CLAIM_KEY_FIELD = 'machine_agent_claim_key'
GATEWAY_FIELD = 'gateway'
GATEWAY_TAG = 'gateway'

# Documentation ranges only (RFC 5737, RFC 3849).
PREFIXES = {
    # env name suffix: (prefix, gateway custom field value, description)
    'V4': ('192.0.2.0/24', '192.0.2.1', 'machine-agent tests: IPv4, gateway in the custom field'),
    'V4_SMALL': ('198.51.100.0/28', '', 'machine-agent tests: small IPv4, gateway as a tagged address'),
    'V6': ('2001:db8:10::/64', '2001:db8:10::1', 'machine-agent tests: IPv6, gateway in the custom field'),
    'RANGE_PARENT': ('203.0.113.0/24', '203.0.113.1', 'machine-agent tests: parent of the IP range'),
}
SMALL_GATEWAY = '198.51.100.1/28'
IP_RANGE = ('203.0.113.10/24', '203.0.113.20/24')


def log(msg):
    print(f'  seed: {msg}', file=sys.stderr)


def ensure_token(key, secret):
    user, created = User.objects.get_or_create(username=USERNAME)
    if created or not user.is_superuser or not user.is_active:
        user.is_superuser = True
        user.is_staff = True
        user.is_active = True
        user.set_unusable_password()
        user.save()
    token = Token.objects.filter(key=key).first()
    if token is not None and (token.user_id != user.pk or not token.validate(secret) or not token.is_active
                              or not token.write_enabled):
        log(f'replacing stale token {key}')
        token.delete()
        token = None
    if token is None:
        token = Token(version=2, user=user, key=key, token=secret, write_enabled=True,
                      description='machine-agent integration tests')
        token.full_clean()
        token.save()
        log(f'created v2 token {key} for {USERNAME}')
    return f'nbt_{key}.{secret}'


def ensure_custom_field(name, model, **attrs):
    cf = CustomField.objects.filter(name=name).first()
    if cf is None:
        cf = CustomField(name=name, **attrs)
        cf.full_clean()
        cf.save()
        log(f'created custom field {name}')
    else:
        changed = [k for k, v in attrs.items() if getattr(cf, k) != v]
        if changed:
            for k in changed:
                setattr(cf, k, attrs[k])
            cf.full_clean()
            cf.save()
            log(f'updated custom field {name}: {", ".join(changed)}')
    object_type = ObjectType.objects.get_for_model(model)
    if not cf.object_types.filter(pk=object_type.pk).exists():
        cf.object_types.add(object_type)
    cf.refresh_from_db()
    if cf.status != CustomFieldStatusChoices.STATUS_ACTIVE:
        sys.exit(f'seed: custom field {name} is {cf.status!r}, not active')
    return cf


def ensure_object(model, lookup, **attrs):
    """get-or-create by lookup, then bring attrs (custom_field_data merged) to the wanted values."""
    obj = model.objects.filter(**lookup).first()
    created = obj is None
    if created:
        obj = model(**lookup)
    cf_data = attrs.pop('custom_field_data', None)
    for k, v in attrs.items():
        setattr(obj, k, v)
    if cf_data is not None:
        obj.custom_field_data = {**(obj.custom_field_data or {}), **cf_data}
    obj.full_clean()
    obj.save()
    if created:
        log(f'created {model.__name__} {obj}')
    return obj


def main():
    key, secret = sys.argv[1], sys.argv[2]

    env = {'NETBOX_TOKEN': ensure_token(key, secret)}

    ensure_custom_field(
        CLAIM_KEY_FIELD, IPAddress,
        type=CustomFieldTypeChoices.TYPE_TEXT,
        label='machine-agent claim key',
        description='Idempotency key of the machine-agent allocation holding this address',
        unique=True,
        required=False,
        # The default ('loose') makes ?cf_<name>=<value> a case-insensitive *substring* match,
        # and offers no other lookups (__empty, __n, ...); exact matching is what a key needs.
        filter_logic=CustomFieldFilterLogicChoices.FILTER_EXACT,
    )
    ensure_custom_field(
        GATEWAY_FIELD, Prefix,
        type=CustomFieldTypeChoices.TYPE_TEXT,
        label='Gateway',
        description='Default gateway of hosts in this prefix',
        unique=False,
        required=False,
    )
    tag = ensure_object(Tag, {'slug': GATEWAY_TAG}, name=GATEWAY_TAG,
                        description='The default gateway of its prefix')

    for name, (cidr, gateway, description) in PREFIXES.items():
        prefix = ensure_object(Prefix, {'prefix': cidr, 'vrf': None}, status='active', is_pool=False,
                               mark_utilized=False, description=description,
                               custom_field_data={GATEWAY_FIELD: gateway or None})
        env[f'NETBOX_PREFIX_{name}_ID'] = prefix.pk
        env[f'NETBOX_PREFIX_{name}'] = cidr

    gw = ensure_object(IPAddress, {'address': SMALL_GATEWAY, 'vrf': None}, status='active',
                       description='machine-agent tests: gateway of 198.51.100.0/28')
    gw.tags.add(tag)
    env['NETBOX_PREFIX_V4_SMALL_GATEWAY_IP_ID'] = gw.pk
    env['NETBOX_PREFIX_V4_SMALL_GATEWAY'] = SMALL_GATEWAY

    ip_range = ensure_object(IPRange, {'start_address': IP_RANGE[0], 'end_address': IP_RANGE[1], 'vrf': None},
                             status='active', mark_populated=False, mark_utilized=False,
                             description='machine-agent tests: IP range')
    env['NETBOX_IP_RANGE_ID'] = ip_range.pk
    env['NETBOX_IP_RANGE'] = f'{IP_RANGE[0].split("/")[0]}-{IP_RANGE[1]}'

    env['NETBOX_CLAIM_KEY_FIELD'] = CLAIM_KEY_FIELD
    env['NETBOX_GATEWAY_FIELD'] = GATEWAY_FIELD
    env['NETBOX_GATEWAY_TAG'] = GATEWAY_TAG

    for k, v in env.items():
        print(f'{k}={v}')


if __name__ == '__main__':
    main()
