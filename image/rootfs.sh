#!/bin/bash
# Builds a session root filesystem: a minimal Debian 12 (debootstrap
# --variant=minbase bookworm, with ca-certificates and the security updates),
# for `errandctl run --image DIR`.
#
#   image/rootfs.sh [--refresh] [--systemd] [DIR]
#
# With --systemd the image is a host to boot rather than a session's root:
# systemd as init (systemd, systemd-sysv) and the libraries errand's binaries
# link, for the systemd vmtest (selftests/vm/systemd.sh), which installs
# errand into a copy of it; its DIR defaults to
# /var/cache/errand-image/debian-12-systemd.
#
# DIR defaults to /var/cache/errand-image/debian-12 (outside the tree: a
# root filesystem under build/ would be walked by every make). The build is
# cached: a DIR holding a complete image (DIR/.errand-image) is kept as it is
# unless --refresh is given or it is older than ERRAND_IMAGE_MAX_AGE days
# (default 30). A new image is built beside it and moved into place only when
# complete, so a failed build leaves the old one untouched.
#
# What the launcher expects of an image (launcher/mounts.c): a directory
# readable by the session's uid; /etc/resolv.conf present as a file (errand
# binds the session's own on it); proc, dev, tmp, workspace and state are
# errand's own mounts, so the image's are left empty.
#
# Packages come from the Debian archive this machine's APT uses; nothing else
# is downloaded.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=image/mirror.sh
. "$ROOT/image/mirror.sh"

SUITE=bookworm
REFRESH=0
SYSTEMD=0
DIR=
while [ $# -gt 0 ]; do
	case $1 in
	--refresh) REFRESH=1; shift ;;
	--systemd) SYSTEMD=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "image/rootfs.sh: unknown option $1" >&2; exit 2 ;;
	*) DIR=$1; shift ;;
	esac
done
INCLUDE=ca-certificates
KIND=minbase
if [ $SYSTEMD = 1 ]; then
	DIR=${DIR:-/var/cache/errand-image/debian-12-systemd}
	# init, and what errand-agent, errand-launch, errandctl and errand-broker
	# link (ldd build/bin/*), the tools the vmtest uses inside
	INCLUDE=$INCLUDE,systemd,systemd-sysv,kmod,procps,libbpf1,libc-ares2,libjansson4,libnftables1
	INCLUDE=$INCLUDE,libnl-3-200,libnl-route-3-200,libseccomp2,libsqlite3-0,liburing2,libsystemd0
	INCLUDE=$INCLUDE,android-libboringssl
	KIND="minbase with systemd"
fi
DIR=${DIR:-/var/cache/errand-image/debian-12}
case $DIR in /*) ;; *) DIR=$(pwd)/$DIR ;; esac
MAX_AGE=${ERRAND_IMAGE_MAX_AGE:-30}

err() {
	echo "image/rootfs.sh: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || err "needs root (debootstrap makes device nodes and root-owned files)"
command -v debootstrap >/dev/null || err "debootstrap is not installed (Debian package debootstrap; make deps)"

if [ $REFRESH = 0 ] && [ -f "$DIR/.errand-image" ] &&
	[ -n "$(find "$DIR/.errand-image" -mtime "-$MAX_AGE" 2>/dev/null)" ]; then
	echo "image: $DIR is up to date ($(head -n 1 "$DIR/.errand-image")); --refresh rebuilds it"
	exit 0
fi

MIRROR=$(host_mirror $SUITE)
SECURITY=$(host_mirror $SUITE-security)
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
[ -n "$SECURITY" ] || SECURITY=${MIRROR%/debian}/debian-security

NEW=$DIR.new.$$
cleanup() {
	local m
	# Whatever is still mounted below the new tree goes first, deepest first.
	for m in $(awk -v p="$NEW" 'index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$NEW"
}
trap cleanup EXIT
mkdir -p "$(dirname "$DIR")"
rm -rf "$DIR".new.*

echo "image: debootstrap --variant=minbase $SUITE from $MIRROR into $NEW"
debootstrap --variant=minbase --include=$INCLUDE --components=main \
	--keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
	"$SUITE" "$NEW" "$MIRROR" >"$NEW.log" 2>&1 ||
	{ tail -n 20 "$NEW.log" >&2; rm -f "$NEW.log"; err "debootstrap failed (log above)"; }
rm -f "$NEW.log"

# The image's own APT sources: the release, its updates and security.
rm -f "$NEW/etc/apt/sources.list"
cat >"$NEW/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

# Security updates, inside the new tree (its own proc, the host's resolver
# for the download), then nothing of APT's download state is kept.
cp /etc/resolv.conf "$NEW/etc/resolv.conf"
mount -t proc proc "$NEW/proc"
if ! chroot "$NEW" /usr/bin/env DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
	sh -c 'apt-get -q update && apt-get -q -y --no-install-recommends upgrade' >"$NEW.upgrade.log" 2>&1; then
	tail -n 20 "$NEW.upgrade.log" >&2
	umount "$NEW/proc"
	rm -f "$NEW.upgrade.log"
	err "apt-get upgrade inside the image failed (log above)"
fi
chroot "$NEW" apt-get clean
umount "$NEW/proc"
rm -f "$NEW.upgrade.log"
rm -rf "$NEW"/var/lib/apt/lists/* "$NEW"/var/cache/apt/*.bin "$NEW"/var/log/*.log "$NEW"/var/log/apt/*

# What errand binds on and mounts itself.
rm -f "$NEW/etc/resolv.conf"
: >"$NEW/etc/resolv.conf"
chmod 0644 "$NEW/etc/resolv.conf"
if [ $SYSTEMD = 1 ]; then
	echo errand-vm >"$NEW/etc/hostname"
	# root logs in on the console without a password: the VM has no network
	chroot "$NEW" passwd -d root >/dev/null
else
	echo errand-session >"$NEW/etc/hostname"
fi
for d in proc dev tmp workspace state; do
	mkdir -p "$NEW/$d"
done
chmod 1777 "$NEW/tmp"
chmod 0755 "$NEW"

# It must work as a root: a shell, the CA bundle.
chroot "$NEW" /bin/sh -c 'test -x /usr/bin/env' || err "the new image cannot run its own /bin/sh"
[ -s "$NEW/etc/ssl/certs/ca-certificates.crt" ] || err "the new image has no CA bundle"

{
	echo "debian-12 $KIND ($SUITE) built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $MIRROR"
	chroot "$NEW" dpkg-query -W -f '${Package} ${Version}\n'
} >"$NEW/.errand-image"

# Into place: the old image goes only now.
if [ -e "$DIR" ]; then
	mv "$DIR" "$DIR.old.$$"
	mv "$NEW" "$DIR"
	rm -rf "$DIR.old.$$"
else
	mv "$NEW" "$DIR"
fi
trap - EXIT
echo "image: $DIR ($(du -sh "$DIR" | cut -f1), $(($(wc -l <"$DIR/.errand-image") - 1)) packages)"
