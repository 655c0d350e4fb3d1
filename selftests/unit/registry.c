/* Guarantee: the broker's registry takes only well-formed messages (a session
 * id, an address, provider=stand-in pairs of the stand-in's exact form, no
 * provider twice), stand-ins are errand-session- and 64 fresh hex digits, and
 * a session's environment names each provider's variables by its kind; a
 * provider's key file is read to its first line, and a key the broker could
 * not redact from an answer is refused when it is read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/registry.h"
#include "lib/strv.h"
#include "selftests/unit/test.h"

static const char *S1 =
	"errand-session-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static int parse(const char *s, struct broker_msg *m)
{
	return broker_msg_parse(s, strlen(s), m);
}

static void test_parse(void)
{
	static const char *const bad[] = {
		"",
		"register",
		"register s1",
		"register s1 10.0.0.300",
		"register s1 10.213.0.2 p",
		"register s1 10.213.0.2 p=errand-session-00",
		"register s1 10.213.0.2 "
		"p=errand-session-0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
		"register s1 10.213.0.2 "
		"=errand-session-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"register s/1 10.213.0.2",
		"register s1  10.213.0.2",
		"register s1 10.213.0.2 ",
		"unregister",
		"unregister s1 extra",
		"stop s1",
	};
	struct broker_msg m;
	char buf[512];

	CHECK_INT(parse("register s1 10.213.0.2", &m), 0, "a registration without providers");
	CHECK_INT(m.type, BROKER_MSG_REGISTER, "is a registration");
	CHECK_STR(m.session, "s1", "of s1");
	snprintf(buf, sizeof(buf), "register s1 10.213.0.2 a=%s b-2=%s", S1, S1);
	CHECK_INT(parse(buf, &m), 0, "a registration with two providers");
	CHECK_INT((long long)m.n_standins, 2, "holds both stand-ins");
	CHECK_STR(m.standins[1].provider, "b-2", "the second provider's name");
	CHECK_STR(m.standins[1].value, S1, "the second stand-in");
	snprintf(buf, sizeof(buf), "register s1 10.213.0.2 a=%s a=%s", S1, S1);
	CHECK_INT(parse(buf, &m), -EINVAL, "a provider twice is refused");
	CHECK_INT(parse("unregister s1", &m), 0, "an unregistration");
	CHECK_INT(m.type, BROKER_MSG_UNREGISTER, "is an unregistration");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(parse(bad[i], &m), -EINVAL, "refused: \"%s\"", bad[i]);
	CHECK_INT(broker_msg_parse("unregister s1\0x", 15, &m), -EINVAL, "a NUL inside is refused");

	CHECK_INT(parse("key prov 736b2d61", &m), 0, "a key in hex");
	CHECK_INT(m.type, BROKER_MSG_KEY, "is a key");
	CHECK_STR(m.provider, "prov", "for its provider");
	CHECK_STR(m.key, "sk-a", "decoded");
	CHECK_INT(parse("reread prov", &m), 0, "a reread request");
	CHECK_INT(m.type, BROKER_MSG_REREAD, "is a reread");
	static const char *const bad_key[] = {
		"key",
		"key prov",
		"key prov ",
		"key prov 736",
		"key prov 7g",
		"key p/v 73",
		"key prov 0a", /* a newline is no key's */
		"key prov 5b", /* nor a bracket */
		"key prov 73 73",
		"reread",
		"reread prov x",
	};
	for (size_t i = 0; i < sizeof(bad_key) / sizeof(bad_key[0]); i++)
		CHECK_INT(parse(bad_key[i], &m), -EINVAL, "refused: \"%s\"", bad_key[i]);
}

/* "secret PLACEHOLDER HEX HOST": a value of any byte but CR, LF and NUL. */
static void test_secret(void)
{
	struct broker_msg m;

	CHECK_INT(parse("secret errand-secret-00ff 612f2b62 api.example.com:443", &m), 0,
		  "a secret message");
	CHECK_INT(m.type, BROKER_MSG_SECRET, "is a secret");
	CHECK_STR(m.placeholder, "errand-secret-00ff", "its placeholder");
	CHECK_STR(m.key, "a/+b", "its value");
	CHECK_STR(m.host, "api.example.com:443", "its host");
	CHECK_INT(parse("secret p 610d62 h", &m), -EINVAL, "a CR in the value is refused");
	CHECK_INT(parse("secret p 610a62 h", &m), -EINVAL, "an LF in the value is refused");
	CHECK_INT(parse("secret p 610062 h", &m), -EINVAL, "a NUL in the value is refused");
	CHECK_INT(parse("secret p 61 h extra", &m), -EINVAL, "a word more is refused");
	CHECK_INT(parse("secret p 6 h", &m), -EINVAL, "an odd hex length is refused");
	CHECK_INT(parse("secret p  h", &m), -EINVAL, "an empty value is refused");
	/* found by fuzz/fuzz: a digit that is not hex was shifted before it was judged */
	CHECK_INT(parse("secret p >>?> h", &m), -EINVAL, "a value not in hex is refused");
}

static void test_mint(void)
{
	char a[BROKER_STANDIN_LEN + 1], b[BROKER_STANDIN_LEN + 1];

	CHECK_INT(broker_standin_mint(a), 0, "a stand-in is minted");
	CHECK_INT(broker_standin_mint(b), 0, "a second one");
	CHECK_TRUE(broker_standin_valid(a), "it has the stand-in's form: %s", a);
	CHECK_INT((long long)strlen(a), 15 + 64, "errand-session- and 64 digits");
	CHECK_TRUE(strcmp(a, b) != 0, "two stand-ins differ");
	CHECK_FALSE(broker_standin_valid("errand-session-xyz"), "a short one is not a stand-in");
}

static void test_env(void)
{
	struct config_provider p[3] = {
		{.name = (char *)"claude", .kind = (char *)"anthropic"},
		{.name = (char *)"gpt", .kind = (char *)"openai"},
		{.name = (char *)"my-llm"},
	};
	struct errand_config cfg = {.providers = p, .n_providers = 3};
	struct broker_standin s[3] = {{"claude", ""}, {"gpt", ""}, {"my-llm", ""}};
	char **env = NULL;
	size_t n = 0;

	for (int i = 0; i < 3; i++)
		strcpy(s[i].value, S1);
	CHECK_INT(broker_session_env(&cfg, "10.213.0.1", 4780, s, 3, &env, &n), 0,
		  "a session's environment");
	CHECK_INT((long long)n, 6, "two variables a provider");
	if (n == 6) {
		CHECK_CONTAINS(env[0], "ANTHROPIC_API_KEY=errand-session-",
			       "anthropic's key variable");
		CHECK_STR(env[1], "ANTHROPIC_BASE_URL=http://10.213.0.1:4780/providers/claude",
			  "anthropic's base URL points at the broker's route");
		CHECK_CONTAINS(env[2], "OPENAI_API_KEY=", "openai's key variable");
		CHECK_CONTAINS(env[4], "MY_LLM_API_KEY=", "another provider's, from its name");
		CHECK_STR(env[5], "MY_LLM_BASE_URL=http://10.213.0.1:4780/providers/my-llm",
			  "and its base URL");
	}
	strv_free(env);
	CHECK_INT(broker_session_env(&cfg, "10.213.0.1", 4780, s, 2, &env, &n), -ENOENT,
		  "a provider without a stand-in is an error");
}

/* broker_key_read of a file holding text: its rc, the key in out */
static int key_read(const char *text, char *out, size_t cap)
{
	char path[] = "/tmp/errt-unit-key-XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0)
		return -errno;
	rc = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -EIO;
	close(fd);
	if (!rc)
		rc = broker_key_read(path, out, cap, NULL);
	unlink(path);
	return rc;
}

static void test_key_read(void)
{
	/* each a key "[redacted]" holds, itself or with a %XX decoded, or
	 * whose %XX decodes to a bracket: found in no answer */
	static const char *const unredactable[] = {"dacted", "%72edacted", "sk-%5Bx", "sk-%5dx",
						   "sk-%41%5Bx"};
	char key[BROKER_KEY_MAX + 1], line[512];

	CHECK_INT(key_read("sk-live-1\nsecond line\n", key, sizeof(key)), 9,
		  "a key: its first line");
	CHECK_STR(key, "sk-live-1", "... the key");
	CHECK_INT(key_read("sk-ab%41cd\n", key, sizeof(key)), 10,
		  "a key with a %%XX in it is read");
	CHECK_INT(key_read("sk-[x]\n", key, sizeof(key)), -EBADMSG,
		  "a key with a bracket is refused");
	for (size_t i = 0; i < sizeof(unredactable) / sizeof(unredactable[0]); i++)
		CHECK_INT(key_read(unredactable[i], key, sizeof(key)), -EILSEQ,
			  "refused: \"%s\", which the broker could not redact", unredactable[i]);
	CHECK_CONTAINS(broker_key_strerror(-EILSEQ), "could not find it in an answer",
		       "... and why is said");
	broker_key_refusal("prov", "/k", -EILSEQ, line, sizeof(line));
	CHECK_CONTAINS(line, "agent.providers.prov: credentialFile /k holds no key errand can use",
		       "a key read but unusable is not said to be unreadable");
	CHECK_CONTAINS(line, "put the provider's real key there",
		       "... and the line says what to do");
	broker_key_refusal("prov", "/k", -ENOENT, line, sizeof(line));
	CHECK_CONTAINS(line, "credentialFile /k cannot be read (No such file or directory); write",
		       "a missing file cannot be read");
}

int main(void)
{
	test_parse();
	test_key_read();
	test_secret();
	test_mint();
	test_env();
	return test_exit();
}
