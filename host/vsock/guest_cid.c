// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * guest_cid.c - a VM's vsock CID from QEMU's command line (guest_cid.h).
 *
 * Only the argument after a -device (or --device; also -device=...) is read: QEMU's own
 * option syntax, key=value with commas, or a JSON object.  A command line is the QEMU
 * process's (a host process, untrusted as any input): every figure is checked.
 */
#include "vsock/guest_cid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#define CMDLINE_MAX (1u << 20) /* QEMU's is a few KiB; libvirt's tens */

/* The kernel's vsock device, not memtided's vhost-user one. */
static bool is_kernel_vsock(const char *driver, size_t n)
{
	static const char prefix[] = "vhost-vsock-";

	return n > sizeof(prefix) - 1 && !strncmp(driver, prefix, sizeof(prefix) - 1);
}

/* A CID a guest can have: 3 .. 2^32 - 2 (0-2 are the hypervisor, local and host; -1 any). */
static int cid_value(const char *s, size_t n, uint32_t *cid)
{
	char buf[16];
	char *end;

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 0);
	if (errno || *end || v < 3 || v >= 0xffffffffull)
		return -EINVAL;
	*cid = (uint32_t)v;
	return 0;
}

/* QEMU's option syntax: driver,key=value,... ("" -ENOENT when it is not the device). */
static int from_opts(const char *a, uint32_t *cid)
{
	size_t n = strcspn(a, ",");

	if (!is_kernel_vsock(a, n))
		return -ENOENT;
	for (const char *p = a + n; *p == ',';) {
		p++;
		size_t k = strcspn(p, ",");
		if (k > 10 && !strncmp(p, "guest-cid=", 10))
			return cid_value(p + 10, k - 10, cid);
		p += k;
	}
	return -EINVAL;
}

static int from_json(const char *a, uint32_t *cid)
{
	json_object *o = json_tokener_parse(a), *drv, *c;
	int rc = -ENOENT;

	if (!o)
		return -ENOENT; /* not JSON after all: not a device we know */
	if (json_object_is_type(o, json_type_object) &&
	    json_object_object_get_ex(o, "driver", &drv) &&
	    json_object_is_type(drv, json_type_string) &&
	    is_kernel_vsock(json_object_get_string(drv), (size_t)json_object_get_string_len(drv))) {
		rc = -EINVAL;
		if (json_object_object_get_ex(o, "guest-cid", &c)) {
			const char *s = json_object_get_string(c);
			if (json_object_is_type(c, json_type_int) ||
			    json_object_is_type(c, json_type_string))
				rc = cid_value(s, strlen(s), cid);
		}
	}
	json_object_put(o);
	return rc;
}

int mtd_guest_cid_parse(const char *args, size_t len, uint32_t *cid)
{
	const char *end = args + len;
	int found = -ENOENT;
	uint32_t first = 0;

	for (const char *p = args; p < end; p += strnlen(p, (size_t)(end - p)) + 1) {
		const char *dev = NULL;
		size_t n = strnlen(p, (size_t)(end - p));

		if (p + n >= end)
			break; /* not NUL-terminated within len: cut short */
		if (!strcmp(p, "-device") || !strcmp(p, "--device")) {
			const char *next = p + n + 1;
			if (next >= end)
				break;
			dev = next;
			p = next; /* the loop steps past the device's argument */
		} else if (!strncmp(p, "-device=", 8) || !strncmp(p, "--device=", 9)) {
			dev = strchr(p, '=') + 1;
		}
		if (!dev || dev + strnlen(dev, (size_t)(end - dev)) >= end)
			continue; /* not a device, or not NUL-terminated within len */
		uint32_t c = 0;
		int rc = dev[0] == '{' ? from_json(dev, &c) : from_opts(dev, &c);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (found == 0)
			return -E2BIG;
		found = 0;
		first = c;
	}
	if (found == 0)
		*cid = first;
	return found;
}

int mtd_guest_cid_of_pid(const char *proc_dir, int pid, uint32_t *cid)
{
	char path[256];
	size_t cap = 65536, len = 0;
	char *buf;
	int fd, rc;

	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%d/cmdline", proc_dir, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == cap) {
			char *nb = cap < CMDLINE_MAX ? realloc(buf, cap * 2) : NULL;
			if (!nb) {
				rc = cap < CMDLINE_MAX ? -ENOMEM : -E2BIG;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
	}
	rc = mtd_guest_cid_parse(buf, len, cid);
out:
	free(buf);
	close(fd);
	return rc;
}
