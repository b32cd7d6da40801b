#!/bin/sh
# torch26_root.sh — a Debian 13 (trixie) root with its python3-torch
# (PyTorch 2.6) for the reference measurements of tests/hf_torch.py, made
# when absent; prints the root's path. Debian 12's own python3-torch is
# 1.13, and the two cannot be installed side by side: a minbase root
# (debootstrap --variant=minbase --include=python3, then apt-get install
# python3-torch inside) is about 1.6 GB and a few minutes on a good link.
#
# Usage: tests/torch26_root.sh [DIR]
#   DIR defaults to $ZS_TORCH26_ROOT, else $XDG_CACHE_HOME/zerosim/trixie-torch26
#   (~/.cache/...): outside the build tree, kept between builds.
# Run a script inside with /proc mounted in a mount namespace of its own
# (torch reads /proc/cpuinfo; nothing stays mounted afterwards):
#   unshare -m sh -c 'mount -t proc proc DIR/proc && chroot DIR python3 /tmp/x.py'
# (tests/hf_torch.sh copies hf_torch.py into DIR/tmp). Needs root
# (debootstrap and chroot) and a Debian mirror ($ZS_DEBIAN_MIRROR, default
# http://deb.debian.org/debian). Exit 0 with the path on stdout; 77 when
# it cannot be made here (no debootstrap, not root, no mirror: automake's
# skip), 1 when making it failed (the half-made root is removed; an
# existing complete root is never touched).
set -u
dir=${1:-${ZS_TORCH26_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/zerosim/trixie-torch26}}
mirror=${ZS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# A complete root has the stamp, written last.
if [ -f "$dir/.zerosim-torch26" ]; then
	echo "$dir"
	exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
	echo "torch26_root: no debootstrap here (apt-get install debootstrap)" >&2
	exit 77
fi
if [ "$(id -u)" != 0 ]; then
	echo "torch26_root: debootstrap and chroot need root" >&2
	exit 77
fi
if command -v curl >/dev/null 2>&1 && ! curl -sfI --max-time 20 "$mirror/dists/trixie/Release" >/dev/null; then
	echo "torch26_root: $mirror is out of reach" >&2
	exit 77
fi
PATH=$PATH:/usr/sbin:/sbin
# Made beside its final name and renamed: an interrupted run leaves no
# root that looks complete.
tmp="$dir.part"
rm -rf "$tmp"
mkdir -p "$(dirname "$dir")" || exit 1
trap 'rm -rf "$tmp"' HUP INT TERM
if ! debootstrap --variant=minbase --include=python3 trixie "$tmp" "$mirror" >"$tmp.log" 2>&1; then
	echo "torch26_root: debootstrap failed (last lines of $tmp.log):" >&2
	tail -5 "$tmp.log" >&2
	rm -rf "$tmp"
	exit 1
fi
# DEBIAN_FRONTEND keeps debconf from asking.
if ! chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch \
	>>"$tmp.log" 2>&1; then
	echo "torch26_root: apt-get install python3-torch failed (last lines of $tmp.log):" >&2
	tail -5 "$tmp.log" >&2
	rm -rf "$tmp"
	exit 1
fi
chroot "$tmp" apt-get clean >/dev/null 2>&1
v=$(chroot "$tmp" python3 -c 'import torch; print(torch.__version__)' 2>>"$tmp.log") || {
	echo "torch26_root: torch does not import in the new root (see $tmp.log)" >&2
	rm -rf "$tmp"
	exit 1
}
echo "$v" >"$tmp/.zerosim-torch26"
rm -rf "$dir"
mv "$tmp" "$dir" || exit 1
rm -f "$tmp.log"
echo "$dir"
