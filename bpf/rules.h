/* What bpf/rules.bpf.c and the agent (agent/rules.c) share: a session's
 * compiled rules, the sockets it may not connect to, and its refusal events. */
#ifndef ERRAND_BPF_RULES_H
#define ERRAND_BPF_RULES_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define RULES_MAX 64
#define RULE_PAT_MAX 128
#define RULE_PATH_MAX 256
/* Matcher steps one decision may take; past it the decision refuses. */
#define RULE_BUDGET (1u << 16)
#define RULE_NONE 0xffffffffu
#define RULE_BUDGET_HIT 0xfffffffeu /* the matcher ran out of steps: refused */
#define RULE_DENY_DIR 0xfffffffdu   /* beneath a deny pattern's top directory */

/* Verbs as bits. */
#define RV_READ (1u << 0)
#define RV_EDIT (1u << 1)
#define RV_CREATE (1u << 2)
#define RV_DELETE (1u << 3)
#define RV_EXEC (1u << 4)
#define RV_CONNECT (1u << 5)
#define RV_FILES (RV_READ | RV_EDIT | RV_CREATE | RV_DELETE | RV_EXEC)

/* Only lazyAllow and deny reach the kernel: allow is the Landlock floor. */
#define RK_LAZY 0
#define RK_DENY 1

struct rule_entry {
	__u32 verbs;
	__u32 kind;
	__u32 len;     /* of pat, without NUL */
	__u32 subtree; /* pat had a trailing slash-star-star: pat and all below match */
	__u32 id;      /* the rule's index in the configuration's list */
	char pat[RULE_PAT_MAX];
};

struct rule_conf {
	__u32 n; /* entries in rules */
};

/* An inode by identity, the kernel's dev_t encoding. */
struct rule_inode {
	__u64 ino;
	__u64 dev;
};

enum rule_hook {
	RH_OPEN,
	RH_EXEC,
	RH_UNLINK,
	RH_RMDIR,
	RH_MKNOD,
	RH_MKDIR,
	RH_SYMLINK,
	RH_RENAME,
	RH_LINK,
	RH_CONNECT,
	RH_TRUNCATE,
	RH_MAX
};

struct rule_event {
	__u32 rule; /* id, or RULE_BUDGET_HIT / RULE_DENY_DIR */
	__u32 verbs;
	__u32 hook;
	__u32 pad;
	char path[RULE_PATH_MAX];
};

#endif
