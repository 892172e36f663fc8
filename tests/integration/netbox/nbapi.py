"""Tiny stdlib-only REST helper for the NetBox test scripts (no curl on a bare Debian 12).

    python3 nbapi.py wait URL TOKEN TIMEOUT   # poll GET /api/status/ until 200 (bounded)
    python3 nbapi.py port-free HOST PORT      # exit 0 if nothing listens on HOST:PORT
    python3 nbapi.py reset URL TOKEN          # delete test allocations (see reset.sh)

Only ever talks to the loopback URL it is given.
"""

import ipaddress
import json
import socket
import sys
import time
import urllib.error
import urllib.request

CLAIM_KEY_FIELD = 'machine_agent_claim_key'
GATEWAY_TAG = 'gateway'
# The seed prefixes (seed.py): every address inside them that is not tagged `gateway` is a test
# allocation.
SEED_PREFIXES = ('192.0.2.0/24', '198.51.100.0/28', '2001:db8:10::/64', '203.0.113.0/24')


def request(method, url, token, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={
        'Authorization': f'Bearer {token}',
        'Accept': 'application/json',
        'Content-Type': 'application/json',
    })
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors='replace')


def wait(url, token, timeout):
    deadline = time.monotonic() + float(timeout)
    start = time.monotonic()
    last, next_report = None, start + 5
    while True:
        try:
            status, body = request('GET', f'{url}/api/status/', token, timeout=5)
            if status == 200:
                print(f'  ready after {time.monotonic() - start:.1f}s: netbox {body.get("netbox-version")}')
                return 0
            last = f'HTTP {status}: {str(body)[:200]}'
        except (OSError, urllib.error.URLError) as e:
            last = str(e)
        now = time.monotonic()
        if now >= deadline:
            print(f'  not ready after {timeout}s; last answer: {last}', file=sys.stderr)
            return 1
        if now >= next_report:
            print(f'  still waiting ({now - start:.0f}s); last: {last}')
            next_report = now + 5
        time.sleep(0.25)


def port_free(host, port):
    with socket.socket() as s:
        s.settimeout(1)
        return 0 if s.connect_ex((host, int(port))) != 0 else 1


def _addresses(url, token, query):
    found, next_url = [], f'{url}/api/ipam/ip-addresses/?{query}&limit=1000'
    while next_url:
        status, body = request('GET', next_url, token)
        if status != 200:
            raise SystemExit(f'reset: GET {next_url}: HTTP {status}: {body}')
        found += body['results']
        next_url = body['next']
    return found


def _is_test_allocation(ip):
    """Decided here as well as by the query: NetBox silently ignores a filter it does not know."""
    tags = {t['slug'] for t in ip.get('tags') or []}
    if ip.get('custom_fields', {}).get(CLAIM_KEY_FIELD):
        return True
    host = ipaddress.ip_interface(ip['address']).ip
    in_seed = any(host in ipaddress.ip_network(p) for p in SEED_PREFIXES)
    return in_seed and GATEWAY_TAG not in tags


def reset(url, token):
    found = _addresses(url, token, f'cf_{CLAIM_KEY_FIELD}__empty=false')
    parents = '&'.join(f'parent={p}' for p in SEED_PREFIXES)
    found += _addresses(url, token, f'{parents}&tag__n={GATEWAY_TAG}')
    ids = sorted({ip['id'] for ip in found if _is_test_allocation(ip)})
    if ids:
        status, body = request('DELETE', f'{url}/api/ipam/ip-addresses/', token,
                               [{'id': i} for i in ids], timeout=60)
        if status != 204:
            raise SystemExit(f'reset: bulk DELETE: HTTP {status}: {body}')
    print(f'  reset: deleted {len(ids)} IP address(es)')
    return 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == 'wait':
        return wait(*args)
    if cmd == 'port-free':
        return port_free(*args)
    if cmd == 'reset':
        return reset(*args)
    raise SystemExit(f'unknown command {cmd}')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
