# host_mirror SUITE: the Debian mirror this machine's APT uses for SUITE
# (bookworm, bookworm-security), read from /etc/apt/sources.list and
# sources.list.d, one-line and deb822 forms; nothing when none is listed.
# Sourced by image/rootfs.sh and vmtests/kernels.sh: the root filesystem and
# the kernels come from the same archive as the machine's own packages.
# shellcheck shell=bash

host_mirror() {
	local suite=$1 f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		case $f in
		*.sources)
			awk -v s="$suite" '
				function flush() { if (ok && uri != "" && types ~ /(^| )deb( |$)/) { print uri; found = 1; exit } ok = 0; uri = ""; types = "" }
				/^[ \t]*$/ { flush(); next }
				/^[ \t]*#/ { next }
				tolower($1) == "types:" { types = ""; for (i = 2; i <= NF; i++) types = types " " $i; types = types " " }
				tolower($1) == "uris:" { uri = $2 }
				tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
				tolower($1) == "enabled:" && tolower($2) == "no" { uri = ""; ok = 0; types = "" }
				END { if (!found) flush() }' "$f"
			;;
		*)
			awk -v s="$suite" '$1 == "deb" {
				i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == s) { print $i; exit } }' "$f"
			;;
		esac
	done | head -n 1
}

