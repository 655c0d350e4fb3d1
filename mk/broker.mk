# errand-broker, the provider-route relay (broker/): BoringSSL for TLS (Debian's
# Android build, kept out of the way of OpenSSL), liburing for I/O, c-ares and
# SQLite as the rest of errand uses them. Only broker objects see BoringSSL's
# headers; broker/http.c, scrub.c, registry.c and receipts.c need none of it,
# since the unit tests and the fuzz targets link them, and errandctl and the
# agent the last two.
BINS += $(BUILD)/bin/errand-broker
DEB_PACKAGES += android-libboringssl-dev liburing-dev openssl curl ca-certificates

BORINGSSL_CFLAGS := -I/usr/include/android
BORINGSSL_LIBS := -L/usr/lib/x86_64-linux-gnu/android -Wl,-rpath,/usr/lib/x86_64-linux-gnu/android \
	-lssl -lcrypto

BROKER_SRCS := $(wildcard broker/*.c)
BROKER_OBJS := $(BROKER_SRCS:%.c=$(BUILD)/%.o)

$(BUILD)/broker/%.o: CFLAGS += $(BORINGSSL_CFLAGS)

# Only the libraries it uses: no libbpf, libnl or nftables in the relay.
BROKER_LIB_DEPS := $(addprefix $(BUILD)/lib/,config.o addr.o hostrule.o log.o escape.o strv.o)
BROKER_PKG_LIBS := $(shell pkg-config --libs jansson libcares sqlite3 libseccomp 2>/dev/null)

$(BUILD)/bin/errand-broker: $(BROKER_OBJS) $(BROKER_LIB_DEPS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(BROKER_PKG_LIBS) $(BORINGSSL_LIBS) -luring -lpthread

# The test provider: a TLS server that echoes what it receives.
$(BUILD)/selftests/tools/provider.o: CFLAGS += $(BORINGSSL_CFLAGS)
$(BUILD)/selftests/provider: $(BUILD)/selftests/tools/provider.o $(BROKER_CLIENT_OBJS) $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(BORINGSSL_LIBS) -lpthread

# The parser's and the scrubber's own tests link them (no binary but the
# broker carries them).
$(BUILD)/selftests/unit-http: $(BUILD)/broker/http.o
$(BUILD)/selftests/unit-scrub: $(BUILD)/broker/scrub.o
# and the receipt writer's itself, with the broker's log lines
$(BUILD)/selftests/unit-journal: $(BUILD)/broker/journal.o $(BUILD)/broker/blog.o
$(BUILD)/selftests/unit-journal: PKG_LIBS += -lpthread
# and the fibers' their scheduler, the ring calls and the broker's log lines
$(BUILD)/selftests/unit-fiber: $(BUILD)/broker/fiber.o $(BUILD)/broker/ring.o $(BUILD)/broker/blog.o
$(BUILD)/selftests/unit-fiber: PKG_LIBS += -luring -lpthread


# The registry's message format, the one thing the broker parses from the agent.
FUZZ_SRCS_registry := broker/registry.c broker/scrub.c lib/addr.c lib/strv.c
