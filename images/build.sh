#!/usr/bin/env bash
# Builds a bootable golden image (Debian 12 or 13, Ubuntu 24.04) with machine-agent baked in.
#
#   images/build.sh base [SUITE]
#       make sure the cached debootstrap tree of the image's SUITE (default bookworm)
#       exists; print its path
#   images/build.sh wheels DIR
#       the agent's wheel and its dependencies' wheels (for images/ansible)
#   images/build.sh deb DIR [SUITE]
#       DIR/machine-agent_VERSION+DISTRO_amd64.deb for SUITE (bookworm, the default;
#       trixie; noble), built in a debootstrap tree of it: the agent in a venv under
#       /opt/machine-agent on that distribution's python3 (its dependencies as
#       requirements/runtime.txt pins them), its units and drop-ins, a default
#       /etc/machine-agent/config.yaml; its postinst enables, never starts
#   images/build.sh tree deb|target SUITE
#       make sure the cached tree a .deb for SUITE is built in (deb) or a bare system of
#       SUITE (target, what the tests install each .deb into) exists; print its path
#   images/build.sh image --out DIR [--suite SUITE] [--site-bin DIR] [--overlay DIR]...
#                         [--enable UNIT]... [--with-ssh]
#       build DIR/rootfs.raw (ext4, no partition table), DIR/vmlinuz, DIR/initrd.img and
#       DIR/cmdline; boot it with images/boot.sh DIR (qemu, -kernel/-initrd: no boot loader)
#
#   --suite SUITE   the distribution: bookworm (Debian 12, the default), trixie (Debian 13)
#                   or noble (Ubuntu 24.04); the agent's .deb is the one built for it
#   --site-bin DIR  site-provided binaries (kubeadm, kubelet, containerd, crictl, ...):
#                   copied into /usr/local/bin of the image
#   --overlay DIR   a tree copied over / of the image (e.g. etc/machine-agent/config.yaml);
#                   repeatable, copied in the order given
#   --enable UNIT   also enable this unit (one from the overlay); repeatable
#   --with-ssh      start sshd at boot (host keys made at the node's first boot; give
#                   authorized keys through cloud-init or an overlay); off by default
#
# Environment: MIRROR (Debian mirror; default: debootstrap's own), UBUNTU_MIRROR (default
# http://archive.ubuntu.com/ubuntu), CACHE_DIR (default /var/cache/machine-agent-image),
# PYTHON (builds the wheels; default: the repo's .venv), IMAGE_SIZE (default 3G). Needs
# root, debootstrap, mke2fs, help2man (the .deb's manual page); for noble, Ubuntu's
# archive key (/usr/share/keyrings/ubuntu-archive-keyring.gpg, else taken from Ubuntu's
# keyring package with curl and checked by its fingerprint with gpg); network only for
# the mirrors and the package index the wheels come from.
#
# The base tree (debootstrap + base-packages.txt: the slow part, minutes) is cached under
# CACHE_DIR/<key>, the key being a hash of everything that shapes it: the package list,
# the text of build_base below, the suite and the mirror; the .deb's build and target
# trees likewise, under CACHE_DIR/deb-SUITE-<key> and CACHE_DIR/target-SUITE-<key>. Everything after it (the agent's
# venv, units, site binaries, overlay, the file system) is redone by every build, seconds.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) fails the build too

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
SUITE=bookworm
CACHE_DIR=${CACHE_DIR:-/var/cache/machine-agent-image}
IMAGE_SIZE=${IMAGE_SIZE:-3G}
VENV=/opt/machine-agent
CMDLINE="root=/dev/vda rw console=ttyS0 net.ifnames=0"

say() { printf '[build %3ss] %s\n' "$SECONDS" "$*" >&2; }
# shellcheck source=../.ci/progress.sh
source "$REPO/.ci/progress.sh"

build_base() {  # $1: the directory to create
  local packages mirror components=main script=""
  packages=$(sed 's/#.*//' "$HERE/base-packages.txt" | tr -s ' \t\n' ',' | sed 's/^,//; s/,$//')
  case $SUITE in
    # Ubuntu's kernel for virtual machines (no firmware) and, which it only recommends,
    # the tools that make its initramfs; the CNI plugins are in universe
    noble) packages+=,linux-image-virtual,initramfs-tools components=main,universe ;;
    *) packages+=,linux-image-amd64 ;;
  esac
  mirror=$(suite_mirror "$SUITE")
  # debootstrap knows an Ubuntu release by its script (gutsy's serves every later one)
  [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=/usr/share/debootstrap/scripts/gutsy
  debootstrap --variant=minbase --components="$components" --include="$packages" \
    $(debootstrap_keyring "$SUITE") "$SUITE" "$1" "${mirror:-http://deb.debian.org/debian}" \
    $script >&2
  # debootstrap leaves a package unconfigured, and says nothing, when one of its
  # dependencies is a virtual package: fail here instead of in the booted image.
  chroot "$1" apt-get check >&2
  if [ -n "$(chroot "$1" dpkg --audit)" ]; then
    chroot "$1" dpkg --audit >&2
    echo "the base tree has unconfigured packages (see above)" >&2
    return 1
  fi
  # The image boots the tree's kernel and initramfs directly (build_image copies them).
  if ! compgen -G "$1/boot/vmlinuz-*" >/dev/null || ! compgen -G "$1/boot/initrd.img-*" >/dev/null; then
    echo "the base tree has no kernel or no initramfs in /boot" >&2
    return 1
  fi
  chroot "$1" apt-get clean
  rm -rf "$1"/var/lib/apt/lists/*
}

base_key() {
  { cat "$HERE/base-packages.txt"; declare -f build_base; echo "$SUITE $(suite_mirror "$SUITE")"; } \
    | sha256sum | cut -c1-16
}

ensure_base() {  # prints the cached tree's path
  local dir
  known_suite "$SUITE" || { echo "no image of $SUITE: one of $DEB_SUITES" >&2; exit 2; }
  dir="$CACHE_DIR/$(base_key)"
  mkdir -p "$CACHE_DIR"
  exec 9>"$dir.lock"
  flock 9  # two builds on one machine share the cache; the second waits for the first
  if [ -e "$dir/complete" ]; then
    say "base tree cached: $dir"
    touch "$dir/complete"
  else
    say "base tree not cached: debootstrap $SUITE into $dir (minutes)"
    rm -rf "$dir"
    # (with_progress here, not in build_base: its text is part of the cache key)
    with_progress "the base tree (debootstrap $SUITE)" build_base "$dir/rootfs"
    touch "$dir/complete"
    say "base tree ready"
    # Trees of other inputs (older recipes, other branches) go after a week unused.
    find "$CACHE_DIR" -mindepth 2 -maxdepth 2 -name complete -mtime +7 -printf '%h\n' |
      while read -r stale; do say "removing unused $stale"; rm -rf "$stale" "$stale.lock"; done
  fi
  exec 9>&-
  echo "$dir/rootfs"
}

build_wheels() {  # $1: directory. The project's wheel and every dependency's.
  local wheels=$1 python=${PYTHON:-}
  if [ -z "$python" ]; then
    python=python3
    [ -x "$REPO/.venv/bin/python" ] && python=$REPO/.venv/bin/python
  fi
  mkdir -p "$wheels"
  "$python" -m pip wheel -q --no-deps --wheel-dir "$wheels" "$REPO"
  # The dependencies exactly as requirements/runtime.txt pins them, each file checked
  # against its hash (same Python 3.11 as bookworm's); the image installs offline from
  # these files, with the same check.
  "$python" -m pip wheel -q --require-hashes --wheel-dir "$wheels" \
    -r "$REPO/requirements/runtime.txt"
  cp "$REPO/requirements/runtime.txt" "$wheels/runtime.txt"
}

# The .deb is built per distribution, in a debootstrap tree of it: the venv's python is a
# link to that distribution's python3, its compiled wheels are for that Python, and
# dpkg-shlibdeps reads that distribution's libraries. Ubuntu 22.04 (jammy) is not here:
# its python3 is 3.10, older than the agent needs.
DEB_SUITES="bookworm trixie noble"
UBUNTU_MIRROR=${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}

known_suite() {  # $1: suite; true for one of DEB_SUITES
  case " $DEB_SUITES " in
    *" $1 "*) return 0 ;;
  esac
  return 1
}

suite_mirror() {  # $1: suite. Empty: debootstrap's own Debian mirror (or MIRROR)
  case $1 in
    noble) echo "$UBUNTU_MIRROR" ;;
    *) echo "${MIRROR:-}" ;;
  esac
}

# Ubuntu's archive signing key (2018), by fingerprint: Debian does not package Ubuntu's
# keyring, so it is taken from Ubuntu's own ubuntu-keyring package and used only if it
# holds this key, of which only this key is kept.
UBUNTU_KEY=F6ECB3762474EDA9D21B7022871920D1991BC93C
UBUNTU_KEYRING_DEB=pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb

debootstrap_keyring() {  # $1: suite; prints debootstrap's --keyring option, if it needs one
  case $1 in noble) ;; *) return 0 ;; esac
  local system=/usr/share/keyrings/ubuntu-archive-keyring.gpg kept=$CACHE_DIR/ubuntu-archive-$UBUNTU_KEY.gpg
  if [ -e "$system" ]; then echo "--keyring=$system"; return 0; fi
  if [ ! -s "$kept" ]; then
    local tmp
    tmp=$(mktemp -d)
    curl -fsS -o "$tmp/keyring.deb" "$UBUNTU_MIRROR/$UBUNTU_KEYRING_DEB" >&2
    dpkg-deb -x "$tmp/keyring.deb" "$tmp/x"
    gpg --homedir "$tmp" --no-default-keyring \
      --keyring "$tmp/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" \
      --export "$UBUNTU_KEY" >"$tmp/key.gpg" 2>/dev/null
    if ! gpg --homedir "$tmp" --show-keys --with-colons "$tmp/key.gpg" 2>/dev/null |
        grep -qx "fpr:::::::::$UBUNTU_KEY:"; then
      echo "Ubuntu's keyring package holds no key $UBUNTU_KEY" >&2
      rm -rf "$tmp"
      return 1
    fi
    mv "$tmp/key.gpg" "$kept"
    rm -rf "$tmp"
  fi
  echo "--keyring=$kept"
}

build_deb_tree() {  # $1: the directory to create, $2: suite. Its python3, dpkg-shlibdeps, strip
  local mirror script=""
  mirror=$(suite_mirror "$2")
  # debootstrap knows an Ubuntu release by its script (gutsy's serves every later one)
  [ -e "/usr/share/debootstrap/scripts/$2" ] || script=/usr/share/debootstrap/scripts/gutsy
  debootstrap --variant=minbase --include=python3,dpkg-dev $(debootstrap_keyring "$2") "$2" "$1" \
    "${mirror:-http://deb.debian.org/debian}" $script >&2
  chroot "$1" apt-get clean
  rm -rf "$1"/var/lib/apt/lists/*
}

build_target_tree() {  # $1: the directory to create, $2: suite. A bare system of it, the
  # kind of machine a .deb is installed on (the tests install each .deb into a copy).
  local mirror script=""
  mirror=$(suite_mirror "$2")
  [ -e "/usr/share/debootstrap/scripts/$2" ] || script=/usr/share/debootstrap/scripts/gutsy
  debootstrap --variant=minbase $(debootstrap_keyring "$2") "$2" "$1" \
    "${mirror:-http://deb.debian.org/debian}" $script >&2
  chroot "$1" apt-get clean
}

ensure_tree() {  # $1: kind (deb: a build tree; target: a bare system), $2: suite;
  # prints the cached tree's path
  local kind=$1 suite=$2 dir
  if ! known_suite "$suite"; then
    echo "no .deb for $suite: one of $DEB_SUITES (jammy's Python 3.10 is older than the agent needs)" >&2
    return 2
  fi
  dir="$CACHE_DIR/$kind-$suite-$({ declare -f "build_${kind}_tree";
    echo "$suite $(suite_mirror "$suite")"; } | sha256sum | cut -c1-16)"
  mkdir -p "$CACHE_DIR"
  exec 8>"$dir.lock"
  flock 8
  if [ ! -e "$dir/complete" ]; then
    say "$kind tree for $suite not cached: debootstrap into $dir (minutes)"
    rm -rf "$dir"
    with_progress "the $suite $kind tree (debootstrap)" "build_${kind}_tree" "$dir/rootfs" "$suite"
  fi
  touch "$dir/complete"
  exec 8>&-
  echo "$dir/rootfs"
}

deb_version() {  # $1: the agent's version. The release's own at its tag (v$1); built from
  # another commit, $1+git<commits>.g<hash>: a later commit is a later version to dpkg
  # and apt, so an image build (or the Ansible role) installs it over an older one.
  local base=$1
  if ! git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
    echo "$base"
  elif [ "$(git -C "$REPO" describe --tags --exact-match 2>/dev/null)" = "v$base" ]; then
    echo "$base"
  else
    echo "$base+git$(git -C "$REPO" rev-list --count HEAD).g$(git -C "$REPO" rev-parse --short=12 HEAD)"
  fi
}

build_deb() {  # $1: output directory, $2: suite (default bookworm); prints the .deb's path
  local out=$1 suite=${2:-bookworm} tree work stage venv version pyver distro python
  tree=$(ensure_tree deb "$suite")
  mkdir -p "$out"
  # The venv is made inside the build tree (its python3, at a path of its own: two builds
  # at once share the tree), then moved out; the tree itself is left as it was.
  work=$(mktemp -d "$tree/tmp/machine-agent-deb.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  python=${PYTHON:-python3}
  [ -z "${PYTHON:-}" ] && [ -x "$REPO/.venv/bin/python" ] && python=$REPO/.venv/bin/python
  pyver=$(chroot "$tree" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  distro=$(. "$tree/etc/os-release" && echo "$ID$VERSION_ID" | sed 's/^debian/deb/')
  mkdir -p "$work/wheels"
  "$python" -m pip wheel -q --no-deps --wheel-dir "$work/wheels" "$REPO" >&2
  # The dependencies exactly as requirements/runtime.txt pins them, each file checked
  # against its hash, the wheels for the tree's Python.
  "$python" -m pip download -q --require-hashes --only-binary=:all: --dest "$work/wheels" \
    --python-version "$pyver" --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -r "$REPO/requirements/runtime.txt" >&2
  cp "$REPO/requirements/runtime.txt" "$work/wheels/runtime.txt"
  # The builder's own pip, run from its directory by the tree's python (pip supports it).
  cp -a "$("$python" -c 'import os, pip; print(os.path.dirname(pip.__file__))')" "$work/pip"
  local inner=${work#"$tree"}
  stage=$work/stage
  venv=$stage$VENV
  # No pip inside (nothing installs into it later) and no .pyc files (postinst compiles
  # them in place). A venv records its own path only in bin/ (scripts' #! lines,
  # activate) and pyvenv.cfg: moved to $VENV below.
  chroot "$tree" python3 -m venv --without-pip "$inner/stage$VENV"
  # (env -i: the builder's pip settings name its own files, none of them in the tree)
  local pip=(chroot "$tree" env -i PATH=/usr/bin:/bin PIP_CONFIG_FILE=/dev/null
             "$inner/stage$VENV/bin/python" "$inner/pip" install -q --no-compile
             --no-index --disable-pip-version-check --no-cache-dir
             --find-links "$inner/wheels")
  "${pip[@]}" --require-hashes -r "$inner/wheels/runtime.txt" >&2
  "${pip[@]}" --no-deps machine-agent >&2
  grep -rlI --null "$inner/stage" "$venv" | xargs -0 -r sed -i "s#$inner/stage##g"
  if grep -rlI "$inner/stage" "$venv" >&2; then
    echo "the staging path is left in the files above" >&2
    return 1
  fi
  # What Python 3.13's venv adds for a developer's checkout: a .gitignore, an empty
  # include/ (no C headers are installed in it)
  rm -f "$venv/.gitignore"
  find "$venv/include" -depth -type d -empty -delete 2>/dev/null || true
  local site
  site=$(echo "$venv"/lib/python3*/site-packages)
  # PyYAML's wheel links its own copy of libyaml into its C extension; Debian allows no
  # embedded copies. The agent falls back to PyYAML's pure-Python SafeLoader without it.
  rm -f "$site"/yaml/_yaml.*.so
  sed -i '/^yaml\/_yaml\..*\.so,/d' "$site"/pyyaml-*.dist-info/RECORD
  # Modes as Debian ships Python modules (some wheels mark a module or a test executable).
  find "$site" -type f -exec chmod 0644 {} +
  # Stripped as dh_strip does, then the Depends their libraries need (libc6, with the
  # version the symbols they use appeared in), as dpkg-shlibdeps finds them in the tree.
  local objects=() shlibs
  mapfile -t objects < <(find "$site" -name '*.so' -type f | sed "s#^$tree##")
  chroot "$tree" strip --remove-section=.comment --remove-section=.note --strip-unneeded \
    "${objects[@]}"
  mkdir -p "$work/shlibs/debian"
  printf 'Source: machine-agent\n\nPackage: machine-agent\nArchitecture: amd64\n' \
    >"$work/shlibs/debian/control"
  shlibs=$(chroot "$tree" sh -c 'cd "$1" && shift && dpkg-shlibdeps -O "$@"' - \
    "$inner/shlibs" "${objects[@]}" | sed -n 's/^shlibs:Depends=//p')
  [ -n "$shlibs" ] || { echo "dpkg-shlibdeps found no dependency for ${objects[*]}" >&2; return 1; }
  # Every distribution in the venv is named in the copyright file.
  local dist
  for dist in "$site"/*.dist-info; do
    dist=$(basename "$dist" | sed 's/-[^-]*\.dist-info$//')
    [ "$dist" = machine_agent ] && continue
    grep -q "/$dist-\*\.dist-info/" "$HERE/deb/copyright" || {
      echo "images/deb/copyright names no license for the bundled $dist" >&2; return 1; }
  done
  version=$(deb_version "$(sed -n 's/^Version: //p' "$site"/machine_agent-*.dist-info/METADATA)")
  version=$version+$distro
  install_units "$stage"
  install -D -m 0644 "$HERE/deb/config.yaml" "$stage/etc/machine-agent/config.yaml"
  install -D -m 0644 "$HERE/deb/copyright" "$stage/usr/share/doc/machine-agent/copyright"
  install -D -m 0644 "$HERE/deb/lintian-overrides" \
    "$stage/usr/share/lintian/overrides/machine-agent"
  deb_changelog "$version" "$suite" | gzip -9n >"$stage/usr/share/doc/machine-agent/changelog.gz"
  chmod 0644 "$stage/usr/share/doc/machine-agent/changelog.gz"
  mkdir -p "$stage/usr/bin" "$stage/DEBIAN" "$stage/usr/share/man/man8"
  ln -s "$VENV/bin/machine-agent" "$stage/usr/bin/machine-agent"
  # Its manual page: what `machine-agent --help` says, as the package's venv runs it
  printf '#!/bin/sh\nexec chroot %q %q -c %q "$@"\n' "$tree" "$inner/stage$VENV/bin/python" \
    'import sys; from agent.cli import main; sys.exit(main())' >"$work/machine-agent"
  chmod 0755 "$work/machine-agent"
  SOURCE_DATE_EPOCH=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s) \
    help2man --no-info --section=8 --source="machine-agent $version" \
    --name="turns a freshly booted machine into a Cluster API node" "$work/machine-agent" |
    gzip -9n >"$stage/usr/share/man/man8/machine-agent.8.gz"
  chmod 0644 "$stage/usr/share/man/man8/machine-agent.8.gz"
  install -m 0755 -t "$stage/DEBIAN" "$HERE/deb/postinst" "$HERE/deb/prerm" "$HERE/deb/postrm"
  (cd "$stage" && find etc -type f | sed 's#^#/#' | sort) >"$stage/DEBIAN/conffiles"
  (cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
    xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
  cat >"$stage/DEBIAN/control" <<CONTROL
Package: machine-agent
Version: $version
Architecture: amd64
Maintainer: machine-agent maintainers <machine-agent@example.net>
Depends: python3 (>= $pyver), python3 (<< ${pyver%.*}.$((${pyver#*.} + 1))), $shlibs, init-system-helpers (>= 1.54), iproute2, systemd
Recommends: chrony | systemd-timesyncd, containernetworking-plugins
Section: admin
Priority: optional
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Homepage: https://cluster-api.sigs.k8s.io
Description: turns a freshly booted machine into a Cluster API node
 machine-agent configures network (with IPAM) and time, joins the cluster
 with kubeadm, installs the CNI and reports each step on the Machine's
 status. Runs from its own virtualenv in /opt/machine-agent (built for
 this distribution's Python $pyver); the units are enabled, not started.
CONTROL
  local deb=$out/machine-agent_${version}_amd64.deb
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
  echo "$deb"
}

deb_changelog() {  # $1: version, $2: suite. A native package's changelog: the commit it is
  local date commit=""
  date=$(git -C "$REPO" log -1 --format=%cD 2>/dev/null || date -R)
  commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || true)
  printf 'machine-agent (%s) %s; urgency=medium\n\n  * Built%s for %s.\n\n -- %s  %s\n' \
    "$1" "$2" "${commit:+ from commit $commit}" "$2" \
    "machine-agent maintainers <machine-agent@example.net>" "$date"
}

install_units() {  # $1: tree (the .deb's staging tree): the units and the files they rely on
  local tree=$1
  install -D -m 0644 -t "$tree/usr/lib/systemd/system" "$REPO"/units/*.service
  local dropins
  for dropins in "$REPO"/units/*.service.d; do
    install -D -m 0644 -t "$tree/usr/lib/systemd/system/$(basename "$dropins")" "$dropins"/*.conf
  done
  install -D -m 0644 "$REPO/README.md" "$tree/usr/share/doc/machine-agent/README.md"
  # The agent owns the network: cloud-init still provides instance data, but writes no
  # network configuration that would race the agent's.
  install -D -m 0644 "$HERE/files/99-machine-agent.cfg" \
    "$tree/etc/cloud/cloud.cfg.d/99-machine-agent.cfg"
  # What any Kubernetes node needs before kubeadm join (the join preflight checks it):
  # br_netfilter loaded, IPv4 forwarding and the bridge's iptables hooks on.
  install -D -m 0644 "$HERE/files/kubernetes-modules.conf" \
    "$tree/etc/modules-load.d/kubernetes.conf"
  install -D -m 0644 "$HERE/files/kubernetes-sysctl.conf" "$tree/etc/sysctl.d/99-kubernetes.conf"
  # Pod veths and bridges keep the MAC their CNI plugin set (udev would change it).
  install -D -m 0644 "$HERE/files/cni-links.link" "$tree/usr/lib/systemd/network/50-cni-links.link"
  mkdir -p "$tree/etc/machine-agent/config.d"
}

build_image() {
  local out="" site_bin="" overlays=() enable=() ssh=0
  while (($#)); do
    case $1 in
      --out) out=$2; shift 2 ;;
      --suite) SUITE=$2; shift 2 ;;
      --site-bin) site_bin=$2; shift 2 ;;
      --overlay) overlays+=("$2"); shift 2 ;;
      --enable) enable+=("$2"); shift 2 ;;
      --with-ssh) ssh=1; shift ;;
      *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
  done
  [ -n "$out" ] || { echo "image needs --out DIR" >&2; exit 2; }
  local base tree
  base=$(ensure_base)
  mkdir -p "$out"
  tree="$out/tree"
  rm -rf "$tree"
  say "copying the base tree"
  cp -a --reflink=auto "$base" "$tree"
  say "installing the agent's package (images/build.sh deb)"
  local deb
  deb=$(build_deb "$out/deb" "$SUITE")
  cp "$deb" "$tree/tmp/"
  chroot "$tree" dpkg -i "/tmp/$(basename "$deb")" >&2
  rm "$tree/tmp/$(basename "$deb")"
  chroot "$tree" "$VENV/bin/machine-agent" --version >&2
  # networkd applies what the network phase renders (its default renderer).
  systemctl --root="$tree" enable systemd-networkd.service >&2
  printf '/dev/vda / ext4 defaults 0 1\n' >"$tree/etc/fstab"
  echo machine-agent-image >"$tree/etc/hostname"
  if [ -n "$site_bin" ]; then
    say "site binaries from $site_bin"
    install -m 0755 -t "$tree/usr/local/bin" "$site_bin"/*
    if [ -e "$site_bin/kubelet" ]; then
      # The kubelet an in-place patch release replaces is this one, not /usr/bin's.
      printf '%s\n' '# images/build.sh: the kubelet given with --site-bin is in /usr/local/bin.' \
        'apiVersion: machine-agent.io/v1alpha1' 'kind: AgentConfig' 'spec:' '  join:' \
        '    kubeletBinary: /usr/local/bin/kubelet' \
        >"$tree/etc/machine-agent/config.d/10-site-kubelet.yaml"
    fi
  fi
  local overlay
  for overlay in ${overlays[@]+"${overlays[@]}"}; do
    say "overlay from $overlay"
    cp -a "$overlay"/. "$tree"/
  done
  if ((${#enable[@]})); then
    systemctl --root="$tree" enable "${enable[@]}" >&2
  fi
  # sshd: for logging into a node that failed to join, when the site wants it. Its host
  # keys are never in the image (every node would share them): cloud-init's ssh module
  # makes them at the first boot, before ssh.service starts.
  rm -f "$tree"/etc/ssh/ssh_host_*
  mkdir -p "$tree/etc/systemd/system/ssh.service.d"
  printf '%s\n' '# The image has no host keys; make any missing (as cloud-init does, where it runs).' \
    '[Service]' 'ExecStartPre=/usr/bin/ssh-keygen -A' \
    >"$tree/etc/systemd/system/ssh.service.d/host-keys.conf"
  # Ubuntu starts sshd from ssh.socket by default: here always ssh.service, which makes
  # the keys, or nothing.
  if [ -e "$tree/usr/lib/systemd/system/ssh.socket" ]; then
    systemctl --root="$tree" disable ssh.socket >&2
  fi
  if ((ssh)); then
    systemctl --root="$tree" enable ssh.service >&2
  else
    systemctl --root="$tree" disable ssh.service >&2
  fi
  # cloud-init's locale module sets its default, en_US.UTF-8 (update-locale refuses a
  # locale that was never generated: `cloud-init status` would say error). Debian's
  # locale-gen makes what /etc/locale.gen lists, Ubuntu's what it is given.
  if [ "$SUITE" = noble ]; then
    chroot "$tree" locale-gen en_US.UTF-8 >&2
  else
    grep -qx "en_US.UTF-8 UTF-8" "$tree/etc/locale.gen" 2>/dev/null ||
      echo "en_US.UTF-8 UTF-8" >>"$tree/etc/locale.gen"
    chroot "$tree" locale-gen >&2
  fi
  # No machine ID in the image (the base tree's would be every node's): an empty file,
  # so systemd makes the node's own at its first boot (machine-id(5)). Not
  # `uninitialized`: that boot would also apply the presets to every unit, and Debian's
  # ("enable *") would start what the image leaves off, sshd among them.
  : >"$tree/etc/machine-id"
  if [ -f "$tree/var/lib/dbus/machine-id" ] && [ ! -L "$tree/var/lib/dbus/machine-id" ]; then
    rm -f "$tree/var/lib/dbus/machine-id"
  fi
  cp "$tree"/boot/vmlinuz-* "$out/vmlinuz"
  cp "$tree"/boot/initrd.img-* "$out/initrd.img"
  echo "$CMDLINE" >"$out/cmdline"
  say "making the ext4 file system"
  rm -f "$out/rootfs.raw"
  truncate -s "$IMAGE_SIZE" "$out/rootfs.raw"
  mke2fs -q -t ext4 -L agent-root -d "$tree" "$out/rootfs.raw"
  rm -rf "$tree"
  say "image ready: $out"
}

case ${1:-} in
  base) SUITE=${2:-bookworm}; ensure_base ;;
  wheels) build_wheels "${2:?wheels needs a directory}" ;;
  deb) build_deb "${2:?deb needs a directory}" "${3:-bookworm}" ;;
  tree) ensure_tree "${2:?tree needs deb or target}" "${3:?tree needs a suite}" ;;
  image) shift; build_image "$@" ;;
  *) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
