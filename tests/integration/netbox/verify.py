"""Check, against the running test NetBox, the HTTP behaviour the IPAM plugin relies on.

    bash tests/integration/netbox/up.sh
    /var/tmp/machine-agent-netbox/venv/bin/python tests/integration/netbox/verify.py

Stdlib only. Resets the test allocations before and after (like reset.sh). Prints each request
and the exact response, and exits non-zero if a behaviour differs from what README.md records.
"""

import json
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbapi import request, reset

ENV_FILE = os.path.join(os.environ.get('NETBOX_HOME', '/var/tmp/machine-agent-netbox'), 'env')
env = dict(
    line.split('=', 1) for line in Path(ENV_FILE).read_text().splitlines() if line and not line.startswith('#')
)
URL, TOKEN = env['NETBOX_URL'], env['NETBOX_TOKEN']
CF = env['NETBOX_CLAIM_KEY_FIELD']
failures = []


def call(method, path, body=None, show=True):
    status, resp = request(method, URL + path, TOKEN, body)
    if show:
        print(f'{method} {path} {json.dumps(body) if body is not None else ""}')
        print(f'  -> {status} {json.dumps(resp)[:600]}')
    return status, resp


def expect(what, cond):
    print(f'  [{"ok" if cond else "FAIL"}] {what}')
    if not cond:
        failures.append(what)


def parallel(n, fn):
    results = [None] * n
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main():
    reset(URL, TOKEN)
    v4, small, v6 = env['NETBOX_PREFIX_V4_ID'], env['NETBOX_PREFIX_V4_SMALL_ID'], env['NETBOX_PREFIX_V6_ID']
    rng = env['NETBOX_IP_RANGE_ID']

    print('\n== 1. allocate with a claim key')
    s, first = call('POST', f'/api/ipam/prefixes/{v4}/available-ips/',
                    {'status': 'active', 'description': 'node-a', 'custom_fields': {CF: 'claim-a'}})
    expect('201 Created', s == 201)
    expect('first address of 192.0.2.0/24 is 192.0.2.1/24 (the custom-field gateway is NOT reserved)',
           first.get('address') == '192.0.2.1/24')

    print('\n== 2. the same claim key again (same prefix, then another prefix, then plain create)')
    s, dup = call('POST', f'/api/ipam/prefixes/{v4}/available-ips/', {'custom_fields': {CF: 'claim-a'}})
    expect('400 Bad Request', s == 400)
    expect('body names the field',
           dup == {'__all__': [f"Custom field '{CF}' must have a unique value."]})
    s, dupl = call('POST', f'/api/ipam/prefixes/{v4}/available-ips/', [{'custom_fields': {CF: 'claim-a'}}])
    expect('posted as a list: 400, the same error in a list',
           s == 400 and dupl == [{'__all__': [f"Custom field '{CF}' must have a unique value."]}])
    s, _dup2 = call('POST', f'/api/ipam/prefixes/{v6}/available-ips/', {'custom_fields': {CF: 'claim-a'}})
    expect('400 on another prefix too (uniqueness is global, per object type)', s == 400)
    s, _dup3 = call('POST', '/api/ipam/ip-addresses/', {'address': '192.0.2.200/24', 'custom_fields': {CF: 'claim-a'}})
    expect('plain create: 400', s == 400)
    s, winner = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}=claim-a')
    expect('the winner is found by ?cf_<field>=<key>: exactly one result',
           s == 200 and winner['count'] == 1 and winner['results'][0]['id'] == first['id'])
    s, r = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}=claim', show=False)
    expect('the filter is exact (filter_logic=exact): ?cf_<field>=claim finds nothing', r['count'] == 0)
    s, r = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}=CLAIM-A', show=False)
    expect('and case-sensitive', r['count'] == 0)

    print('\n== 3. exhaust 198.51.100.0/28 (gateway .1 tagged `gateway`)')
    s, avail = call('GET', f'/api/ipam/prefixes/{small}/available-ips/?limit=0', show=False)
    print(f'  available before: {len(avail)} ({avail[0]["address"]} .. {avail[-1]["address"]})')
    expect('13 available: .2 .. .14 (network, broadcast and the tagged gateway excluded)',
           len(avail) == 13 and avail[0]['address'] == '198.51.100.2/28')
    got = []
    for i in range(len(avail)):
        s, r = call('POST', f'/api/ipam/prefixes/{small}/available-ips/',
                    {'custom_fields': {CF: f'exhaust-{i}'}}, show=False)
        expect(f'allocation {i}: 201', s == 201)
        got.append(r['address'])
    print(f'  allocated {len(got)}: {got[0]} .. {got[-1]}')
    s, full = call('POST', f'/api/ipam/prefixes/{small}/available-ips/', {'custom_fields': {CF: 'exhaust-x'}})
    expect('full prefix: 409 Conflict', s == 409)
    expect('409 body', full == {'detail': 'Insufficient resources are available to satisfy the request'})
    s, _full_dup = call('POST', f'/api/ipam/prefixes/{small}/available-ips/', {'custom_fields': {CF: 'exhaust-0'}})
    expect('full prefix and an already used key: 409 wins (checked first)', s == 409)

    print('\n== 4. IPv6 and the IP range')
    s, _r6 = call('POST', f'/api/ipam/prefixes/{v6}/available-ips/', {'custom_fields': {CF: 'claim-v6'}})
    expect('IPv6: 201', s == 201)
    s, rr = call('POST', f'/api/ipam/ip-ranges/{rng}/available-ips/', {'custom_fields': {CF: 'claim-range'}})
    expect('range: 201, first address 203.0.113.10/24', s == 201 and rr['address'] == '203.0.113.10/24')

    print('\n== 5. races: 10 parallel available-ips POSTs with ONE claim key')
    res = parallel(10, lambda i: request('POST', f'{URL}/api/ipam/prefixes/{v4}/available-ips/', TOKEN,
                                         {'custom_fields': {CF: 'race-1'}}))
    codes = sorted(s for s, _ in res)
    print(f'  statuses: {codes}')
    expect('exactly one 201, the rest 400', codes.count(201) == 1 and codes.count(400) == 9)
    s, r = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}=race-1', show=False)
    expect('exactly one address carries the key', r['count'] == 1)

    print('\n== 6. races: 10 parallel available-ips POSTs, distinct keys, spread over 2 prefixes')
    res = parallel(10, lambda i: request('POST', f'{URL}/api/ipam/prefixes/{(v4, v6)[i % 2]}/available-ips/',
                                         TOKEN, {'custom_fields': {CF: f'race-d-{i}'}}))
    addrs = [b['address'] for s, b in res if s == 201]
    expect(f'10 x 201, no duplicate address ({len(set(addrs))} distinct)',
           len(addrs) == 10 and len(set(addrs)) == 10)

    print('\n== 7. races: 10 parallel PLAIN creates (/api/ipam/ip-addresses/), ONE claim key, distinct addresses')
    res = parallel(10, lambda i: request('POST', f'{URL}/api/ipam/ip-addresses/', TOKEN,
                                         {'address': f'192.0.2.{100 + i}/24', 'custom_fields': {CF: 'race-plain'}}))
    codes = sorted(s for s, _ in res)
    s, r = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}=race-plain', show=False)
    print(f'  statuses: {codes}; addresses carrying the key: {r["count"]}')
    expect('exactly one 201 (REST create takes the same advisory lock)', codes.count(201) == 1 and r['count'] == 1)

    print('\n== 8. uniqueness applies to the exact string only')
    s, _ = call('POST', f'/api/ipam/prefixes/{v4}/available-ips/', {'custom_fields': {CF: 'CLAIM-A'}})
    expect('a key differing in case is a different key (201)', s == 201)

    print('\n== 9. an unknown filter is ignored, not refused')
    s, r = call('GET', f'/api/ipam/ip-addresses/?cf_{CF}__nonsense=1&limit=1', show=False)
    print(f'  GET ?cf_{CF}__nonsense=1 -> {s}, count {r["count"]} (every address)')
    expect('200 with unfiltered results', s == 200 and r['count'] > 1)

    print('\n== 10. a token that is wrong')
    s, r = request('GET', f'{URL}/api/status/', 'nbt_machineagent.' + 'x' * 40)
    print(f'GET /api/status/ (bad secret)\n  -> {s} {json.dumps(r)}')
    expect('403 for a bad v2 secret', s == 403)

    reset(URL, TOKEN)
    s, r = call('GET', '/api/ipam/ip-addresses/?limit=0', show=False)
    expect('after reset only the seed gateway address is left',
           [ip['id'] for ip in r['results']] == [int(env['NETBOX_PREFIX_V4_SMALL_GATEWAY_IP_ID'])])
    if failures:
        print(f'\n{len(failures)} FAILED: {failures}')
        return 1
    print('\nall checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
