# make install / make uninstall: the binaries, man pages, bash completion and
# systemd unit. Included by the Makefile before its rules.
#
#   make install [PREFIX=/usr/local] [DESTDIR=]
#
# The binaries go together into $(ERRAND_LIBDIR), since errandctl (the front)
# finds errandctl-full, and errandctl-full and errand-agent find
# errand-launch, next to their own executable (the directory of
# /proc/self/exe, which names the file a symlink leads to);
# errandctl and errand-agent are symlinked into BINDIR and SBINDIR. Only the
# binaries built so far are installed. With DESTDIR empty, install also makes
# the group errand, whose members may use the agent's control socket.

# This file's rules come before the Makefile's: keep "make" meaning "make all".
.DEFAULT_GOAL := all

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
ERRAND_LIBDIR ?= $(PREFIX)/lib/errand
MAN8DIR ?= $(PREFIX)/share/man/man8
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
SYSTEMDUNITDIR ?= /lib/systemd/system
ERRAND_CONFDIR := /etc/errand

INSTALL_BINS := errandctl errandctl-full errand-agent errand-launch errand-broker
INSTALL_MANS := doc/errandctl.8 doc/errand-agent.8

.PHONY: install uninstall
install: all
	install -d -m 0755 "$(DESTDIR)$(ERRAND_LIBDIR)" "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(SBINDIR)" \
		"$(DESTDIR)$(MAN8DIR)" "$(DESTDIR)$(BASHCOMPDIR)" "$(DESTDIR)$(SYSTEMDUNITDIR)"
	@for b in $(INSTALL_BINS); do \
		if [ -f "$(BUILD)/bin/$$b" ]; then \
			echo "install -m 0755 $(BUILD)/bin/$$b $(DESTDIR)$(ERRAND_LIBDIR)/$$b"; \
			install -m 0755 "$(BUILD)/bin/$$b" "$(DESTDIR)$(ERRAND_LIBDIR)/$$b" || exit 1; \
		else \
			echo "install: $(BUILD)/bin/$$b is not built; not installed" >&2; \
		fi; \
	done
	@set -e; for link in "$(BINDIR)/errandctl" "$(SBINDIR)/errand-agent"; do \
		b=$${link##*/}; \
		if [ -f "$(DESTDIR)$(ERRAND_LIBDIR)/$$b" ]; then \
			echo "ln -sfr $(DESTDIR)$(ERRAND_LIBDIR)/$$b $(DESTDIR)$$link"; \
			ln -sfr "$(DESTDIR)$(ERRAND_LIBDIR)/$$b" "$(DESTDIR)$$link"; \
		fi; \
	done
	install -m 0644 $(INSTALL_MANS) "$(DESTDIR)$(MAN8DIR)/"
	install -m 0644 contrib/bash-completion/errandctl "$(DESTDIR)$(BASHCOMPDIR)/errandctl"
	sed 's|@SBINDIR@|$(SBINDIR)|g' contrib/systemd/errand-agent.service \
		>"$(DESTDIR)$(SYSTEMDUNITDIR)/errand-agent.service.tmp"
	chmod 0644 "$(DESTDIR)$(SYSTEMDUNITDIR)/errand-agent.service.tmp"
	mv "$(DESTDIR)$(SYSTEMDUNITDIR)/errand-agent.service.tmp" \
		"$(DESTDIR)$(SYSTEMDUNITDIR)/errand-agent.service"
	install -d -m 0700 "$(DESTDIR)$(ERRAND_CONFDIR)"
	@if [ -z "$(DESTDIR)" ] && ! getent group errand >/dev/null; then \
		echo "groupadd --system errand"; groupadd --system errand; \
	fi

# The configuration directory and the group stay: they may hold what the
# operator wrote and who may use the agent.
uninstall:
	rm -f $(addprefix "$(DESTDIR)$(ERRAND_LIBDIR)/,$(addsuffix ",$(INSTALL_BINS)))
	-rmdir "$(DESTDIR)$(ERRAND_LIBDIR)" 2>/dev/null
	rm -f "$(DESTDIR)$(BINDIR)/errandctl" "$(DESTDIR)$(SBINDIR)/errand-agent"
	rm -f $(addprefix "$(DESTDIR)$(MAN8DIR)/,$(addsuffix ",$(notdir $(INSTALL_MANS))))
	rm -f "$(DESTDIR)$(BASHCOMPDIR)/errandctl"
	rm -f "$(DESTDIR)$(SYSTEMDUNITDIR)/errand-agent.service"
