/* libFuzzer target for the broker's registry messages (broker/registry.c):
 * whatever it takes must hold only stand-ins of the exact form, keys no file
 * could have held and secrets' values without CR, LF or NUL, and written out again it must read
 * back the same. */
#include <stdio.h>
#include <string.h>

#include "broker/registry.h"
#include "selftests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct broker_msg m, again;
	char buf[BROKER_MSG_MAX * 2], a[ADDR_STRLEN];
	size_t len;

	if (broker_msg_parse((const char *)data, size, &m))
		return 0;
	INV(m.n_standins <= BROKER_PROVIDERS_MAX);
	if (m.type == BROKER_MSG_KEY || m.type == BROKER_MSG_REREAD) {
		INV(m.provider[0] && strlen(m.provider) <= BROKER_PROVIDER_MAX);
		len = (size_t)snprintf(buf, sizeof(buf), "%s %s",
				       m.type == BROKER_MSG_KEY ? "key" : "reread", m.provider);
		INV(m.type == BROKER_MSG_REREAD || (m.key_len && m.key_len <= BROKER_KEY_MAX));
		if (m.type == BROKER_MSG_KEY)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, " ");
		for (size_t i = 0; m.type == BROKER_MSG_KEY && i < m.key_len; i++) {
			INV((unsigned char)m.key[i] >= 0x20 && m.key[i] != 0x7f);
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%02x",
						(unsigned char)m.key[i]);
		}
		INV(len < sizeof(buf));
		INV(!broker_msg_parse(buf, len, &again));
		INV(again.type == m.type && !strcmp(again.provider, m.provider));
		INV(again.key_len == m.key_len && !memcmp(again.key, m.key, m.key_len));
		return 0;
	}
	if (m.type == BROKER_MSG_SECRET) {
		/* a value of any byte but CR, LF and NUL, and it reads back the same */
		INV(m.key_len && m.key_len <= BROKER_KEY_MAX && m.placeholder[0] && m.host[0]);
		len = (size_t)snprintf(buf, sizeof(buf), "secret %s ", m.placeholder);
		for (size_t i = 0; i < m.key_len; i++) {
			INV(m.key[i] != '\0' && m.key[i] != '\r' && m.key[i] != '\n');
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%02x",
						(unsigned char)m.key[i]);
		}
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, " %s", m.host);
		INV(len < sizeof(buf));
		INV(!broker_msg_parse(buf, len, &again));
		INV(again.type == m.type && !strcmp(again.placeholder, m.placeholder) &&
		    !strcmp(again.host, m.host));
		INV(again.key_len == m.key_len && !memcmp(again.key, m.key, m.key_len));
		return 0;
	}
	INV(m.session[0] && strlen(m.session) <= BROKER_SESSION_MAX);
	if (m.type == BROKER_MSG_UNREGISTER) {
		len = (size_t)snprintf(buf, sizeof(buf), "unregister %s", m.session);
	} else {
		INV(m.type == BROKER_MSG_REGISTER);
		len = (size_t)snprintf(buf, sizeof(buf), "register %s %s", m.session,
				       addr_str(&m.src, a));
		for (size_t i = 0; i < m.n_standins; i++) {
			INV(broker_standin_valid(m.standins[i].value));
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, " %s=%s",
						m.standins[i].provider, m.standins[i].value);
		}
	}
	INV(len < sizeof(buf));
	INV(!broker_msg_parse(buf, len, &again));
	INV(again.type == m.type && !strcmp(again.session, m.session));
	INV(!memcmp(&again.src, &m.src, sizeof(m.src)) && again.n_standins == m.n_standins);
	for (size_t i = 0; i < m.n_standins; i++)
		INV(!strcmp(again.standins[i].provider, m.standins[i].provider) &&
		    !strcmp(again.standins[i].value, m.standins[i].value));
	return 0;
}
