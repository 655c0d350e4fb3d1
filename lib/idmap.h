/* Idmapped mounts: a detached copy of a directory tree whose on-disk owner
 * appears as another host id, so a session writes its project as the
 * project's owner while it runs as its own unprivileged account. The
 * launcher mounts the project through one; the agent's doctor probes with
 * the same code whether a directory's filesystem allows it. */
#ifndef ERRAND_IDMAP_H
#define ERRAND_IDMAP_H

#include <stdint.h>
#include <sys/types.h>

/* A user namespace whose only ids are uid `disk` and gid `disk_gid`,
 * mapped to host `host` and `host_gid` ("disk host 1"). Through a mount
 * idmapped with it, a file owned by disk:disk_gid on disk is host:host_gid,
 * a file host:host_gid creates is disk:disk_gid on disk, and every other
 * on-disk id is unmapped: a file of another uid is never the session's (its
 * owner bits never apply, nor can its mode change), only its "others" bits
 * do, and its group bits where its group is disk_gid, as for the owner. An
 * O_CLOEXEC descriptor on it, or -errno. Needs root. */
int idmap_userns(uid_t disk, gid_t disk_gid, uid_t host, gid_t host_gid);

/* A detached copy of the tree at path with its submounts (open_tree
 * OPEN_TREE_CLONE), for idmap_set and then move_mount() to place. An
 * O_CLOEXEC descriptor, or -errno. Its owner is fstat()'s on it: no later
 * change of the path changes what was copied. */
int idmap_tree(const char *path);

/* Makes the copy private, sets attr (MOUNT_ATTR_*) on it and, unless
 * userns_fd is -1, idmaps it through that namespace, all recursively. 0 or
 * -errno: -EINVAL or -EOPNOTSUPP when a filesystem in the tree cannot be
 * idmapped (see idmap_unsupported). */
int idmap_set(int tree_fd, int userns_fd, uint64_t attr);

/* Whether mount_setattr's error means the filesystem (or kernel) cannot
 * idmap, as opposed to a failure of errand's own. */
int idmap_unsupported(int err);

/* Copies path, idmaps the copy, its owner mapped to host:host_gid, and drops
 * the copy: 0 when the directory can be mounted idmapped, else -errno. */
int idmap_probe(const char *path, uid_t host, gid_t host_gid);

/* The name of the filesystem type under path ("ext4", "tmpfs", ...), or
 * "type 0x..." for one errand does not know. */
const char *idmap_fs_name(const char *path, char *buf, size_t len);

#endif
