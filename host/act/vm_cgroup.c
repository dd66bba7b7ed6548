// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vm_cgroup.c - a VM's memory cgroup: found, checked, or made for it (vm_cgroup.h).
 */
#include "act/vm_cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WALK_DEPTH 4 /* libvirt's scope/libvirt/vcpuN is three below the VM's cgroup */

int mtd_cgroup_parse_proc(const char *text, char *path, size_t len, bool *v1_memory)
{
	bool found = false, any = false;

	*v1_memory = false;
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		const char *c1 = memchr(p, ':', n);
		const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - p)) : NULL;
		if (n && (!c1 || !c2))
			return -EPROTO;
		if (n) {
			any = true;
			size_t clen = (size_t)(c2 - c1 - 1);
			const char *rest = c2 + 1;
			size_t rlen = n - (size_t)(rest - p);
			if (c1 - p == 1 && p[0] == '0' && clen == 0) {
				if (rlen + 1 > len || rlen == 0)
					return -EPROTO;
				memcpy(path, rest, rlen);
				path[rlen] = '\0';
				found = true;
			} else {
				/* a v1 hierarchy: "4:memory:/x", or "5:cpu,memory:/x" */
				for (const char *c = c1 + 1; c < c2;) {
					const char *comma = memchr(c, ',', (size_t)(c2 - c));
					size_t w = comma ? (size_t)(comma - c) : (size_t)(c2 - c);
					if (w == 6 && strncmp(c, "memory", 6) == 0)
						*v1_memory = true;
					c += w + (comma ? 1 : 0);
					if (!comma)
						break;
				}
			}
		}
		p = nl ? nl + 1 : NULL;
	}
	if (!any)
		return -EPROTO;
	return found ? 0 : -ENOENT;
}

int mtd_cgroup_parse_mountinfo(const char *text, char *root, size_t len)
{
	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char line[1024];
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = '\0';
		p = nl ? nl + 1 : NULL;
		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS" */
		const char *dash = strstr(line, " - ");
		if (!dash || strncmp(dash + 3, "cgroup2 ", 8) != 0)
			continue;
		char mp[512];
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) != 1 || strlen(mp) + 1 > len)
			continue;
		strcpy(root, mp);
		return 0;
	}
	return -ENOENT;
}

/* "vcpu12", "iothread3": a name followed by digits only. */
static bool numbered(const char *comp, size_t n, const char *name)
{
	size_t k = strlen(name);

	if (n <= k || strncmp(comp, name, k) != 0)
		return false;
	for (size_t i = k; i < n; i++)
		if (!isdigit((unsigned char)comp[i]))
			return false;
	return true;
}

/* Is [comp, comp+n) one of the groups libvirt puts a domain's threads in? */
static bool thread_group(const char *comp, size_t n)
{
	return (n == 8 && strncmp(comp, "emulator", 8) == 0) || numbered(comp, n, "vcpu") ||
	       numbered(comp, n, "iothread");
}

void mtd_cgroup_vm_path(const char *qemu_path, char *out, size_t len)
{
	size_t n = strlen(qemu_path);

	snprintf(out, len, "%s", qemu_path);
	if (n < 2)
		return;
	/* The last component, and the one before it. */
	const char *last = strrchr(qemu_path, '/');
	size_t ln = n - (size_t)(last + 1 - qemu_path);
	if (!thread_group(last + 1, ln)) {
		/* ".../libvirt" itself */
		if (ln == 7 && strncmp(last + 1, "libvirt", 7) == 0 && last > qemu_path)
			snprintf(out, len, "%.*s", (int)(last - qemu_path), qemu_path);
		return;
	}
	size_t cut = (size_t)(last - qemu_path);
	const char *prev = cut ? qemu_path + cut - 1 : qemu_path;
	while (prev > qemu_path && *prev != '/')
		prev--;
	if (cut - (size_t)(prev + 1 - qemu_path) == 7 && strncmp(prev + 1, "libvirt", 7) == 0)
		cut = (size_t)(prev - qemu_path);
	if (cut == 0)
		snprintf(out, len, "/");
	else
		snprintf(out, len, "%.*s", (int)cut, qemu_path);
}

void mtd_cgroup_scope_name(const char *vm_name, char *out, size_t len)
{
	size_t o = 0;

	for (const char *s = vm_name; *s && o + 5 < len && o < 200; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '_' || c == '-' || (c == '.' && s != vm_name))
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
	}
	snprintf(out + o, len - o, ".scope");
}

static int slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, s, strlen(s));
	int rc = w == (ssize_t)strlen(s) ? 0 : w < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

static bool exists(const char *dir, const char *name)
{
	char path[1200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* Does "memory" appear in dir/file (cgroup.controllers, cgroup.subtree_control)? */
static bool has_memory(const char *dir, const char *file)
{
	char path[1200], buf[512];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (slurp(path, buf, sizeof(buf)) < 0)
		return false;
	char *save = NULL;
	for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
		if (strcmp(t, "memory") == 0)
			return true;
	return false;
}

/* Is p a kernel thread?  KVM's and vhost's workers are, and the kernel puts them in their
 * VM's cgroup (cgroup_attach_task_all): they belong to the VM.  PF_KTHREAD in the flags of
 * /proc/PID/stat (the 9th field). */
static bool kernel_thread(const char *proc_root, int p)
{
	char path[128], buf[1024];

	snprintf(path, sizeof(path), "%s/%d/stat", proc_root ? proc_root : "/proc", p);
	if (slurp(path, buf, sizeof(buf)) < 0)
		return true; /* gone already: not another process to worry about */
	/* After "pid (comm)": state ppid pgrp session tty_nr tpgid flags. */
	const char *s = strrchr(buf, ')');
	if (!s)
		return false;
	for (int field = 0; field < 7; field++) {
		s = strchr(s + 1, ' ');
		if (!s)
			return false;
	}
	char *e;
	errno = 0;
	unsigned long flags = strtoul(s + 1, &e, 10);
	if (errno || e == s + 1)
		return false;
	return (flags & 0x00200000UL) != 0;
}

/* A process other than pid (and the kernel's threads) in dir or under it: its PID, 0 if
 * none, -errno. */
static int other_process(const char *proc_root, const char *dir, int pid, int depth)
{
	char path[1400];
	char *buf = malloc(65536);
	int found = 0;

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (slurp(path, buf, 65536) == 0) {
		char *save = NULL;
		for (char *t = strtok_r(buf, "\n", &save); t && !found;
		     t = strtok_r(NULL, "\n", &save)) {
			char *e;
			long p = strtol(t, &e, 10);
			if (e != t && p > 0 && p <= INT_MAX && p != pid &&
			    !kernel_thread(proc_root, (int)p))
				found = (int)p;
		}
	}
	free(buf);
	if (found || depth >= WALK_DEPTH)
		return found;
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.' || e->d_type != DT_DIR)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		int r = other_process(proc_root, path, pid, depth + 1);
		if (r != 0)
			found = r;
	}
	closedir(d);
	return found;
}

static int find_root(const struct mtd_cgroup_env *env, char *root, size_t len)
{
	char path[300], *buf;
	int rc;

	if (env->cg_root) {
		snprintf(root, len, "%s", env->cg_root);
		return 0;
	}
	buf = malloc(65536);
	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/self/mountinfo",
		 env->proc_root ? env->proc_root : "/proc");
	rc = slurp(path, buf, 65536);
	if (rc == 0)
		rc = mtd_cgroup_parse_mountinfo(buf, root, len);
	free(buf);
	return rc;
}

int mtd_cgroup_find(const struct mtd_cgroup_env *env, int pid, struct mtd_vm_cgroup *out, char *why,
		    size_t whylen)
{
	char path[300], text[4096], qpath[MTD_CG_PATH_MAX];
	bool v1_memory = false;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = find_root(env, out->root, sizeof(out->root));
	if (rc < 0) {
		snprintf(why, whylen, "no cgroup2 (unified) hierarchy is mounted");
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%d/cgroup", env->proc_root ? env->proc_root : "/proc",
		 pid);
	if (slurp(path, text, sizeof(text)) < 0) {
		snprintf(why, whylen, "QEMU (pid %d) is gone", pid);
		return -ENOENT;
	}
	rc = mtd_cgroup_parse_proc(text, qpath, sizeof(qpath), &v1_memory);
	if (rc == -ENOENT || (rc == 0 && v1_memory)) {
		snprintf(why, whylen,
			 "the memory controller is on cgroup v1 here: host-side reclaim through "
			 "the kernel needs cgroup v2 (memory.reclaim, PSI per cgroup); boot with "
			 "systemd.unified_cgroup_hierarchy=1");
		return -EOPNOTSUPP;
	}
	if (rc < 0) {
		snprintf(why, whylen, "cannot read %s", path);
		return rc;
	}
	mtd_cgroup_vm_path(qpath, out->path, sizeof(out->path));
	snprintf(out->dir, sizeof(out->dir), "%s%s", out->root,
		 strcmp(out->path, "/") == 0 ? "" : out->path);
	if (!has_memory(out->root, "cgroup.controllers")) {
		snprintf(why, whylen,
			 "cgroup v2 here has no memory controller (cgroup_disable=memory, "
			 "or it is bound to v1)");
		return -EOPNOTSUPP;
	}
	if (strcmp(out->path, "/") == 0) {
		snprintf(why, whylen,
			 "QEMU (pid %d) runs in the root cgroup, with every other "
			 "process",
			 pid);
		return -EBUSY;
	}
	if (!exists(out->dir, "memory.current")) {
		snprintf(why, whylen,
			 "the memory controller is not on for %s (its parent's "
			 "cgroup.subtree_control)",
			 out->path);
		return -EBUSY;
	}
	if (!exists(out->dir, "memory.reclaim")) {
		snprintf(why, whylen, "this kernel has no memory.reclaim (Linux 5.19 or later)");
		return -EOPNOTSUPP;
	}
	int other = other_process(env->proc_root, out->dir, pid, 0);
	if (other > 0) {
		snprintf(why, whylen,
			 "QEMU (pid %d) shares its cgroup %s with other processes "
			 "(pid %d among them)",
			 pid, out->path, other);
		return -EBUSY;
	}
	return 0;
}

int mtd_cgroup_adopt(const struct mtd_cgroup_env *env, const char *vm_name, int pid,
		     struct mtd_vm_cgroup *cg, char *why, size_t whylen)
{
	char slice[600], scope[900], name[220], file[1000], pidtxt[16];
	int rc;

	if (!cg->root[0] && find_root(env, cg->root, sizeof(cg->root)) < 0) {
		snprintf(why, whylen, "no cgroup2 (unified) hierarchy is mounted");
		return -ENOENT;
	}
	mtd_cgroup_scope_name(vm_name, name, sizeof(name));
	snprintf(slice, sizeof(slice), "%s/%s", cg->root, MTD_CG_SLICE);
	snprintf(scope, sizeof(scope), "%s/%s", slice, name);
	if (strlen(MTD_CG_SLICE) + strlen(name) + 3 >= sizeof(cg->path)) {
		snprintf(why, whylen, "the VM's name is too long for a cgroup");
		return -ENAMETOOLONG;
	}
	/* The memory controller on, down to the new cgroup (v2 enables it per level). */
	snprintf(file, sizeof(file), "%s/cgroup.subtree_control", cg->root);
	if (!has_memory(cg->root, "cgroup.subtree_control") &&
	    (rc = write_str(file, "+memory")) < 0) {
		snprintf(why, whylen, "cannot turn the memory controller on at the cgroup root: %s",
			 strerror(-rc));
		return rc;
	}
	if (mkdir(slice, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(why, whylen, "cannot make %s: %s", slice, strerror(errno));
		return rc;
	}
	snprintf(file, sizeof(file), "%s/cgroup.subtree_control", slice);
	if (!has_memory(slice, "cgroup.subtree_control") && (rc = write_str(file, "+memory")) < 0) {
		snprintf(why, whylen, "cannot turn the memory controller on for %s: %s",
			 MTD_CG_SLICE, strerror(-rc));
		return rc;
	}
	bool made = mkdir(scope, 0755) == 0;
	if (!made && errno != EEXIST) {
		rc = -errno;
		snprintf(why, whylen, "cannot make %s: %s", scope, strerror(errno));
		return rc;
	}
	snprintf(file, sizeof(file), "%s/cgroup.procs", scope);
	snprintf(pidtxt, sizeof(pidtxt), "%d", pid);
	rc = write_str(file, pidtxt);
	if (rc < 0) {
		snprintf(why, whylen, "cannot move QEMU (pid %d) into %s: %s", pid, scope,
			 strerror(-rc));
		if (made)
			(void)rmdir(scope);
		return rc;
	}
	snprintf(cg->moved_from, sizeof(cg->moved_from), "%s", cg->path[0] ? cg->path : "?");
	snprintf(cg->path, sizeof(cg->path), "/%s/%s", MTD_CG_SLICE, name);
	snprintf(cg->dir, sizeof(cg->dir), "%s", scope);
	cg->moved = true;
	cg->created = made;
	return 0;
}

int mtd_cgroup_rss_anon(const char *proc_root, int pid, uint64_t *bytes)
{
	char path[128], buf[4096];

	snprintf(path, sizeof(path), "%s/%d/status", proc_root ? proc_root : "/proc", pid);
	int rc = slurp(path, buf, sizeof(buf));
	if (rc < 0)
		return rc;
	const char *s = strstr(buf, "\nRssAnon:");
	if (!s)
		return -EPROTO;
	s += 9;
	while (*s == ' ' || *s == '\t')
		s++;
	char *e;
	errno = 0;
	unsigned long long kb = strtoull(s, &e, 10);
	if (errno || e == s)
		return -EPROTO;
	*bytes = kb * 1024;
	return 0;
}

int mtd_cgroup_remove_if_empty(const struct mtd_vm_cgroup *cg)
{
	char file[1200], buf[64] = "";

	if (!cg->created || !cg->dir[0])
		return 0;
	snprintf(file, sizeof(file), "%s/cgroup.procs", cg->dir);
	if (slurp(file, buf, sizeof(buf)) == 0 && buf[0])
		return -EBUSY;
	if (rmdir(cg->dir) < 0)
		return errno == ENOENT ? 0 : -errno;
	return 0;
}
