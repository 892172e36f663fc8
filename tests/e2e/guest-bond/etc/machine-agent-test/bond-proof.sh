#!/bin/sh
# Boot test only (tests/e2e/test_image_bond_boot.py). First boot: the agent applies the
# bond, VLAN and bridge live (machine-agent run --only network), the kernel state is
# kept, and the guest reboots (qemu keeps the snapshot's writes across a guest reboot).
# Second boot: networkd alone recreates them from the agent's files; both states are
# printed between markers on the serial console and the guest powers off.
set -u
dir=/var/lib/bond-proof
dump() {  # $1: file prefix; the commands of tests/integration/network/realnet.py
  ip -j -d link show >"$1.link"
  ip -j addr show >"$1.addr"
  ip -4 -j route show table all >"$1.route4"
  ip -6 -j route show table all >"$1.route6"
}
if [ ! -e "$dir/live.link" ]; then
  mkdir -p "$dir"
  /opt/machine-agent/bin/machine-agent run --only network \
    -c /etc/machine-agent-test/bond.yaml >"$dir/agent.log" 2>&1
  echo "$?" >"$dir/agent.exit"
  dump "$dir/live"
  ls /etc/systemd/network >"$dir/files"
  systemctl --no-block reboot
  exit 0
fi
# bounded: networkd brings up what the files say, or the test reports what it has
/lib/systemd/systemd-networkd-wait-online -i br0:routable -i bond0:carrier \
  -i bond0.100:carrier --timeout=90 >"$dir/wait.log" 2>&1
echo "$?" >"$dir/wait.exit"
sleep 2  # IPv6 DAD of the bridge's address
dump "$dir/boot"
echo BOND-PROOF-BEGIN
for f in agent.exit agent.log files wait.exit wait.log live.link live.addr live.route4 \
         live.route6 boot.link boot.addr boot.route4 boot.route6; do
  printf 'BOND-PROOF %s %s\n' "$f" "$(base64 -w0 "$dir/$f")"
done
echo BOND-PROOF-END
systemctl --no-block poweroff
