# Shared by the benchmarks that measure calls a second against nginx and
# mitmproxy (bench/broker.sh, bench/intercept.sh): each peer started in the
# world's agent namespace ($W-host) with its config, pid and logs under
# $W_DIR/NAME, ended by world_down through W_PIDS. Needs a world (world.sh).
#
#   peers_install                  wrk, nginx-light and mitmproxy, when missing
#   nginx_up NAME HTTP_BLOCK       nginx, $(nproc) workers, no access log, with
#                                  HTTP_BLOCK (upstreams and servers) inside
#                                  its http { }
#   mitm_up NAME HOST ADDR ARGS... mitmdump -q ARGS, HOST resolving to ADDR
#                                  through an /etc/hosts of its own mount
#                                  namespace, its CA in $W_DIR/NAME/conf
#   wait_ok CMD...                 runs CMD until it succeeds (10 s at most)
#   wrk_rate                       the Requests/sec of wrk's report on stdin;
#                                  "0" and wrk's complaint on stderr when any
#                                  call failed or was answered other than 2xx
# shellcheck shell=bash

peers_install() {
	command -v wrk >/dev/null && command -v nginx >/dev/null && command -v mitmdump >/dev/null && return 0
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends wrk nginx-light mitmproxy >&2 ||
		{ echo "bench: cannot install wrk, nginx-light and mitmproxy" >&2; return 1; }
}

nginx_up() {
	local d=$W_DIR/$1
	mkdir -p "$d"
	cat >"$d/nginx.conf" <<EOF
worker_processes $(nproc);
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	uwsgi_temp_path $d/uwsgi;
	scgi_temp_path $d/scgi;
$2
}
EOF
	in_host nginx -c "$d/nginx.conf" -g 'daemon off;' >"$d/out" 2>&1 &
	W_PIDS+=($!)
}

mitm_up() {
	local d=$W_DIR/$1 host=$2 addr=$3
	shift 3
	mkdir -p "$d"
	printf '127.0.0.1 localhost\n%s %s\n' "$addr" "$host" >"$d/hosts"
	# shellcheck disable=SC2016 # expanded by that sh
	in_host unshare -m sh -c 'h=$1; shift; mount --bind "$h" /etc/hosts && exec mitmdump "$@"' \
		sh "$d/hosts" -q --set confdir="$d/conf" "$@" >"$d/out" 2>&1 &
	W_PIDS+=($!)
}

wait_ok() {
	local n=0
	until "$@" >/dev/null 2>&1; do
		[ $n -ge 100 ] && { echo "bench: '$*' did not succeed in 10 s" >&2; return 1; }
		sleep 0.1
		n=$((n + 1))
	done
}

wrk_rate() {
	awk '/^Requests\/sec:/ { r = $2 }
		/Non-2xx|Socket errors/ { bad = bad $0 "; " }
		END { if (bad != "" || r == "") { print "bench: wrk: " (bad != "" ? bad : "no report") > "/dev/stderr"; print 0 } else print r }'
}
