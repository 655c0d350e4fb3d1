# The kernels vmtests boots: fetched with apt-get download from the Debian
# archive this machine already uses, kept in $CACHE (outside the tree), and
# unpacked there. Sourced by vmtests/run.
#
#   kernel_get NAME   sets KIMAGE (the kernel image), KROOT (the root under
#                     which lib/modules/KVER lies), KVER; or KERR (why not)
#                     and KSKIP=1 where the kernel is simply not on this
#                     machine (host), not broken
#
# Layout of $CACHE:
#   debs/                     the downloaded linux-image packages
#   trees/<package file>/     each unpacked (boot/, lib/modules/), with
#                             modules.dep made by depmod
#   apt-trixie/               the private APT configuration for Debian 13:
#                             trixie.sources, its lists and package cache.
#                             Only apt-get update and download use it.
# shellcheck shell=bash disable=SC2012,SC2034

# shellcheck source=image/mirror.sh disable=SC2153 # ROOT is vmtests/run's
. "$ROOT/image/mirror.sh"

# The package that the metapackage linux-image-amd64 points at in the lists
# of the given APT options, and its file name in the archive.
resolve_image() {
	apt-cache "$@" depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9].*-amd64$/ { print $2; exit }'
}

archive_filename() {
	local pkg=$1
	shift
	apt-cache "$@" show --no-all-versions "$pkg" 2>/dev/null | awk '$1 == "Filename:" { print $2; exit }' |
		sed 's|.*/||'
}

# download FILE_PATTERN [APT OPTIONS]: apt-get download of the resolved
# package into $CACHE/debs; sets DEB.
download_image() {
	local label=$1 pkg file
	shift
	DEB=
	pkg=$(resolve_image "$@")
	if [ -z "$pkg" ]; then
		KERR="linux-image-amd64 is not in the APT lists for $label"
		return 1
	fi
	file=$(archive_filename "$pkg" "$@")
	mkdir -p "$CACHE/debs"
	if [ -n "$file" ] && [ -s "$CACHE/debs/$file" ]; then
		DEB=$CACHE/debs/$file
		return 0
	fi
	if ! (cd "$CACHE/debs" && apt-get "$@" -o APT::Sandbox::User=root -q download "$pkg") \
		>"$CACHE/debs/download.log" 2>&1; then
		KERR="apt-get download $pkg failed for $label: $(grep -E '^(E|Err):' "$CACHE/debs/download.log" | head -n 1)"
		return 1
	fi
	DEB=$(ls -t "$CACHE/debs/${pkg}_"*.deb 2>/dev/null | head -n 1)
	[ -n "$DEB" ] || { KERR="apt-get download $pkg left no package in $CACHE/debs"; return 1; }
}

# Unpacks DEB (and the packages after it: a kernel split into image,
# binary and modules packages) once into $CACHE/trees and sets KROOT, KVER,
# KIMAGE.
unpack_image() {
	local deb=$1 tree part
	tree=$CACHE/trees/$(basename "$deb" .deb)
	if [ ! -f "$tree/.complete" ]; then
		rm -rf "$tree" "$tree.tmp"
		mkdir -p "$tree.tmp"
		for part in "$@"; do
			if ! dpkg-deb -x "$part" "$tree.tmp"; then
				rm -rf "$tree.tmp"
				KERR="cannot unpack $part"
				return 1
			fi
		done
		# Debian 13 puts modules in usr/lib/modules; depmod -b wants lib/modules.
		[ ! -e "$tree.tmp/lib" ] && [ -d "$tree.tmp/usr/lib/modules" ] && ln -s usr/lib "$tree.tmp/lib"
		mv "$tree.tmp" "$tree"
	fi
	KVER=$(ls "$tree/lib/modules" 2>/dev/null | head -n 1)
	KROOT=$tree
	KIMAGE=$tree/boot/vmlinuz-$KVER
	# newer packages keep the image beside its modules
	[ -f "$KIMAGE" ] || KIMAGE=$tree/lib/modules/$KVER/vmlinuz
	if [ -z "$KVER" ] || [ ! -f "$KIMAGE" ]; then
		KERR="$deb holds no boot/vmlinuz-* (or lib/modules/*/vmlinuz) with its lib/modules/*"
		return 1
	fi
	if [ ! -f "$tree/.complete" ]; then
		depmod -b "$tree" "$KVER" || { KERR="depmod -b $tree $KVER failed"; return 1; }
		touch "$tree/.complete"
	fi
}

# The newest cached package matching GLOB: used when the archive cannot be
# reached, so a cached kernel keeps working offline.
cached_deb() {
	# shellcheck disable=SC2086 # $1 is a glob
	ls -t "$CACHE"/debs/$1 2>/dev/null | head -n 1
}

# prune GLOB KEEP: removes the cached packages matching GLOB other than KEEP,
# and their unpacked trees (an older point release of the same kernel).
prune() {
	local f
	for f in "$CACHE"/debs/$1; do
		[ -f "$f" ] && [ "$f" != "$2" ] || continue
		rm -rf "$f" "$CACHE/trees/$(basename "$f" .deb)"
	done
}

kernel_debian61() {
	local err
	if ! download_image "Debian 12 (the host's sources)"; then
		# Lists may be stale (the archive dropped that version): refresh once.
		err=$KERR
		KERR=
		apt-get -q update >"$CACHE/apt-update.log" 2>&1
		if ! download_image "Debian 12 (the host's sources)"; then
			DEB=$(cached_deb 'linux-image-6.1.*-amd64_*.deb')
			[ -n "$DEB" ] || { KERR="$err; and after apt-get update: $KERR"; return 1; }
			KERR=
			echo "  [debian-6.1] the archive is not reachable: using the cached $(basename "$DEB")" >&2
		fi
	fi
	prune 'linux-image-6.1.*-amd64_*.deb' "$DEB"
	unpack_image "$DEB"
}

TRIXIE=$CACHE/apt-trixie
trixie_opts() {
	echo "-o Dir::Etc::sourcelist=$TRIXIE/trixie.sources -o Dir::Etc::sourceparts=$TRIXIE/sources.d" \
		"-o Dir::State::Lists=$TRIXIE/lists -o Dir::Cache=$TRIXIE/cache" \
		"-o Dir::Etc::preferences=$TRIXIE/preferences -o Dir::Etc::preferencesparts=$TRIXIE/sources.d"
}

# The private APT configuration for Debian 13 and its lists, refreshed when
# older than a day. Sets TRIXIE_MAIN.
kernel_debian612_lists() {
	local main sec opts
	main=$(host_mirror bookworm)
	sec=$(host_mirror bookworm-security)
	[ -n "$main" ] || main=http://deb.debian.org/debian
	[ -n "$sec" ] || sec=${main%/debian}/debian-security
	mkdir -p "$TRIXIE/sources.d" "$TRIXIE/lists/partial" "$TRIXIE/cache/archives/partial"
	: >"$TRIXIE/preferences"
	cat >"$TRIXIE/trixie.sources.new" <<EOF
# Debian 13, for apt-get download of its kernel by errand's vmtests only.
# Never listed in /etc/apt: nothing is installed from it.
Types: deb
URIs: $main
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $sec
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	mv "$TRIXIE/trixie.sources.new" "$TRIXIE/trixie.sources"
	read -ra opts <<<"$(trixie_opts)"
	# The lists are refreshed when older than a day (or missing).
	if [ -z "$(find "$TRIXIE/lists" -maxdepth 1 -name '*_InRelease' -mtime -1 2>/dev/null | head -n 1)" ]; then
		apt-get "${opts[@]}" -o APT::Sandbox::User=root -q update >"$TRIXIE/update.log" 2>&1 ||
			echo "  [debian-6.12] apt-get update for Debian 13 ($main) failed: $(grep -E '^(E|Err|W):' "$TRIXIE/update.log" | head -n 1)" >&2
	fi
	TRIXIE_MAIN=$main
}

kernel_debian612() {
	local main opts err
	kernel_debian612_lists
	main=$TRIXIE_MAIN
	read -ra opts <<<"$(trixie_opts)"
	if ! download_image "Debian 13 ($main)" "${opts[@]}"; then
		err=$KERR
		DEB=$(cached_deb 'linux-image-6.12.*-amd64_*.deb')
		[ -n "$DEB" ] || { KERR="$err (is $main reachable? see $TRIXIE/update.log)"; return 1; }
		KERR=
		echo "  [debian-6.12] Debian 13's archive is not reachable: using the cached $(basename "$DEB")" >&2
	fi
	prune 'linux-image-6.12.*-amd64_*.deb' "$DEB"
	unpack_image "$DEB"
}

# The newest kernel Debian's archive offers: trixie-backports'
# linux-image-amd64 (7.3 when this was written; sid and experimental hold no
# newer release), fetched as debian-6.12 is, through a private APT
# configuration of its own (CACHE/apt-backports) that lists trixie-backports
# alone, so that linux-image-amd64 resolves there.
BACKPORTS=$CACHE/apt-backports
backports_opts() {
	echo "-o Dir::Etc::sourcelist=$BACKPORTS/backports.sources -o Dir::Etc::sourceparts=$BACKPORTS/sources.d" \
		"-o Dir::State::Lists=$BACKPORTS/lists -o Dir::Cache=$BACKPORTS/cache" \
		"-o Dir::Etc::preferences=$BACKPORTS/preferences -o Dir::Etc::preferencesparts=$BACKPORTS/sources.d"
}

kernel_debian_newest() {
	local main opts err
	main=$(host_mirror bookworm)
	[ -n "$main" ] || main=http://deb.debian.org/debian
	mkdir -p "$BACKPORTS/sources.d" "$BACKPORTS/lists/partial" "$BACKPORTS/cache/archives/partial"
	: >"$BACKPORTS/preferences"
	cat >"$BACKPORTS/backports.sources.new" <<EOF
# Debian 13's backports, for apt-get download of its newest kernel by errand's
# vmtests only. Never listed in /etc/apt: nothing is installed from it.
Types: deb
URIs: $main
Suites: trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	mv "$BACKPORTS/backports.sources.new" "$BACKPORTS/backports.sources"
	read -ra opts <<<"$(backports_opts)"
	if [ -z "$(find "$BACKPORTS/lists" -maxdepth 1 -name '*_InRelease' -mtime -1 2>/dev/null | head -n 1)" ]; then
		apt-get "${opts[@]}" -o APT::Sandbox::User=root -q update >"$BACKPORTS/update.log" 2>&1 ||
			echo "  [debian-newest] apt-get update for trixie-backports ($main) failed: $(grep -E '^(E|Err|W):' "$BACKPORTS/update.log" | head -n 1)" >&2
	fi
	if ! download_image "trixie-backports ($main)" "${opts[@]}"; then
		err=$KERR
		DEB=$(cached_deb 'linux-image-*+deb13-amd64_*bpo*.deb')
		[ -n "$DEB" ] || { KERR="$err (is $main reachable? see $BACKPORTS/update.log)"; return 1; }
		KERR=
		echo "  [debian-newest] trixie-backports is not reachable: using the cached $(basename "$DEB")" >&2
	fi
	prune 'linux-image-*+deb13-amd64_*bpo*.deb' "$DEB"
	# From 7.x the image package only depends on the kernel (linux-binary-V),
	# its modules (linux-modules-V) and their lists and config (linux-base-V,
	# modules.builtin among them), which are fetched beside it.
	local parts=() dep file
	for dep in $(dpkg-deb -f "$DEB" Depends | tr ',|' '\n\n' | awk '{ print $1 }' |
		grep -E '^linux-(base|binary|modules)-[0-9]'); do
		file=$(archive_filename "$dep" "${opts[@]}")
		if [ -z "$file" ] || [ ! -s "$CACHE/debs/$file" ]; then
			(cd "$CACHE/debs" && apt-get "${opts[@]}" -o APT::Sandbox::User=root -q download "$dep") \
				>"$CACHE/debs/download.log" 2>&1
			file=$(ls -t "$CACHE/debs/${dep}_"*.deb 2>/dev/null | head -n 1)
			file=${file##*/}
		fi
		[ -n "$file" ] && [ -s "$CACHE/debs/$file" ] ||
			{ KERR="apt-get download $dep failed: $(grep -E '^(E|Err):' "$CACHE/debs/download.log" | head -n 1)"; return 1; }
		parts+=("$CACHE/debs/$file")
	done
	unpack_image "$DEB" "${parts[@]}"
}

kernel_host() {
	local r
	r=$(uname -r)
	KIMAGE=/boot/vmlinuz-$r
	KVER=$r
	KROOT=/
	if [ ! -r "$KIMAGE" ]; then
		KERR="$KIMAGE is not readable here (this machine's kernel image is not in /boot)"
		KSKIP=1
		return 1
	fi
	if [ ! -d "/lib/modules/$r" ]; then
		KERR="/lib/modules/$r does not exist: the running kernel's modules are not installed"
		KSKIP=1
		return 1
	fi
}

kernel_get() {
	local name=$1
	mkdir -p "$CACHE" 2>/dev/null || { KERR="cannot create the cache $CACHE"; return; }
	case $name in
	debian-6.1) kernel_debian61 ;;
	debian-6.12) kernel_debian612 ;;
	debian-newest) kernel_debian_newest ;;
	host) kernel_host ;;
	*.deb)
		if [ -f "$name" ]; then
			unpack_image "$(readlink -f "$name")"
		else
			KERR="no such package file: $name"
		fi
		;;
	*) KERR="unknown kernel '$name' (debian-6.1, debian-6.12, debian-newest, host or a linux-image .deb)" ;;
	esac
	[ -z "$KERR" ] || return 0
	command -v depmod >/dev/null || KERR="depmod is not installed (Debian package kmod)"
	return 0
}
