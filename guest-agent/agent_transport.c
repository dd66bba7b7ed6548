/*
 * agent_transport.c - opening the byte stream to the host.
 *
 *   virtio  the virtio-serial port named port_name.  With udev, /dev/virtio-ports/NAME is a
 *           link to it; without udev (a busybox initramfs) the agent scans
 *           /sys/class/virtio-ports/vport*p* /name and opens /dev/vportNpM.  The port opens
 *           even when no host is attached: writes then block (EAGAIN with O_NONBLOCK) and
 *           reads return 0, which the loop treats as a disconnect and retries with backoff.
 *   vsock   AF_VSOCK stream to vsock_cid:vsock_port (host CID 2), non-blocking connect.
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

static int open_vsock(const struct agent_config *c)
{
	struct sockaddr_vm sa = {
	    .svm_family = AF_VSOCK,
	    .svm_cid = c->vsock_cid,
	    .svm_port = c->vsock_port,
	};
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	return connect_sock(fd, (struct sockaddr *)&sa, sizeof(sa));
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

int agent_transport_open(const struct agent_config *c, bool *fd_used)
{
	switch (c->transport) {
	case AGENT_TR_FD:
		return open_fd(c, fd_used);
	case AGENT_TR_VIRTIO:
		return open_virtio(c);
	case AGENT_TR_VSOCK:
		return open_vsock(c);
	case AGENT_TR_UNIX:
		return open_unix(c);
	}
	return -EINVAL;
}
