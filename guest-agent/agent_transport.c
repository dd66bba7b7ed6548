// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * agent_transport.c - opening the byte stream to the host.
 *
 *   virtio  the virtio-serial port named port_name.  With udev, /dev/virtio-ports/NAME is a
 *           link to it; without udev (a busybox initramfs) the agent scans
 *           /sys/class/virtio-ports/vport*p* /name and opens /dev/vportNpM.  The port opens
 *           even when no host is attached: writes then block (EAGAIN with O_NONBLOCK) and
 *           reads return 0, which the loop treats as a disconnect and retries with backoff.
 *   vsock   AF_VSOCK stream to vsock_cid:vsock_port (host CID 2), non-blocking connect,
 *           from a privileged source port when the agent may bind one (memtided's back end
 *           accepts the agent only from ports below 1024: no unprivileged guest process
 *           can pose as the agent, as none can open the root-only virtio-serial port).
 *   auto    (the default) vsock when the guest has a vsock transport (/dev/vsock answers
 *           with a CID of its own), else virtio-serial; a connection that never reached
 *           the host (no hello back) makes the next try start with the other one.
 *   unix    AF_UNIX stream to unix_path (tests; or a host-side relay).
 *   fd      an inherited connected fd (a socketpair in tests), used for one connection.
 * Every fd is O_NONBLOCK | O_CLOEXEC; a connect in progress reports through POLLOUT.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sys/ioctl.h>

#include <linux/vm_sockets.h>

#include "agent.h"

int agent_find_virtio_port(const struct agent_config *c, char *out, size_t cap)
{
	char path[AGENT_PATH_MAX + 320], name[128];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/dev/virtio-ports/%s", c->sys_root, c->port_name);
	if (access(path, F_OK) == 0) {
		snprintf(out, cap, "%s", path);
		return 0;
	}
	agent_path(c, "/sys/class/virtio-ports", path, sizeof(path));
	d = opendir(path);
	if (!d)
		return -ENOENT;
	while ((de = readdir(d))) {
		long n;

		if (strncmp(de->d_name, "vport", 5) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/sys/class/virtio-ports/%s/name", c->sys_root,
			 de->d_name);
		n = agent_read_file(path, name, sizeof(name));
		if (n <= 0)
			continue;
		if (name[n - 1] == '\n')
			name[n - 1] = '\0';
		if (strcmp(name, c->port_name) == 0) {
			snprintf(out, cap, "%s/dev/%s", c->sys_root, de->d_name);
			closedir(d);
			return 0;
		}
	}
	closedir(d);
	return -ENOENT;
}

static int open_virtio(const struct agent_config *c)
{
	char dev[AGENT_PATH_MAX + 64];
	int fd;

	if (c->device[0]) {
		snprintf(dev, sizeof(dev), "%s", c->device);
	} else {
		int rc = agent_find_virtio_port(c, dev, sizeof(dev));

		if (rc < 0)
			return rc;
	}
	fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

static int connect_sock(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (connect(fd, sa, len) < 0 && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

bool agent_vsock_present(const struct agent_config *c)
{
	char path[AGENT_PATH_MAX + 16];
	unsigned int cid = VMADDR_CID_ANY;
	int fd;

	/* A test root stands in for this guest: it has no vsock unless it says so. */
	if (c->sys_root[0])
		return false;
	snprintf(path, sizeof(path), "/dev/vsock");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (ioctl(fd, IOCTL_VM_SOCKETS_GET_LOCAL_CID, &cid) < 0)
		cid = VMADDR_CID_ANY;
	close(fd);
	return cid != VMADDR_CID_ANY && cid > VMADDR_CID_HOST;
}

/* A privileged source port: 32 tries from a random one in 512..1023 (EADDRINUSE moves on;
 * not being allowed ends it, and the connection goes from an ordinary port). */
static void bind_privileged(int fd, struct agent_transport_state *ts)
{
	unsigned start = 512 + (unsigned)(getpid() * 7919u) % 512u;

	for (unsigned i = 0; i < 32; i++) {
		struct sockaddr_vm sa = {
		    .svm_family = AF_VSOCK,
		    .svm_cid = VMADDR_CID_ANY,
		    .svm_port = 512 + (start - 512 + i * 37u) % 512u,
		};

		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return;
		if (errno == EACCES || errno == EPERM) {
			if (!ts->said_unprivileged)
				agent_log(AGENT_WARN,
					  "vsock: cannot bind a privileged port (%s): "
					  "memtided accepts the agent only from one "
					  "(run the agent as root)",
					  strerror(errno));
			ts->said_unprivileged = true;
			return;
		}
		if (errno != EADDRINUSE)
			return;
	}
}

static int open_vsock(const struct agent_config *c, struct agent_transport_state *ts)
{
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK,
	    .svm_cid = c->vsock_cid,
	    .svm_port = c->vsock_port,
	};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	bind_privileged(fd, ts);
	return connect_sock(fd, (struct sockaddr *)&sa, sizeof(sa));
}

/* auto: the preferred transport first, the other when the first cannot even open. */
static int open_auto(const struct agent_config *c, struct agent_transport_state *ts)
{
	bool vsock = agent_vsock_present(c);
	int fd;

	if (vsock && !ts->prefer_virtio) {
		ts->used = AGENT_TR_VSOCK;
		fd = open_vsock(c, ts);
		if (fd >= 0)
			return fd;
	}
	ts->used = AGENT_TR_VIRTIO;
	fd = open_virtio(c);
	if (fd >= 0 || !vsock || !ts->prefer_virtio)
		return fd;
	ts->used = AGENT_TR_VSOCK;
	return open_vsock(c, ts);
}

void agent_transport_result(const struct agent_config *c, struct agent_transport_state *ts,
			    bool reached_host)
{
	if (c->transport != AGENT_TR_AUTO)
		return;
	/* reached: stay with it; did not: the other one next */
	ts->prefer_virtio = (ts->used == AGENT_TR_VIRTIO) == reached_host;
}

static int open_unix(const struct agent_config *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(c->unix_path) >= sizeof(sa.sun_path) || !c->unix_path[0])
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, c->unix_path, strlen(c->unix_path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	return connect_sock(fd, (struct sockaddr *)&sa, sizeof(sa));
}

/* An inherited fd is good for one connection: after it closes there is nothing to reopen,
 * and the loop keeps backing off (-ENOENT) until it is stopped. */
static int open_fd(const struct agent_config *c, bool *used)
{
	if (*used)
		return -ENOENT;
	*used = true;
	if (fcntl((int)c->fd, F_SETFL, fcntl((int)c->fd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	return (int)c->fd;
}

int agent_transport_open(const struct agent_config *c, struct agent_transport_state *ts)
{
	ts->used = c->transport;
	switch (c->transport) {
	case AGENT_TR_FD:
		return open_fd(c, &ts->fd_used);
	case AGENT_TR_VIRTIO:
		return open_virtio(c);
	case AGENT_TR_VSOCK:
		return open_vsock(c, ts);
	case AGENT_TR_UNIX:
		return open_unix(c);
	case AGENT_TR_AUTO:
		return open_auto(c, ts);
	}
	return -EINVAL;
}
