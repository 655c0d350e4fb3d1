#!/bin/bash
# Builds the vmtest initramfs in two parts that the kernel unpacks one after
# the other (vmtests/run concatenates them):
#
#   image/initramfs.sh userland OUT.cpio
#       busybox (from busybox-static) as init and fallback for every applet,
#       the host's own programs the selftests call (bash, dash as sh,
#       coreutils, grep, sed, awk, find, util-linux's nsenter/unshare/mount,
#       iproute2's ip and tc, nft, kmod, procps, hostname; bpftool and a
#       minimal python3 when the host has them) with their shared libraries
#       (ldd), errand's binaries (build/bin/*, build/selftests/*), the
#       selftests (selftests/, without vm/) and image/init as /init.
#   image/initramfs.sh modules KROOT KVER OUT.cpio [--without MOD]...
#       the modules of image/modules.list and what they depend on, taken from
#       KROOT/lib/modules/KVER (an unpacked linux-image package, or / for the
#       running kernel), uncompressed, with a modules.dep made by depmod, so
#       the kernel's own module requests (modprobe) work in the VM as well.
#       --without MOD leaves MOD out, as a kernel built without it would be.
#
# Paths follow Debian 12's merged /usr: /bin, /sbin, /lib, /lib64 are links
# into /usr. Nothing is downloaded: everything comes from the host's installed
# Debian packages and the tree.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
err() {
	echo "image/initramfs.sh: $*" >&2
	exit 1
}

STAGE=
cleanup() { [ -n "$STAGE" ] && rm -rf "$STAGE"; }
trap cleanup EXIT

# The canonical path of FILE's directory, plus its name: /lib/x/libc.so.6
# becomes /usr/lib/x/libc.so.6 on a merged-/usr host.
canon() {
	local d
	d=$(readlink -f "$(dirname "$1")")
	echo "$d/$(basename "$1")"
}

# stage_file PATH: copies PATH into the stage at its canonical place; a
# symbolic link is copied as a link and its target is staged as well.
stage_file() {
	local src dst t
	src=$(canon "$1")
	dst=$STAGE$src
	[ -e "$dst" ] || [ -L "$dst" ] && return 0
	mkdir -p "$(dirname "$dst")"
	if [ -L "$src" ]; then
		cp -P "$src" "$dst"
		t=$(readlink "$src")
		case $t in
		/*) stage_file "$t" ;;
		*) stage_file "$(dirname "$src")/$t" ;;
		esac
	else
		cp -p "$src" "$dst"
	fi
}

# stage_bin PATH: the program and every shared library it loads.
stage_bin() {
	local lib
	stage_file "$1"
	# ldd lines: "libx.so.1 => /lib/.../libx.so.1 (0x...)" or "/lib64/ld-linux... (0x...)"
	while read -r lib; do
		[ -n "$lib" ] && stage_file "$lib"
	done < <(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
}

# need_cmd NAME...: each must be on the host; optional_cmd NAME...: staged
# when it is.
need_cmd() {
	local c p
	for c in "$@"; do
		p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$c") ||
			err "$c is not installed on this host (make deps installs what the tests need)"
		stage_bin "$p"
	done
}
optional_cmd() {
	local c p
	for c in "$@"; do
		p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$c") || continue
		stage_bin "$p"
	done
}

new_stage() {
	STAGE=$(mktemp -d /tmp/errand-initramfs.XXXXXX)
	chmod 0755 "$STAGE"
	mkdir -p "$STAGE"/usr/{bin,sbin,lib,lib64}
	ln -s usr/bin "$STAGE/bin"
	ln -s usr/sbin "$STAGE/sbin"
	ln -s usr/lib "$STAGE/lib"
	ln -s usr/lib64 "$STAGE/lib64"
}

# cpio_out OUT: the stage as a newc archive owned by root.
cpio_out() {
	local out=$1
	mkdir -p "$(dirname "$out")"
	(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out.tmp"
	mv "$out.tmp" "$out"
}

build_userland() {
	local out=$1 f a bb
	command -v cpio >/dev/null || err "cpio is not installed"
	for f in "$ROOT"/build/bin/errandctl "$ROOT"/build/bin/errand-launch "$ROOT"/build/selftests/probe; do
		[ -x "$f" ] || err "$f is not built (run make first)"
	done
	bb=$(command -v busybox) || err "busybox is not installed (Debian package busybox-static)"
	! ldd "$bb" >/dev/null 2>&1 || err "$bb is not static: install busybox-static"
	new_stage

	# The programs the tests, errand and the init script call.
	need_cmd bash dash grep sed awk mawk find xargs \
		nsenter unshare mount umount setpriv \
		ip tc nft kmod ps pgrep pkill sysctl hostname ldd
	while read -r f; do
		[ -f "$f" ] && stage_bin "$f"
	done < <(dpkg -L coreutils | grep -E '^/(usr/)?s?bin/')
	optional_cmd bpftool gawk strace git useradd userdel
	stage_python

	# kmod answers to the names of its tools.
	for a in modprobe insmod rmmod lsmod depmod modinfo; do
		[ -e "$STAGE/usr/sbin/$a" ] || ln -s ../bin/kmod "$STAGE/usr/sbin/$a"
	done
	ln -sf dash "$STAGE/usr/bin/sh"

	# busybox for init and for anything else a script may reach for.
	cp "$bb" "$STAGE/usr/bin/busybox"
	for a in $("$bb" --list); do
		[ -e "$STAGE/usr/bin/$a" ] || [ -e "$STAGE/usr/sbin/$a" ] || [ -L "$STAGE/usr/bin/$a" ] ||
			ln -s busybox "$STAGE/usr/bin/$a"
	done

	# iproute2's tables, the loader's cache, the accounts the tests use.
	mkdir -p "$STAGE/etc"
	for f in /etc/iproute2 /usr/share/iproute2 /usr/lib/iproute2; do
		[ -e "$f" ] && { mkdir -p "$STAGE$(dirname "$f")"; cp -a "$f" "$STAGE$f"; }
	done
	cp -a /etc/ld.so.conf "$STAGE/etc/"
	[ -d /etc/ld.so.conf.d ] && cp -a /etc/ld.so.conf.d "$STAGE/etc/"
	ldconfig -r "$STAGE" 2>/dev/null || true
	grep -E '^(root|nobody|errand-session|errand-dns):' /etc/passwd >"$STAGE/etc/passwd"
	grep -E '^(root|nogroup|errand-session|errand-dns):' /etc/group >"$STAGE/etc/group"
	for u in errand-session errand-dns; do
		grep -q "^$u:" "$STAGE/etc/passwd" ||
			err "the $u account does not exist on this host (make accounts makes it)"
	done
	# useradd and userdel (launcher/project makes an owner for its project).
	[ -f /etc/login.defs ] && cp /etc/login.defs "$STAGE/etc/"
	[ -d /etc/default ] && mkdir -p "$STAGE/etc/default" && cp -a /etc/default/useradd "$STAGE/etc/default/" 2>/dev/null
	: >"$STAGE/etc/shadow"
	: >"$STAGE/etc/gshadow"
	chmod 0600 "$STAGE/etc/shadow" "$STAGE/etc/gshadow"
	printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nservices: files\nprotocols: files\n' \
		>"$STAGE/etc/nsswitch.conf"
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$STAGE/etc/hosts"
	# C.UTF-8, as on the host: errand lowercases names with it.
	[ -d /usr/lib/locale/C.utf8 ] && { mkdir -p "$STAGE/usr/lib/locale"; cp -a /usr/lib/locale/C.utf8 "$STAGE/usr/lib/locale/"; }
	[ -f /etc/protocols ] && cp /etc/protocols "$STAGE/etc/"
	[ -f /etc/services ] && cp /etc/services "$STAGE/etc/"
	# The VM has no network device: this resolver is never reached. The
	# agent reads it as it reads the host's.
	grep '^nameserver' /etc/resolv.conf 2>/dev/null >"$STAGE/etc/resolv.conf" ||
		echo 'nameserver 127.0.0.1' >"$STAGE/etc/resolv.conf"
	echo errand-vm >"$STAGE/etc/hostname"
	: >"$STAGE/etc/fstab"
	mkdir -p "$STAGE"/{proc,sys,dev,run,tmp,root,var/tmp,newroot}
	ln -s ../run "$STAGE/var/run"
	chmod 1777 "$STAGE/tmp" "$STAGE/var/tmp"

	# errand: its binaries and the kernel-level tests, at /errand.
	mkdir -p "$STAGE/errand/build/bin" "$STAGE/errand/build/selftests"
	for f in "$ROOT"/build/bin/*; do
		[ -f "$f" ] && [ -x "$f" ] && { cp -p "$f" "$STAGE/errand/build/bin/"; stage_bin "$f"; }
	done
	for f in "$ROOT"/build/selftests/*; do
		[ -f "$f" ] && [ -x "$f" ] && { cp -p "$f" "$STAGE/errand/build/selftests/"; stage_bin "$f"; }
	done
	(cd "$ROOT" && tar -cf - --exclude=selftests/vm selftests) | tar -xf - -C "$STAGE/errand"
	[ -f "$ROOT/GUARANTEES.md" ] && cp "$ROOT/GUARANTEES.md" "$STAGE/errand/"

	install -m 0755 "$ROOT/image/init" "$STAGE/init"
	cpio_out "$out"
}

# A minimal python3 (the tests use it where it is, for JSON): the interpreter,
# the minimal standard library, json.
stage_python() {
	local py=/usr/bin/python3.11 lib=/usr/lib/python3.11 f
	[ -x $py ] && dpkg -L libpython3.11-minimal >/dev/null 2>&1 || return 0
	stage_bin $py
	ln -sf python3.11 "$STAGE/usr/bin/python3"
	while read -r f; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		mkdir -p "$STAGE$(dirname "$f")"
		cp -p "$f" "$STAGE$f"
		case $f in
		*.so) stage_bin "$f" ;;
		esac
	done < <(dpkg -L libpython3.11-minimal python3.11-minimal | grep "^$lib/")
	for f in "$lib/json" "$lib"/lib-dynload/_json.*.so; do
		[ -e "$f" ] || continue
		mkdir -p "$STAGE$(dirname "$f")"
		cp -a "$f" "$STAGE$f"
	done
	# Bytecode the host already compiled, so start-up under TCG compiles nothing.
	while read -r f; do
		mkdir -p "$STAGE$(dirname "$f")"
		cp -p "$f" "$STAGE$f"
	done < <(cd "$STAGE$lib" && find . -name '*.py' | while read -r p; do
		d=$(dirname "$p")
		b=$(basename "$p" .py)
		c=$lib/$d/__pycache__/$b.cpython-311.pyc
		[ -f "$c" ] && echo "$c"
	done)
}

build_modules() {
	local kroot=$1 kver=$2 out=$3 mdir m line p rel want=() without=() w
	shift 3
	while [ $# -gt 0 ]; do
		case $1 in
		--without) without+=("$2"); shift 2 ;;
		*) err "modules: unknown argument $1" ;;
		esac
	done
	mdir=$kroot/lib/modules/$kver
	[ -d "$mdir" ] || err "no modules for $kver under $kroot/lib/modules"
	command -v depmod >/dev/null && command -v modprobe >/dev/null ||
		err "depmod/modprobe are not installed (Debian package kmod)"
	# An unpacked package has no modules.dep: make one in place.
	[ -f "$mdir/modules.dep" ] || depmod -b "$kroot" "$kver" ||
		err "depmod -b $kroot $kver failed"
	new_stage
	mkdir -p "$STAGE/lib/modules/$kver" "$STAGE/etc/vmtest"
	: >"$STAGE/etc/vmtest/modules"
	while read -r m; do
		m=${m%%#*}
		m=$(echo "$m" | tr -d ' \t')
		[ -n "$m" ] && want+=("$m")
	done <"$ROOT/image/modules.list"
	for m in "${want[@]}"; do
		# Listed even when left out: the VM then reports it missing.
		echo "$m" >>"$STAGE/etc/vmtest/modules"
		for w in "${without[@]}"; do
			[ "$m" = "$w" ] && continue 2
		done
		# "insmod /path/x.ko[.xz]" lines, dependencies first; "builtin x" for
		# what the kernel has built in; nothing (an error) when it has neither.
		# (the init says which are missing: one this kernel lacks is not an
		# error here, where pipefail would end the script without a word)
		{ modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null || true; } | while read -r line; do
			case $line in
			insmod\ *) ;;
			*) continue ;;
			esac
			p=$(echo "$line" | awk '{ print $2 }')
			rel=${p#*/lib/modules/"$kver"/}
			for w in "${without[@]}"; do
				case $(basename "$rel") in
				"$w".ko*|"${w//_/-}".ko*) continue 2 ;;
				esac
			done
			mkdir -p "$STAGE/lib/modules/$kver/$(dirname "$rel")"
			case $rel in
			*.ko.xz) xz -dc "$p" >"$STAGE/lib/modules/$kver/${rel%.xz}" ;;
			*.ko.zst) zstd -qdc "$p" >"$STAGE/lib/modules/$kver/${rel%.zst}" ;;
			*.ko.gz) gzip -dc "$p" >"$STAGE/lib/modules/$kver/${rel%.gz}" ;;
			*) cp "$p" "$STAGE/lib/modules/$kver/$rel" ;;
			esac
		done
	done
	for f in modules.builtin modules.builtin.modinfo modules.order; do
		[ -f "$mdir/$f" ] && cp "$mdir/$f" "$STAGE/lib/modules/$kver/"
	done
	depmod -b "$STAGE" "$kver" || err "depmod of the staged modules failed"
	# Only the modules: the userland part has the links into /usr.
	rm -f "$STAGE/bin" "$STAGE/sbin" "$STAGE/lib" "$STAGE/lib64"
	rmdir "$STAGE/usr/bin" "$STAGE/usr/sbin" "$STAGE/usr/lib64"
	cpio_out "$out"
}

case ${1:-} in
userland)
	[ $# = 2 ] || err "usage: image/initramfs.sh userland OUT.cpio"
	build_userland "$2"
	;;
modules)
	[ $# -ge 4 ] || err "usage: image/initramfs.sh modules KROOT KVER OUT.cpio [--without MOD]..."
	shift
	build_modules "$@"
	;;
*)
	err "usage: image/initramfs.sh userland OUT.cpio | modules KROOT KVER OUT.cpio [--without MOD]..."
	;;
esac
