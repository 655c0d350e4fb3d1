# errand: one non-recursive build into build/.
#   make            build everything (build/bin/*)
#   make deps       install the Debian packages the build, demo and tests need
#   make demo       a world, one session, what it reached and what it was refused
#   make check      every selftest, as root, in worlds of its own
#   make SANITIZE=1 build with ASan and UBSan

CC      ?= gcc
CLANG   ?= clang
BPFTOOL ?= bpftool
BUILD   := build

PKGS := libnl-route-3.0 libnftables jansson libbpf libcares libseccomp sqlite3
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Linked into the binaries from the archives the -dev packages ship, but libc;
# libnftables (and the five libraries it brings) is loaded when NAT is first
# written (agent/nat.c). Every shared library costs each exec its mapping and
# relocations, and errandctl, the launcher and the DNS worker (the agent's
# binary) are exec'd at each session start: errandctl went from 2.9 to 1.4
# ms of CPU to start, and libnftables alone was 0.5 ms of every exec.
STATIC_LIB_LIST := -lnl-route-3 -lnl-3 -ljansson -lbpf -lelf -lz -lcares -lseccomp -lsqlite3
STATIC_LIBS := -Wl,-Bstatic $(STATIC_LIB_LIST) -Wl,-Bdynamic
PKG_LIBS   := $(STATIC_LIBS) -lm

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wimplicit-fallthrough
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 $(WARN) -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE \
	-I. -Ibpf -I$(BUILD)/bpf $(PKG_CFLAGS)
LDFLAGS += -pie -Wl,-z,relro,-z,now
ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror -Ibpf

# Debian 12 packages for build, demo and tests. Kept in one place: make deps
# installs them and deps-check asks for them when one is missing.
DEB_PACKAGES := gcc make pkg-config clang llvm bpftool libbpf-dev libxdp-dev \
	libnl-3-dev libnl-route-3-dev libjansson-dev libnftables-dev nftables \
	iproute2 util-linux procps libc-ares-dev libclang-rt-14-dev libseccomp-dev libsqlite3-dev passwd \
	qemu-system-x86 busybox-static cpio kmod xz-utils python3 groff-base e2fsprogs git \
	debootstrap strace

LIB_SRCS      := $(wildcard lib/*.c)
AGENT_SRCS    := $(filter-out agent/errandctl.c agent/agentd.c agent/ctlfront.c,$(wildcard agent/*.c))
LAUNCH_SRCS   := $(wildcard launcher/*.c)
TOOL_SRCS     := $(wildcard selftests/tools/*.c)
UNIT_SRCS     := $(wildcard selftests/unit/*.c)
# The broker's parts errandctl and the agent link: the registry the agent
# registers sessions on, and receipts.db, which errandctl reads. Never its
# HTTP parser or scrubber (broker/http.c, scrub.c): the broker and the tests
# of them alone link those (mk/broker.mk). The errand-broker binary itself is
# built by mk/broker.mk.
BROKER_CLIENT_SRCS := broker/registry.c broker/receipts.c broker/scrub.c

LIB_OBJS    := $(LIB_SRCS:%.c=$(BUILD)/%.o)
AGENT_OBJS  := $(AGENT_SRCS:%.c=$(BUILD)/%.o)
LAUNCH_OBJS := $(LAUNCH_SRCS:%.c=$(BUILD)/%.o)
BROKER_CLIENT_OBJS := $(BROKER_CLIENT_SRCS:%.c=$(BUILD)/%.o)
# The daemon is no client of itself: errandctl alone speaks to it (agent/client.c).
AGENTD_OBJS := $(filter-out $(BUILD)/agent/client.o,$(AGENT_OBJS))

BPF_OBJS  := $(BUILD)/bpf/egress.bpf.o $(BUILD)/bpf/rules.bpf.o
BENCH_BPF := $(BUILD)/bench/xdp_pass.bpf.o
SKELETONS := $(BUILD)/bpf/egress.skel.h $(BUILD)/bpf/rules.skel.h

BINS  := $(BUILD)/bin/errandctl $(BUILD)/bin/errandctl-full $(BUILD)/bin/errand-agent \
	$(BUILD)/bin/errand-launch
TOOLS := $(TOOL_SRCS:selftests/tools/%.c=$(BUILD)/selftests/%)
UNITS := $(UNIT_SRCS:selftests/unit/%.c=$(BUILD)/selftests/unit-%)

# Fuzz targets: selftests/fuzz/X.c is a libFuzzer target over the sources
# listed in FUZZ_SRCS_X. make check runs each briefly (selftests/fuzz/fuzz.sh),
# make fuzz for FUZZ_SECONDS each.
FUZZ_SRCS_dnsmsg := agent/dnsmsg.c lib/addr.c
FUZZ_SRCS_http := broker/http.c
FUZZ_SRCS_scrub := broker/scrub.c
FUZZ_SRCS_control := agent/control.c
FUZZ_LIBS_control := -ljansson
FUZZ_TARGETS := $(patsubst selftests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard selftests/fuzz/*.c))
FUZZ_SECONDS ?= 300

# Parts with rules of their own (the broker, installation) add to BINS,
# DEB_PACKAGES and the rest here, before the rules below read them.
include $(sort $(wildcard mk/*.mk))
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -I. -Ibpf -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined

.SECONDEXPANSION:
$(BUILD)/fuzz/%: selftests/fuzz/%.c $$(FUZZ_SRCS_$$*) lib/log.c lib/escape.c
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_SRCS_$*) lib/log.c lib/escape.c $(FUZZ_LIBS_$*)

# Keep every intermediate (objects, skeletons): make would otherwise delete
# them after each build and rebuild them next time.
.SECONDARY:
.PHONY: all deps deps-check accounts print-accounts demo check bench fuzz format-check clean
all: $(BINS) $(TOOLS) $(UNITS) $(FUZZ_TARGETS)

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c bpf/%.h bpf/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bench/%.bpf.o: bench/%.bpf.c bpf/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# Every C object may include a skeleton, so skeletons come first.
$(BUILD)/%.o: %.c $(SKELETONS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# errandctl is exec'd for every session too (errandctl run), so it is a
# static PIE as well, libc and libm included: its exec to main without the
# loader mapping and relocating them, 0.90 to 0.68 ms here (page faults 93
# to 62). What it calls of glibc's that loads a library at run time (NSS
# for the session account's ids, dlopen of libnftables when it runs a
# session itself) needs the glibc it was linked against, which is the
# host's when it is built where it runs. The linker warns of each such call
# (nine warnings a build, each after the line naming the function): a link
# that succeeds leaves those out of its output, one that fails says it all.
ifeq ($(SANITIZE),1)
CTL_LINK := $(PKG_LIBS)
else
CTL_LINK := -static-pie $(STATIC_LIB_LIST) -lm
endif
CTL_LINK_KNOWN := in statically linked applications requires at runtime the shared libraries
$(BUILD)/bin/errandctl-full: $(BUILD)/agent/errandctl.o $(AGENT_OBJS) $(BROKER_CLIENT_OBJS) $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(CTL_LINK) 2>$@.link; rc=$$?; \
		if [ $$rc = 0 ]; then grep -vF -e '$(CTL_LINK_KNOWN)' -e ': in function ' $@.link >&2; \
		else cat $@.link >&2; fi; rm -f $@.link; exit $$rc

# errandctl itself is its front (agent/ctlfront.c): no libc, so its exec
# skips glibc's start, whose CPUID instructions trap on a virtual machine
# (0.7 ms of every exec here). It hands errandctl run to the agent, and every
# other command line to errandctl-full. Its own flags: nothing of libc's may
# be called, not even by the compiler for a loop it recognizes.
FRONT_CFLAGS := -std=gnu11 $(WARN) -O2 -g -D_GNU_SOURCE -I. -ffreestanding -fno-builtin \
	-fno-tree-loop-distribute-patterns -fno-stack-protector -fno-pie \
	-fcf-protection=none $(PKG_CFLAGS)
$(BUILD)/agent/ctlfront.o: agent/ctlfront.c
	@mkdir -p $(@D)
	$(CC) $(FRONT_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/bin/errandctl: $(BUILD)/agent/ctlfront.o
	@mkdir -p $(@D)
	$(CC) -nostdlib -static -no-pie -Wl,-z,noexecstack -o $@ $^

# The agent alone tells systemd it is ready (Type=notify, agentd.c).
$(BUILD)/bin/errand-agent: $(BUILD)/agent/agentd.o $(AGENTD_OBJS) $(BROKER_CLIENT_OBJS) $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The launcher stays small: libseccomp and none of the agent's libraries.
# It is exec'd for every session (ahead, for a prepared network) and forks
# the session's PID 1, so it is linked whole, a static PIE: its start skips
# the dynamic loader's mapping and relocating of libc (an exec's CPU 2.0 to
# 1.0 ms here, page faults 58 to 33) and PID 1's fork has fewer mappings to
# copy. It calls nothing of glibc's that loads a library at run time (NSS,
# dlopen, iconv): --fatal-warnings makes the link fail if it ever does.
# ASan cannot link statically.
ifeq ($(SANITIZE),1)
LAUNCH_LINK := -Wl,-Bstatic -lseccomp -Wl,-Bdynamic
else
LAUNCH_LINK := -static-pie -Wl,--fatal-warnings -lseccomp
endif
$(BUILD)/bin/errand-launch: $(LAUNCH_OBJS) $(BUILD)/lib/log.o $(BUILD)/lib/escape.o \
			    $(BUILD)/lib/strv.o $(BUILD)/lib/idmap.o $(BUILD)/lib/await.o
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCH_LINK)

$(BUILD)/selftests/%: $(BUILD)/selftests/tools/%.o $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The units link libnftables as well: plumbing asks nft itself.
$(BUILD)/selftests/unit-%: $(BUILD)/selftests/unit/%.o $(AGENT_OBJS) $(BROKER_CLIENT_OBJS) $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs libnftables 2>/dev/null)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (it installs Debian packages with apt-get)" >&2; exit 1; fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(DEB_PACKAGES)
	@$(MAKE) --no-print-directory accounts

# The unprivileged accounts sessions run as (sandbox.uid/gid default to it)
# and errand-broker runs as, and errand-dns, which the DNS worker runs as.
ACCOUNTS := errand-session errand-broker errand-dns
accounts:
	@for u in $(ACCOUNTS); do \
		getent passwd $$u >/dev/null || \
			useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
				--user-group $$u; \
	done

# For an installer that makes them elsewhere (vmtests/systemd, in its image).
print-accounts:
	@echo $(ACCOUNTS)

# Installs only when a package is missing, so demo and check work as the first
# command typed on a fresh machine and cost nothing after.
deps-check:
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then echo "installing missing packages: $$missing"; $(MAKE) --no-print-directory deps; \
	else $(MAKE) --no-print-directory accounts; fi

demo: deps-check
	@$(MAKE) --no-print-directory all
	@selftests/demo.sh

check: deps-check
	@$(MAKE) --no-print-directory all
	@selftests/run

# Peers the benchmarks compare against; not needed to build or test.
BENCH_PACKAGES := dnsperf dnsmasq-base bubblewrap hyperfine wrk nginx-light mitmproxy squid tinyproxy

bench: deps-check
	@command -v dnsperf >/dev/null && command -v dnsmasq >/dev/null && command -v bwrap >/dev/null && command -v hyperfine >/dev/null && \
		command -v wrk >/dev/null && command -v nginx >/dev/null && command -v mitmdump >/dev/null && \
		command -v squid >/dev/null && command -v tinyproxy >/dev/null || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(BENCH_PACKAGES)
	@$(MAKE) --no-print-directory all $(BENCH_BPF)
	@bench/all.sh

fuzz: deps-check
	@$(MAKE) --no-print-directory all
	@FUZZ_SECONDS=$(FUZZ_SECONDS) selftests/fuzz/fuzz.sh

format-check:
	@clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h' | grep -v vmlinux.h)

clean:
	rm -rf $(BUILD)

# ---- vmtests and image (vmtests/, image/, selftests/vm/) ---------------------
#   make vmcheck   the kernel-level selftests inside VMs: Debian 12's 6.1,
#                  Debian 13's 6.12 and this machine's own kernel where its
#                  image is readable (vmtests/run; kernels cached in
#                  /var/cache/errand-vmtests), and Debian 12 booted with
#                  systemd (vmtests/systemd). make check runs the 6.1 one
#                  (selftests/vm/kernel61.sh) and the systemd one
#                  (selftests/vm/systemd.sh).
#   make image     the vmtest initramfs (build/vmtests/userland.cpio; each
#                  kernel's modules are added by vmtests/run) and the session
#                  root filesystem for errandctl run --image (image/rootfs.sh:
#                  Debian 12 minbase, cached in /var/cache/errand-image/debian-12,
#                  IMAGE_DIR=DIR to put it elsewhere)
VM_PACKAGES := qemu-system-x86 busybox-static cpio kmod xz-utils debootstrap
.PHONY: vmcheck image vm-deps
vm-deps:
	@missing=$$(for p in $(VM_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then echo "installing missing packages: $$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; fi

vmcheck: deps-check vm-deps
	@$(MAKE) --no-print-directory all
	@rc=0; vmtests/run || rc=1; vmtests/systemd || rc=1; exit $$rc

image: deps-check vm-deps
	@$(MAKE) --no-print-directory all
	@image/initramfs.sh userland $(BUILD)/vmtests/userland.cpio
	@echo "image: $(BUILD)/vmtests/userland.cpio"
	@image/rootfs.sh $(IMAGE_DIR)
