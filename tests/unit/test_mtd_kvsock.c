// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_mtd_kvsock.c - the agent over the kernel's vsock: which VM a connection's CID belongs
 * to (host/vsock/kvsock.c) and where a plain-QEMU VM's CID comes from (host/vsock/guest_cid.c).
 *
 * The accepted connection is a socketpair here: this machine's kernel has no vhost_vsock, and
 * a connection from a guest CID can only be made by a guest (the KVM host stand does that:
 * tests/kvm/kernel_vsock.sh).  mtd_kvsock_offer is the accepting thread's whole path after
 * accept(), so what it does with the fd, the CID and the port is what memtided does.
 *
 * Checked: a CID claimed by a VM gets that VM's connection (its loop woken, the stream the
 * one the guest side writes to); a CID no VM has is refused and closed, and so is a source
 * port from 1024 up, each said once per CID within MTD_KVSOCK_SAY_MS; two VMs cannot claim
 * one CID, nor a VM a CID no guest can have; a newer connection replaces one not taken yet;
 * a released claim refuses again.  QEMU's command line gives the CID in both of QEMU's
 * -device spellings (libvirt's JSON and the key=value one), never memtided's own
 * vhost-user-vsock, and says why when it cannot (no device, no or a bad CID, two devices).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "vsock/guest_cid.h"
#include "vsock/kvsock.h"

/* An argv as /proc/PID/cmdline holds it (NUL after each), from a '|'-separated string. */
static size_t argv_of(const char *s, char *out, size_t cap)
{
	size_t n = strlen(s);

	assert_true(n + 1 <= cap);
	memcpy(out, s, n + 1);
	for (size_t i = 0; i < n; i++)
		if (out[i] == '|')
			out[i] = '\0';
	return n + 1;
}

static int cid_of(const char *s, uint32_t *cid)
{
	char buf[1024];
	size_t n = argv_of(s, buf, sizeof(buf));

	return mtd_guest_cid_parse(buf, n, cid);
}

static void test_cid_from_qemus_command_line(void **state)
{
	uint32_t cid = 0;
	(void)state;

	assert_int_equal(cid_of("qemu-system-x86_64|-accel|kvm|-device|"
				"vhost-vsock-pci,id=vsock0,guest-cid=7|-m|1024",
				&cid),
			 0);
	assert_int_equal(cid, 7);
	/* libvirt's spelling: JSON, the CID a number */
	assert_int_equal(cid_of("qemu|-device|{\"driver\":\"vhost-vsock-pci\",\"id\":\"vsock0\","
				"\"guest-cid\":42,\"vhostfd\":\"28\",\"bus\":\"pci.7\"}",
				&cid),
			 0);
	assert_int_equal(cid, 42);
	assert_int_equal(
	    cid_of("qemu|--device=vhost-vsock-pci-non-transitional,guest-cid=0x10", &cid), 0);
	assert_int_equal(cid, 16);
	assert_int_equal(
	    cid_of("qemu|-device|{\"driver\":\"vhost-vsock-device\",\"guest-cid\":\"5\"}", &cid),
	    0);
	assert_int_equal(cid, 5);
	/* other devices on the way are not it */
	assert_int_equal(cid_of("qemu|-device|virtio-balloon-pci,id=balloon0|-device|"
				"vhost-vsock-pci,guest-cid=9|-device|{\"driver\":\"virtio-rng\"}",
				&cid),
			 0);
	assert_int_equal(cid, 9);

	/* memtided's own vhost-user device has no CID of the host's: not the kernel's */
	assert_int_equal(cid_of("qemu|-device|vhost-user-vsock-pci,chardev=memtide-vsock", &cid),
			 -ENOENT);
	assert_int_equal(cid_of("qemu|-m|512", &cid), -ENOENT);
	assert_int_equal(cid_of("qemu|-device", &cid), -ENOENT); /* the argument is missing */
	/* the device without a CID a guest can have */
	assert_int_equal(cid_of("qemu|-device|vhost-vsock-pci,id=v", &cid), -EINVAL);
	assert_int_equal(cid_of("qemu|-device|vhost-vsock-pci,guest-cid=2", &cid), -EINVAL);
	assert_int_equal(cid_of("qemu|-device|vhost-vsock-pci,guest-cid=4294967295", &cid),
			 -EINVAL);
	assert_int_equal(cid_of("qemu|-device|vhost-vsock-pci,guest-cid=7x", &cid), -EINVAL);
	assert_int_equal(
	    cid_of("qemu|-device|{\"driver\":\"vhost-vsock-pci\",\"guest-cid\":true}", &cid),
	    -EINVAL);
	/* two kernel vsock devices: which the agent uses is the guest's choice */
	assert_int_equal(cid_of("qemu|-device|vhost-vsock-pci,guest-cid=3|-device|"
				"vhost-vsock-pci,guest-cid=4",
				&cid),
			 -E2BIG);

	/* A command line cut short (no NUL at its end) is read no further than its length. */
	char buf[128];
	size_t n = argv_of("qemu|-device|vhost-vsock-pci,guest-cid=77", buf, sizeof(buf));
	assert_int_equal(mtd_guest_cid_parse(buf, n - 3, &cid), -ENOENT);

	/* From a process's cmdline file, as /proc has it. */
	char dir[] = "/tmp/memtide-kvsock-XXXXXX", path[128];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/4242", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/4242/cmdline", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	n = argv_of("qemu-system-x86_64|-device|vhost-vsock-pci,guest-cid=12", buf, sizeof(buf));
	assert_int_equal(fwrite(buf, 1, n, f), n);
	fclose(f);
	assert_int_equal(mtd_guest_cid_of_pid(dir, 4242, &cid), 0);
	assert_int_equal(cid, 12);
	assert_int_equal(mtd_guest_cid_of_pid(dir, 4243, &cid), -ENOENT);
	assert_int_equal(mtd_guest_cid_of_pid(dir, 0, &cid), -EINVAL);
	unlink(path);
	snprintf(path, sizeof(path), "%s/4242", dir);
	rmdir(path);
	rmdir(dir);
}

/* A connection as the accepting thread has it: our end (handed to memtided) and the guest's. */
static void conn(int *ours, int *guest)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	*ours = sv[0];
	*guest = sv[1];
}

/* The guest's end reads EOF: memtided closed the connection. */
static bool closed(int guest)
{
	char b;
	struct pollfd p = {.fd = guest, .events = POLLIN};

	return poll(&p, 1, 1000) == 1 && read(guest, &b, 1) == 0;
}

static bool woken(int efd)
{
	uint64_t v = 0;

	return read(efd, &v, sizeof(v)) == (ssize_t)sizeof(v) && v > 0;
}

/* Lines of the log (stderr) written while fn ran, in buf. */
static int log_fd = -1, saved_err = -1;
static void log_capture(void)
{
	char p[] = "/tmp/memtide-kvsock-log-XXXXXX";
	log_fd = mkstemp(p);
	assert_true(log_fd >= 0);
	unlink(p);
	saved_err = dup(2);
	dup2(log_fd, 2);
}
static void log_read(char *buf, size_t cap)
{
	dup2(saved_err, 2);
	close(saved_err);
	ssize_t n = pread(log_fd, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(log_fd);
}
static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void test_connections_go_to_the_vm_with_their_cid(void **state)
{
	struct mtd_kvsock *k;
	struct mtd_kvsock_claim *a, *b, *x;
	struct mtd_kvsock_counters ctr;
	int efd_a = eventfd(0, EFD_NONBLOCK), efd_b = eventfd(0, EFD_NONBLOCK);
	int ours, guest, guest2, fd;
	char logbuf[4096];
	uint64_t now = 100000;
	(void)state;

	mtd_log_init(MTD_LOG_INFO, false, "test");
	assert_int_equal(mtd_kvsock_new(5253, &k), 0);
	assert_int_equal(mtd_kvsock_claim(k, "web1", 7, efd_a, &a), 0);
	assert_int_equal(mtd_kvsock_claim(k, "db1", 8, efd_b, &b), 0);
	assert_int_equal(mtd_kvsock_claim_cid(a), 7);
	/* one CID, two VMs: connections from it could not be told apart */
	assert_int_equal(mtd_kvsock_claim(k, "web2", 7, efd_b, &x), -EEXIST);
	/* no guest has CID 0-2 (the hypervisor, local, the host) or -1 (any) */
	assert_int_equal(mtd_kvsock_claim(k, "h", 2, efd_b, &x), -EINVAL);
	assert_int_equal(mtd_kvsock_claim(k, "h", 0xffffffffu, efd_b, &x), -EINVAL);

	/* CID 7's agent, from a privileged port: web1's, and web1's loop is woken */
	conn(&ours, &guest);
	assert_int_equal(mtd_kvsock_offer(k, ours, 7, 700, now), 0);
	assert_true(woken(efd_a));
	assert_false(woken(efd_b));
	assert_int_equal(mtd_kvsock_take_fd(b), -EAGAIN);
	fd = mtd_kvsock_take_fd(a);
	assert_true(fd >= 0);
	assert_int_equal(write(guest, "hi", 2), 2);
	char got[4] = "";
	struct pollfd p = {.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 1000), 1);
	assert_int_equal(read(fd, got, sizeof(got)), 2);
	assert_memory_equal(got, "hi", 2);
	assert_int_equal(mtd_kvsock_take_fd(a), -EAGAIN); /* taken once */
	close(fd);
	close(guest);

	/* refused: a CID no VM has, and an unprivileged port; each said once in 10 s */
	log_capture();
	for (int i = 0; i < 3; i++) {
		conn(&ours, &guest);
		assert_int_equal(mtd_kvsock_offer(k, ours, 99, 700, now + (uint64_t)i), -ENOENT);
		assert_true(closed(guest));
		close(guest);
		conn(&ours, &guest);
		assert_int_equal(mtd_kvsock_offer(k, ours, 8, 40000, now + (uint64_t)i), -EPERM);
		assert_true(closed(guest));
		close(guest);
	}
	conn(&ours, &guest);
	assert_int_equal(mtd_kvsock_offer(k, ours, 99, 700, now + MTD_KVSOCK_SAY_MS), -ENOENT);
	close(guest);
	log_read(logbuf, sizeof(logbuf));
	assert_int_equal(count(logbuf, "refused a connection from CID 99 (port 700): no VM"), 2);
	assert_int_equal(count(logbuf, "db1: vsock: refused a connection from CID 8 port 40000"),
			 1);
	assert_false(woken(efd_b));
	assert_int_equal(mtd_kvsock_take_fd(b), -EAGAIN);

	/* The agent connected twice before its VM took the first: the newer one counts. */
	conn(&ours, &guest);
	assert_int_equal(mtd_kvsock_offer(k, ours, 8, 1023, now), 0);
	conn(&ours, &guest2);
	assert_int_equal(mtd_kvsock_offer(k, ours, 8, 1000, now), 0);
	assert_true(closed(guest));
	fd = mtd_kvsock_take_fd(b);
	assert_true(fd >= 0);
	assert_int_equal(write(guest2, "x", 1), 1);
	p.fd = fd;
	assert_int_equal(poll(&p, 1, 1000), 1);
	close(fd);
	close(guest);
	close(guest2);

	/* Released (the VM detached): its CID is refused again, a pending stream closed. */
	conn(&ours, &guest);
	assert_int_equal(mtd_kvsock_offer(k, ours, 7, 700, now), 0);
	mtd_kvsock_release(a);
	assert_true(closed(guest));
	close(guest);
	conn(&ours, &guest);
	assert_int_equal(mtd_kvsock_offer(k, ours, 7, 700, now + 2 * MTD_KVSOCK_SAY_MS), -ENOENT);
	assert_true(closed(guest));
	close(guest);

	mtd_kvsock_counters(k, &ctr);
	assert_int_equal(ctr.accepted, 12);
	assert_int_equal(ctr.handed, 4);
	assert_int_equal(ctr.refused_cid, 5);
	assert_int_equal(ctr.refused_port, 3);
	mtd_kvsock_release(b);
	mtd_kvsock_free(k);
	close(efd_a);
	close(efd_b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cid_from_qemus_command_line),
	    cmocka_unit_test(test_connections_go_to_the_vm_with_their_cid),
	};
	return cmocka_run_group_tests_name("mtd_kvsock", tests, NULL, NULL);
}
