/* Starting a child that execs at once (the launcher, the DNS worker) without
 * copying the agent's address space: a fork of a process of a few hundred
 * MiB copies its page tables and write-protects every page, and the agent
 * then takes a fault on each page it writes. */
#ifndef ERRAND_SPAWN_H
#define ERRAND_SPAWN_H

#include <sys/types.h>

/* Runs fn(arg) in a new process that shares this one's memory until it
 * execs or exits (CLONE_VM | CLONE_VFORK: the calling thread waits
 * meanwhile; the other threads run on), on a stack of its own, born in the
 * cgroup whose directory cgroup_fd is (-1: this process's), so it is never
 * migrated. fn may only make system calls (async-signal-safe ones, and none
 * of glibc's that act on every thread, like setuid: call the system call
 * itself), write its own locals and what arg points to, and must exec or
 * return; its return value is the child's exit status. Its exit signal is
 * SIGCHLD. Where the kernel refuses the cgroup or clone3, the child is born
 * in this process's cgroup (the caller's own check then says what is
 * wrong); on an architecture without the trampoline below, it is a fork.
 * Returns the child's pid, or -errno. */
pid_t spawn_fn(int (*fn)(void *arg), void *arg, int cgroup_fd);

#endif
