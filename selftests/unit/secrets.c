/* Guarantee: a secret is read from paths.secrets only from a regular root-owned 0600 file named
 * there (no link, no path out of it), one trailing newline dropped and a CR, LF or NUL inside
 * refused; --secret and the file's secrets parse as ENV[=SECRET]@HOST[,HOST...], at most 16
 * secrets and 256 hosts a session, each host then allowed (443 unless given), a variable set
 * once; placeholders are errand-secret- and 64 hex digits, kept in the record and read back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/request.h"
#include "agent/secrets.h"
#include "lib/strv.h"
#include "selftests/unit/test.h"

static char dir[64];

static void put(const char *name, const char *content, size_t len, mode_t mode)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || write(fd, content, len) != (ssize_t)len) {
		perror(path);
		exit(1);
	}
	fchmod(fd, mode);
	close(fd);
}

static void test_read(void)
{
	char buf[SECRET_VALUE_MAX + 2], path[256], big[SECRET_VALUE_MAX + 8];

	put("ok", "v4lue-1\n", 8, 0600);
	CHECK_INT(secret_read(dir, "ok", buf, sizeof(buf)), 7, "one trailing newline is dropped");
	CHECK_STR(buf, "v4lue-1", "the value without it");
	put("bare", "v4lue-2", 7, 0600);
	CHECK_INT(secret_read(dir, "bare", buf, sizeof(buf)), 7, "a value without a newline");
	put("two", "v\n\n", 3, 0600);
	CHECK_INT(secret_read(dir, "two", buf, sizeof(buf)), -EBADMSG,
		  "only one trailing newline is dropped: a second is refused");
	put("crlf", "value\r\n", 7, 0600);
	CHECK_INT(secret_read(dir, "crlf", buf, sizeof(buf)), -EBADMSG, "a CR is refused");
	put("lf", "a\nb", 3, 0600);
	CHECK_INT(secret_read(dir, "lf", buf, sizeof(buf)), -EBADMSG, "an LF inside is refused");
	put("nul", "a\0b\n", 4, 0600);
	CHECK_INT(secret_read(dir, "nul", buf, sizeof(buf)), -EBADMSG, "a NUL is refused");
	put("prefix", "secret-\n", 8, 0600);
	CHECK_INT(secret_read(dir, "prefix", buf, sizeof(buf)), -EDOM,
		  "a value every placeholder holds (part of its prefix) is refused");
	put("hex", "c0ffee\n", 7, 0600);
	CHECK_INT(secret_read(dir, "hex", buf, sizeof(buf)), -EDOM,
		  "a few hex digits, which a placeholder holds often, are refused");
	put("upper", "SECRET-\n", 8, 0600);
	CHECK_INT(secret_read(dir, "upper", buf, sizeof(buf)), -EDOM,
		  "... in upper case too (the broker finds a value in any case)");
	put("hexup", "C0FFEE\n", 7, 0600);
	CHECK_INT(secret_read(dir, "hexup", buf, sizeof(buf)), -EDOM,
		  "... and upper-case hex digits");
	put("pctph", "d%2Dsecret-\n", 12, 0600);
	CHECK_INT(secret_read(dir, "pctph", buf, sizeof(buf)), -EILSEQ,
		  "a value that with its %%XX decoded every placeholder holds (d%%2Dsecret-: "
		  "d-secret-) is refused");
	put("pcthex", "%41\n", 4, 0600);
	CHECK_INT(secret_read(dir, "pcthex", buf, sizeof(buf)), -EILSEQ,
		  "... and one that decodes to a few hex digits (%%41: A)");
	put("pctbr", "ab%5Dcdefgh\n", 12, 0600);
	CHECK_INT(secret_read(dir, "pctbr", buf, sizeof(buf)), -EILSEQ,
		  "... and one that decodes to a bracket (%%5D)");
	put("pctok", "ab%41cdefgh\n", 12, 0600);
	CHECK_INT(secret_read(dir, "pctok", buf, sizeof(buf)), 11,
		  "a value with a %%XX whose variants are fine is a value");
	put("hex8", "c0ffee00\n", 9, 0600);
	CHECK_INT(secret_read(dir, "hex8", buf, sizeof(buf)), 8, "eight hex digits are a value");
	put("empty", "\n", 1, 0600);
	CHECK_INT(secret_read(dir, "empty", buf, sizeof(buf)), -ENODATA,
		  "an empty value is refused");
	put("open", "value\n", 6, 0640);
	CHECK_INT(secret_read(dir, "open", buf, sizeof(buf)), -EPERM,
		  "a file its group may read is refused");
	put("other", "value\n", 6, 0604);
	CHECK_INT(secret_read(dir, "other", buf, sizeof(buf)), -EPERM,
		  "a file others may read is refused");
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/ok", dir);
		if (chown(path, 65534, 65534) == 0)
			CHECK_INT(secret_read(dir, "ok", buf, sizeof(buf)), -EPERM,
				  "a file not root's is refused");
	}
	memset(big, 'x', sizeof(big));
	put("big", big, SECRET_VALUE_MAX + 1, 0600);
	CHECK_INT(secret_read(dir, "big", buf, sizeof(buf)), -EFBIG, "a value over 4095 bytes");
	put("max", big, SECRET_VALUE_MAX, 0600);
	CHECK_INT(secret_read(dir, "max", buf, sizeof(buf)), SECRET_VALUE_MAX,
		  "a value of 4095 bytes");
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("bare", path) == 0)
		CHECK_INT(secret_read(dir, "link", buf, sizeof(buf)), -EINVAL,
			  "a symbolic link is refused");
	snprintf(path, sizeof(path), "%s/sub", dir);
	mkdir(path, 0700);
	CHECK_INT(secret_read(dir, "sub", buf, sizeof(buf)), -EINVAL, "a directory is refused");
	CHECK_INT(secret_read(dir, "../etc", buf, sizeof(buf)), -EINVAL, "a path out is refused");
	CHECK_INT(secret_read(dir, "missing", buf, sizeof(buf)), -ENOENT, "a missing file");
}

static void test_parse(void)
{
	static const char *const bad[] = {
		"TOKEN",
		"TOKEN@",
		"@api.example.com",
		"1X@api.example.com",
		"A-B@example.com",
		"T=@example.com",
		"T=../x@api.example.com",
		"T=.x@api.example.com",
		"T@a.example.com,",
		"T@,a.example.com",
		"T@10.0.0.1",
		"T@*.com",
		"PATH@api.example.com",
		"ERRAND_X@api.example.com",
	};
	struct config_secret sec;
	char err[512];

	CHECK_INT(config_secret_parse("GH@api.github.com", &sec, err, sizeof(err)), 0, "ENV@HOST");
	CHECK_STR(sec.env, "GH", "its variable");
	CHECK_STR(sec.name, "GH", "its store name is the variable's");
	CHECK_INT(sec.hosts[0].port, 443, "on 443 unless given");
	config_secret_free(&sec);
	CHECK_INT(config_secret_parse("TOKEN=gh.token@API.github.com,uploads.github.com:8443,"
				      "api.github.com",
				      &sec, err, sizeof(err)),
		  0, "ENV=SECRET@HOST,HOST:PORT,HOST");
	CHECK_STR(sec.name, "gh.token", "the store name given");
	CHECK_INT((long long)sec.n_hosts, 2, "a host twice is kept once");
	CHECK_STR(sec.hosts[0].name, "api.github.com", "names are normalised");
	CHECK_INT(sec.hosts[1].port, 8443, "a port given");
	config_secret_free(&sec);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(config_secret_parse(bad[i], &sec, err, sizeof(err)), -EINVAL,
			  "refused: %s (%s)", bad[i], err);
}

static int load(const char *text, const char *const *secrets, size_t n, const char *env,
		struct errand_config *cfg, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:[s],s:s,s:[]}", "argv", "true", "project", "/", "secrets"),
	       *list = json_object_get(req, "secrets");
	int rc;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, json_string(secrets[i]));
	if (env)
		json_object_set_new(req, "env", json_pack("[s]", env));
	rc = config_load_text(text, "t.json", cfg, err, errlen);
	if (!rc)
		rc = request_apply(cfg, req, err, errlen);
	json_decref(req);
	return rc;
}

static void test_apply(void)
{
	static char specs[20][64], *p[20];
	struct errand_config cfg;
	char err[512];
	bool found = false;

	CHECK_INT(load("{\"secrets\": [{\"env\": \"A\", \"secret\": \"a\", \"hosts\": "
		       "[\"a.example.com\"]}], \"paths\": {\"secrets\": \"/srv/s\"}}",
		       (const char *const[]){"B@b.example.com:8443"}, 1, NULL, &cfg, err,
		       sizeof(err)),
		  0, "the file's secrets and --secret together (%s)", err);
	CHECK_INT((long long)cfg.n_secrets, 2, "both kept");
	CHECK_STR(cfg.secrets_dir, "/srv/s", "paths.secrets");
	for (size_t i = 0; i < cfg.n_allow; i++)
		found |= !strcmp(cfg.allow[i].name, "b.example.com") && cfg.allow[i].port == 8443;
	CHECK_TRUE(found, "a secret's host is allowed on its port");
	config_free(&cfg);
	config_defaults(&cfg);
	CHECK_STR(cfg.secrets_dir, "/etc/errand/secrets", "paths.secrets by default");
	config_free(&cfg);

	for (int i = 0; i < 17; i++) {
		snprintf(specs[i], sizeof(specs[i]), "S%d@h%d.example.com", i, i);
		p[i] = specs[i];
	}
	CHECK_INT(load(NULL, (const char *const *)p, 16, NULL, &cfg, err, sizeof(err)), 0,
		  "16 secrets");
	config_free(&cfg);
	CHECK_INT(load(NULL, (const char *const *)p, 17, NULL, &cfg, err, sizeof(err)), -E2BIG,
		  "17 secrets are refused");
	CHECK_CONTAINS(err, "at most 16", "naming the limit");
	config_free(&cfg);
	{
		size_t len = 0, cap = 257 * 24 + 16;
		char *many = malloc(cap);

		len += (size_t)snprintf(many, cap, "T@");
		for (int i = 0; i < 257; i++)
			len += (size_t)snprintf(many + len, cap - len, "%sh%d.example.com",
						i ? "," : "", i);
		CHECK_INT(load(NULL, (const char *const[]){many}, 1, NULL, &cfg, err, sizeof(err)),
			  -E2BIG, "257 hosts are refused");
		CHECK_CONTAINS(err, "at most 256", "naming the limit");
		config_free(&cfg);
		free(many);
	}
	CHECK_INT(load(NULL, (const char *const[]){"T@a.example.com", "T=x@b.example.com"}, 2, NULL,
		       &cfg, err, sizeof(err)),
		  -EINVAL, "a variable twice is refused");
	config_free(&cfg);
	CHECK_INT(load(NULL, (const char *const[]){"T@a.example.com"}, 1, "T=x", &cfg, err,
		       sizeof(err)),
		  -EINVAL, "--env of a secret's variable is refused");
	config_free(&cfg);
	CHECK_INT(load("{\"sandbox\": {\"env\": {\"T\": \"x\"}}}",
		       (const char *const[]){"T@a.example.com"}, 1, NULL, &cfg, err, sizeof(err)),
		  -EINVAL, "sandbox.env of a secret's variable is refused");
	config_free(&cfg);
	CHECK_INT(load("{\"secrets\": {\"env\": \"T\"}}", NULL, 0, NULL, &cfg, err, sizeof(err)),
		  -EINVAL, "secrets as an object is refused");
	config_free(&cfg);
	CHECK_INT(load("{\"secrets\": [{\"env\": \"T\", \"hots\": [\"a.example.com\"]}]}", NULL, 0,
		       NULL, &cfg, err, sizeof(err)),
		  -EINVAL, "a misspelt key in a secret is refused");
	config_free(&cfg);
	CHECK_INT(load("{\"secrets\": [{\"env\": \"T\", \"hosts\": []}]}", NULL, 0, NULL, &cfg, err,
		       sizeof(err)),
		  -EINVAL, "a secret without hosts is refused");
	config_free(&cfg);
}

static void test_placeholders(void)
{
	struct errand_config cfg;
	char **env = NULL, **again = NULL, err[512], path[256];
	struct stat st;

	CHECK_INT(load(NULL, (const char *const[]){"A@a.example.com", "B@b.example.com"}, 2, NULL,
		       &cfg, err, sizeof(err)),
		  0, "two secrets");
	CHECK_INT(secrets_placeholders(&cfg, dir, &env), 0, "placeholders minted");
	CHECK_TRUE(env && env[0] && env[1] && !env[2], "one a secret");
	CHECK_TRUE(env && !strncmp(env[0], "A=errand-secret-", 16) && strlen(env[0]) == 2 + 14 + 64,
		   "A=errand-secret- and 64 hex digits");
	CHECK_TRUE(env && strcmp(env[0] + 2, env[1] + 2), "each secret its own");
	snprintf(path, sizeof(path), "%s/%s", dir, SECRETS_RECORD);
	CHECK_INT(stat(path, &st) ? -errno : (int)(st.st_mode & 0777), 0600,
		  "kept in the record, 0600");
	CHECK_INT(secrets_placeholders(&cfg, dir, &again), 0, "read again");
	CHECK_TRUE(env && again && !strcmp(env[0], again[0]) && !strcmp(env[1], again[1]),
		   "the same placeholders (a restarted agent's)");
	strv_free(env);
	strv_free(again);
	config_free(&cfg);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/errand-unit-secrets.XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	test_read();
	test_parse();
	test_apply();
	test_placeholders();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			perror(cmd);
	}
	return test_exit();
}
