// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vsock_bridge.c - a test helper of the e2e harness (E2E_TRANSPORT=vsock): memtided's own
 * vhost-user-vsock back end (host/vsock/vsock_service.c, host/vsock/) with the agent's stream
 * handed to a unix socket instead of memtided's agent link.
 *
 * Why the harness needs it: QEMU 7.2's vhost-user-vsock-pci must have its back end when it
 * starts, while the scenarios boot the guest first and start memtided later (scenario 2
 * measures a baseline without it), and scenario 7's scripted host talks to the agent itself.
 * The bridge is that back end until then: it serves the device, and relays the agent's vsock
 * connection to whoever connects to --listen PATH (one client at a time: the agent's
 * connection requests are reset while nobody is connected, as memtided resets them for a VM
 * it does not manage).  When a scenario starts memtided, the harness kills the bridge and
 * memtided takes the device over exactly as after a memtided restart.
 *
 * Usage: vsock_bridge --vhost QEMU_SOCKET --listen UNIX_SOCKET [--cid N] [--port N]
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "vsock/vsock_service.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Copy what fd `from` has to `to` (blocking write of at most 64 KiB).  false on EOF/error. */
static bool relay(int from, int to)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0)
		return false;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));

		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = {.fd = to, .events = POLLOUT};
			(void)poll(&p, 1, 1000);
			continue;
		}
		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct mtd_vsock_config vc = {.guest_cid = VSOCK_DEFAULT_CID, .port = VSOCK_DEFAULT_PORT};
	const char *vhost = NULL, *listen_path = NULL;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct mtd_vsock *v;
	struct mtd_vsock_claim *claim = NULL;
	int lfd, wake, client = -1, stream = -1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--vhost"))
			vhost = argv[i + 1];
		else if (!strcmp(argv[i], "--listen"))
			listen_path = argv[i + 1];
		else if (!strcmp(argv[i], "--cid"))
			vc.guest_cid = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--port"))
			vc.port = (uint32_t)strtoul(argv[i + 1], NULL, 10);
	}
	if (!vhost || !listen_path || strlen(listen_path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: vsock_bridge --vhost QEMU_SOCKET --listen UNIX_SOCKET "
				"[--cid N] [--port N]\n");
		return 2;
	}
	mtd_log_init(MTD_LOG_INFO, false, "vsock_bridge");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	memcpy(sa.sun_path, listen_path, strlen(listen_path) + 1);
	unlink(listen_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (lfd < 0 || wake < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 4) < 0) {
		perror("vsock_bridge: listen");
		return 1;
	}
	if (mtd_vsock_start(&vc, &v) < 0 || mtd_vsock_add_endpoint(v, "bridge", vhost) < 0) {
		fprintf(stderr, "vsock_bridge: cannot start the vsock back end\n");
		return 1;
	}
	while (!stop) {
		struct pollfd p[4] = {{.fd = client < 0 ? lfd : -1, .events = POLLIN},
				      {.fd = wake, .events = POLLIN},
				      {.fd = client, .events = stream >= 0 ? POLLIN : 0},
				      {.fd = stream, .events = POLLIN}};

		if (poll(p, 4, 1000) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			client = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (client >= 0 && mtd_vsock_claim(v, "bridge", wake, &claim) < 0) {
				close(client);
				client = -1;
			}
		}
		if (p[1].revents & POLLIN) {
			uint64_t x;
			if (read(wake, &x, sizeof(x)) < 0) {
				/* drained */
			}
		}
		if (claim) {
			int fd = mtd_vsock_take_fd(claim);
			if (fd >= 0) {
				if (stream >= 0)
					close(stream);
				stream = fd;
			}
		}
		bool end = false;
		if (client >= 0 && stream >= 0 && (p[2].revents & (POLLIN | POLLHUP)))
			end = !relay(client, stream);
		else if (client >= 0 && (p[2].revents & POLLHUP))
			end = true;
		if (!end && stream >= 0 && client >= 0 && (p[3].revents & (POLLIN | POLLHUP)))
			end = !relay(stream, client);
		if (end) {
			/* One session per client, as one connection to a virtio-serial chardev. */
			if (stream >= 0)
				close(stream);
			close(client);
			stream = client = -1;
			mtd_vsock_release(claim);
			claim = NULL;
		}
	}
	mtd_vsock_stop(v);
	unlink(listen_path);
	return 0;
}
