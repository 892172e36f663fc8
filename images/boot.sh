#!/usr/bin/env bash
# Boots an image made by `images/build.sh image --out DIR` under qemu: the kernel and
# initrd directly (no boot loader), the root file system as a virtio disk in snapshot
# mode (every boot is a first boot; the image file is never changed), one virtio NIC on
# a user-mode network with restrict=on (nothing leaves the VM).
#
#   images/boot.sh DIR [SERIAL_LOG] [EXTRA KERNEL ARGUMENTS...]
#
# Without SERIAL_LOG the serial console is this terminal (Ctrl-a x quits). Software
# emulation unless ACCEL=kvm. EXTRA_NICS=N adds N more virtio NICs (eth1...; MACs
# 52:54:00:00:01:01...), each on its own restricted user-mode network; REBOOT=yes lets
# the guest reboot (the snapshot's writes survive it; qemu exits at power-off).
set -euo pipefail
dir=$1
shift
serial=(-serial mon:stdio)
if (($#)); then
  serial=(-serial "file:$1")
  shift
fi
extra=()
for ((i = 1; i <= ${EXTRA_NICS:-0}; i++)); do
  extra+=(-netdev "user,id=net$i,restrict=on"
          -device "virtio-net-pci,netdev=net$i,mac=52:54:00:00:01:$(printf %02x "$i")")
done
reboot=(-no-reboot)
[ "${REBOOT:-no}" = yes ] && reboot=()
exec qemu-system-x86_64 \
  -accel "${ACCEL:-tcg}" -m "${MEMORY:-1024}" -smp "${CPUS:-2}" \
  -machine q35 -vga none -display none -monitor none "${serial[@]}" "${reboot[@]}" \
  -kernel "$dir/vmlinuz" -initrd "$dir/initrd.img" \
  -append "$(cat "$dir/cmdline") $*" \
  -drive "file=$dir/rootfs.raw,format=raw,if=virtio,snapshot=on" \
  -netdev user,id=net0,restrict=on,net=192.0.2.0/24,host=192.0.2.1,dhcpstart=192.0.2.200 \
  -device virtio-net-pci,netdev=net0 "${extra[@]}"
