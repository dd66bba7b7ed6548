// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_vm_cgroup.c - finding a VM's memory cgroup, moving a plain QEMU into one of its own
 * (host/act/vm_cgroup.c), and reading and driving it (host/act/memcg.c).
 *
 * A fake cgroupfs and a fake /proc (fake_tree.h), both ordinary directories under a temporary
 * one, stand in for the kernel's: this machine's memory controller is on cgroup v1 (cgroup2
 * holds no memory controller here, ../shared/README.md), and moving a process between real
 * cgroups would touch host-global state.  What only the real cgroupfs does (files that
 * appear by themselves, memory.reclaim actually reclaiming) is the KVM stand's to test
 * (tests/kvm/stand.sh).  The layouts here are the ones seen there and under libvirt: the
 * domain's scope with QEMU's threads in libvirt/emulator and libvirt/vcpuN.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "act/memcg.h"
#include "act/vm_cgroup.h"
#include "fake_tree.h"

#define QEMU_PID  1234
#define OTHER_PID 4242
#define KTHREAD   777
#define SCOPE     FAKE_SCOPE

static bool is_dir(const char *dir, const char *rel)
{
	char path[3 * PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* libvirt's layout under systemd, QEMU's main thread in libvirt/emulator. */
static int setup_libvirt(void **state)
{
	struct fake_tree *t = fake_tree_new("vmcg");

	fake_put(t->cg, "cgroup.controllers", "cpuset cpu io memory pids\n");
	fake_put(t->cg, "cgroup.subtree_control", "cpu memory pids\n");
	fake_libvirt_domain(t, QEMU_PID);
	fake_put(t->cg, SCOPE "/libvirt/cgroup.procs", "");
	fake_put(t->cg, SCOPE "/libvirt/vcpu0/cgroup.procs", "");
	fake_proc_stat(t, QEMU_PID, "x y", 0x400000);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	fake_tree_free(*state);
	return 0;
}

static int find(struct fake_tree *t, struct mtd_vm_cgroup *cg, char *why, size_t len)
{
	struct mtd_cgroup_env env = {.proc_root = t->proc, .cg_root = t->cg};

	why[0] = '\0';
	return mtd_cgroup_find(&env, QEMU_PID, cg, why, len);
}

static void test_parse_proc(void **state)
{
	char path[MTD_CG_PATH_MAX];
	bool v1 = true;

	(void)state;
	/* A cgroup v2-only host (libvirt's domain, as on the KVM stand). */
	assert_int_equal(
	    mtd_cgroup_parse_proc("0::" SCOPE "/libvirt/vcpu1\n", path, sizeof(path), &v1), 0);
	assert_string_equal(path, SCOPE "/libvirt/vcpu1");
	assert_false(v1);
	/* A hybrid host (this machine): the memory controller on a v1 hierarchy. */
	assert_int_equal(mtd_cgroup_parse_proc("12:cpu,cpuacct:/x\n4:memory:/user.slice\n"
					       "0::/user.slice/s.scope\n",
					       path, sizeof(path), &v1),
			 0);
	assert_true(v1);
	assert_string_equal(path, "/user.slice/s.scope");
	/* A v1-only host has no "0::" line. */
	assert_int_equal(mtd_cgroup_parse_proc("4:memory:/\n", path, sizeof(path), &v1), -ENOENT);
	assert_int_equal(mtd_cgroup_parse_proc("not a cgroup file\n", path, sizeof(path), &v1),
			 -EPROTO);
	assert_int_equal(mtd_cgroup_parse_proc("", path, sizeof(path), &v1), -EPROTO);
	/* A path longer than the buffer is refused, not cut. */
	assert_int_equal(mtd_cgroup_parse_proc("0::/abcdefgh\n", path, 4, &v1), -EPROTO);
}

static void test_parse_mountinfo(void **state)
{
	char root[MTD_CG_PATH_MAX];

	(void)state;
	assert_int_equal(
	    mtd_cgroup_parse_mountinfo(
		"22 28 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
		"30 22 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 "
		"rw,nsdelegate\n",
		root, sizeof(root)),
	    0);
	assert_string_equal(root, "/sys/fs/cgroup/unified");
	assert_int_equal(mtd_cgroup_parse_mountinfo("22 28 0:21 / /sys rw - sysfs sysfs rw\n", root,
						    sizeof(root)),
			 -ENOENT);
}

static void test_vm_path(void **state)
{
	char out[MTD_CG_PATH_MAX];

	(void)state;
	mtd_cgroup_vm_path(SCOPE "/libvirt/vcpu12", out, sizeof(out));
	assert_string_equal(out, SCOPE);
	mtd_cgroup_vm_path(SCOPE "/libvirt/emulator", out, sizeof(out));
	assert_string_equal(out, SCOPE);
	mtd_cgroup_vm_path(SCOPE "/libvirt", out, sizeof(out));
	assert_string_equal(out, SCOPE);
	/* libvirt without systemd. */
	mtd_cgroup_vm_path("/machine/qemu-1-vm.libvirt-qemu/emulator", out, sizeof(out));
	assert_string_equal(out, "/machine/qemu-1-vm.libvirt-qemu");
	/* Plain QEMU: its own cgroup, whatever it is called. */
	mtd_cgroup_vm_path("/system.slice/run-r1.scope", out, sizeof(out));
	assert_string_equal(out, "/system.slice/run-r1.scope");
	/* "vcpux" is not a thread group; "/vcpu0" alone is under the root. */
	mtd_cgroup_vm_path("/a/vcpux", out, sizeof(out));
	assert_string_equal(out, "/a/vcpux");
	mtd_cgroup_vm_path("/vcpu0", out, sizeof(out));
	assert_string_equal(out, "/");
}

static void test_scope_name(void **state)
{
	char out[MTD_CG_PATH_MAX];

	(void)state;
	mtd_cgroup_scope_name("web-1.prod", out, sizeof(out));
	assert_string_equal(out, "web-1.prod.scope");
	/* A slash or a space must not make a path or a second word. */
	mtd_cgroup_scope_name("a b/../c", out, sizeof(out));
	assert_string_equal(out, "a\\x20b\\x2f..\\x2fc.scope");
	mtd_cgroup_scope_name(".hidden", out, sizeof(out));
	assert_string_equal(out, "\\x2ehidden.scope");
}

static void test_find_libvirt(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_vm_cgroup cg;
	char why[512];

	assert_int_equal(find(t, &cg, why, sizeof(why)), 0);
	assert_string_equal(cg.path, SCOPE);
	assert_string_equal(cg.root, t->cg);
	assert_true(strncmp(cg.dir, t->cg, strlen(t->cg)) == 0);
	assert_string_equal(cg.dir + strlen(t->cg), SCOPE);
	assert_false(cg.moved);

	/* KVM's and vhost's kernel threads sit in the VM's cgroup too: still the VM's own. */
	fake_put(t->cg, SCOPE "/libvirt/vcpu0/cgroup.procs", "777\n");
	fake_proc_stat(t, KTHREAD, "x y", 0x00200000UL | 0x40UL);
	assert_int_equal(find(t, &cg, why, sizeof(why)), 0);

	/* Another process below the scope: not the VM's alone. */
	fake_put(t->cg, SCOPE "/libvirt/vcpu0/cgroup.procs", "777\n4242\n");
	fake_proc_stat(t, OTHER_PID, "x y", 0x400000);
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EBUSY);
	assert_non_null(strstr(why, "shares its cgroup"));
	assert_non_null(strstr(why, "4242"));
}

static void test_find_refusals(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_vm_cgroup cg;
	char why[512];

	/* The memory controller not on for the VM's cgroup (no memory.* files in it). */
	char path[3 * PATH_MAX];
	snprintf(path, sizeof(path), "%s%s/memory.current", t->cg, SCOPE);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EBUSY);
	assert_non_null(strstr(why, "not on"));
	fake_put(t->cg, SCOPE "/memory.current", "1\n");

	/* A kernel older than 5.19. */
	snprintf(path, sizeof(path), "%s%s/memory.reclaim", t->cg, SCOPE);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "memory.reclaim"));
	fake_put(t->cg, SCOPE "/memory.reclaim", "");

	/* The memory controller on cgroup v1 (a hybrid host): said, with what to do. */
	fake_put(t->proc, "1234/cgroup",
		 "4:memory:/machine.slice\n0::" SCOPE "/libvirt/emulator\n");
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "cgroup v1"));
	assert_non_null(strstr(why, "systemd.unified_cgroup_hierarchy=1"));
	fake_put(t->proc, "1234/cgroup", "4:memory:/machine.slice\n");
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EOPNOTSUPP);

	/* cgroup v2 without the memory controller. */
	fake_put(t->proc, "1234/cgroup", "0::" SCOPE "/libvirt/emulator\n");
	fake_put(t->cg, "cgroup.controllers", "cpu io pids\n");
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "no memory controller"));
	fake_put(t->cg, "cgroup.controllers", "cpu io memory pids\n");

	/* QEMU in the root cgroup. */
	fake_put(t->proc, "1234/cgroup", "0::/\n");
	assert_int_equal(find(t, &cg, why, sizeof(why)), -EBUSY);
	assert_non_null(strstr(why, "root cgroup"));

	/* QEMU gone. */
	snprintf(path, sizeof(path), "%s/1234/cgroup", t->proc);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(find(t, &cg, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "gone"));
}

/* Plain QEMU started from a login shell: it shares the session's scope, memtided moves it
 * into memtide.slice/NAME.scope and turns the memory controller on on the way down. */
static void test_adopt(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_cgroup_env env = {.proc_root = t->proc, .cg_root = t->cg};
	struct mtd_vm_cgroup cg;
	char why[512];

	fake_put(t->cg, "cgroup.subtree_control", "cpu pids\n");
	fake_put(t->cg, "user.slice/session-1.scope/memory.current", "1\n");
	fake_put(t->cg, "user.slice/session-1.scope/memory.reclaim", "");
	fake_put(t->cg, "user.slice/session-1.scope/cgroup.procs", "1234\n4242\n");
	fake_proc_stat(t, OTHER_PID, "x y", 0x400000);
	fake_put(t->proc, "1234/cgroup", "0::/user.slice/session-1.scope\n");
	assert_int_equal(mtd_cgroup_find(&env, QEMU_PID, &cg, why, sizeof(why)), -EBUSY);
	assert_string_equal(cg.path, "/user.slice/session-1.scope");

	/* In a fake tree a new directory has no cgroup.procs (the kernel makes it in a real
	 * one): the move fails, and the scope memtided made for it is removed again. */
	fake_put(t->cg, MTD_CG_SLICE "/cgroup.subtree_control", "memory\n");
	assert_int_not_equal(mtd_cgroup_adopt(&env, "vm 1", QEMU_PID, &cg, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "cannot move QEMU"));
	assert_false(is_dir(t->cg, MTD_CG_SLICE "/vm\\x201.scope"));
	assert_false(cg.moved);
	/* ...but the root's controller was turned on, as it must be for any child's. */
	assert_non_null(strstr(fake_get(t->cg, "cgroup.subtree_control"), "+memory"));

	/* The scope is there (as the kernel would show it): QEMU is written into it. */
	fake_put(t->cg, MTD_CG_SLICE "/vm\\x201.scope/cgroup.procs", "");
	assert_int_equal(mtd_cgroup_adopt(&env, "vm 1", QEMU_PID, &cg, why, sizeof(why)), 0);
	assert_true(cg.moved);
	assert_false(cg.created);
	assert_string_equal(cg.path, "/" MTD_CG_SLICE "/vm\\x201.scope");
	assert_string_equal(cg.moved_from, "/user.slice/session-1.scope");
	assert_string_equal(fake_get(t->cg, MTD_CG_SLICE "/vm\\x201.scope/cgroup.procs"), "1234");

	/* Nothing made by memtided: nothing removed on detach. */
	assert_int_equal(mtd_cgroup_remove_if_empty(&cg), 0);
	assert_true(is_dir(t->cg, MTD_CG_SLICE "/vm\\x201.scope"));
}

static void test_remove_if_empty(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_vm_cgroup cg = {.created = true};

	fake_put(t->cg, MTD_CG_SLICE "/a.scope/cgroup.procs", "1234\n");
	snprintf(cg.dir, sizeof(cg.dir), "%s/%s/a.scope", t->cg, MTD_CG_SLICE);
	/* QEMU still in it: left as it is. */
	assert_int_equal(mtd_cgroup_remove_if_empty(&cg), -EBUSY);
	assert_true(is_dir(t->cg, MTD_CG_SLICE "/a.scope"));
	/* Empty (a real cgroup's files do not count as entries; here the file goes). */
	char path[3 * PATH_MAX];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg.dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mtd_cgroup_remove_if_empty(&cg), 0);
	assert_false(is_dir(t->cg, MTD_CG_SLICE "/a.scope"));
	/* Already gone: nothing to do. */
	assert_int_equal(mtd_cgroup_remove_if_empty(&cg), 0);
}

static void test_rss_anon(void **state)
{
	struct fake_tree *t = *state;
	uint64_t b = 0;

	fake_put(t->proc, "1234/status", "Name:\tqemu\nVmRSS:\t 9000 kB\nRssAnon:\t  2048 kB\n");
	assert_int_equal(mtd_cgroup_rss_anon(t->proc, QEMU_PID, &b), 0);
	assert_int_equal(b, 2048 * 1024);
	fake_put(t->proc, "1234/status", "Name:\tqemu\n");
	assert_int_equal(mtd_cgroup_rss_anon(t->proc, QEMU_PID, &b), -EPROTO);
	assert_int_equal(mtd_cgroup_rss_anon(t->proc, 99999, &b), -ENOENT);
}

/* The figures the controller feeds on, as a 6.1 kernel prints them. */
static void test_memcg_read(void **state)
{
	struct fake_tree *t = *state;
	struct mtd_memcg_stat st;
	char dir[3 * PATH_MAX];

	snprintf(dir, sizeof(dir), "%s%s", t->cg, SCOPE);
	fake_put(t->cg, SCOPE "/memory.stat",
		 "anon 805306368\nfile 4096\nkernel 1000\nanon_thp 0\n"
		 "workingset_refault_anon 1200\nworkingset_refault_file 7\n"
		 "pgfault 99\npgmajfault 1300\n");
	fake_put(t->cg, SCOPE "/memory.pressure",
		 "some avg10=1.50 avg60=0.20 avg300=0.00 total=2500000\n"
		 "full avg10=0.00 avg60=0.00 avg300=0.00 total=400\n");
	fake_put(t->cg, SCOPE "/memory.swap.current", "52428800\n");
	fake_put(t->cg, SCOPE "/memory.high", "max\n");
	fake_put(t->cg, SCOPE "/memory.max", "2147483648\n");
	assert_int_equal(mtd_memcg_read(dir, &st), 0);
	assert_int_equal(st.current_bytes, 1073741824);
	assert_int_equal(st.anon_bytes, 805306368);
	assert_int_equal(st.file_bytes, 4096);
	assert_int_equal(st.refault_anon, 1200);
	assert_int_equal(st.refault_file, 7);
	assert_int_equal(st.pgmajfault, 1300);
	assert_true(st.has_psi);
	assert_int_equal(st.psi_some_us, 2500000);
	assert_int_equal(st.psi_full_us, 400);
	assert_true(st.psi_some_avg10 > 1.49 && st.psi_some_avg10 < 1.51);
	assert_true(st.has_swap);
	assert_int_equal(st.swap_bytes, 52428800);
	assert_true(st.has_limits);
	assert_true(st.high_bytes == UINT64_MAX);
	assert_int_equal(st.max_bytes, 2147483648ULL);

	/* No swap accounting, no PSI (psi=0): read, and said missing. */
	char path[4 * PATH_MAX];
	snprintf(path, sizeof(path), "%s/memory.pressure", dir);
	assert_int_equal(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/memory.swap.current", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mtd_memcg_read(dir, &st), 0);
	assert_false(st.has_psi);
	assert_false(st.has_swap);

	/* Not a memory.stat: refused; the cgroup gone: -ENOENT. */
	fake_put(t->cg, SCOPE "/memory.stat", "garbage\n");
	assert_int_equal(mtd_memcg_read(dir, &st), -EPROTO);
	assert_int_equal(mtd_memcg_read("/nonexistent/memtide-cg", &st), -ENOENT);
}

static void test_memcg_parse_edges(void **state)
{
	struct mtd_memcg_stat st = {0};
	uint64_t b;

	(void)state;
	/* "anon_thp" and "file_mapped" must not be read as "anon" and "file". */
	assert_int_equal(mtd_memcg_parse_stat("anon_thp 5\nfile_mapped 6\nanon 7\n", &st), 0);
	assert_int_equal(st.anon_bytes, 7);
	assert_int_equal(st.file_bytes, 0);
	assert_int_equal(mtd_memcg_parse_stat("anon_thp 5\n", &st), -EPROTO);
	assert_int_equal(mtd_memcg_parse_pressure("nothing here", &st), -EPROTO);
	assert_int_equal(mtd_memcg_parse_limit("max\n", &b), 0);
	assert_true(b == UINT64_MAX);
	assert_int_equal(mtd_memcg_parse_limit("-1\n", &b), -EPROTO);
	assert_int_equal(mtd_memcg_parse_limit("99999999999999999999999\n", &b), -EPROTO);
}

/* memory.reclaim takes a byte count; without the file (Linux before 5.19) -ENOENT. */
static void test_memcg_reclaim(void **state)
{
	struct fake_tree *t = *state;
	char dir[3 * PATH_MAX];

	snprintf(dir, sizeof(dir), "%s%s", t->cg, SCOPE);
	assert_int_equal(mtd_memcg_reclaim(dir, 8 << 20), 0);
	assert_string_equal(fake_get(t->cg, SCOPE "/memory.reclaim"), "8388608");
	assert_int_equal(mtd_memcg_reclaim("/nonexistent/memtide-cg", 8 << 20), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_proc),
	    cmocka_unit_test(test_parse_mountinfo),
	    cmocka_unit_test(test_vm_path),
	    cmocka_unit_test(test_scope_name),
	    cmocka_unit_test_setup_teardown(test_find_libvirt, setup_libvirt, teardown),
	    cmocka_unit_test_setup_teardown(test_find_refusals, setup_libvirt, teardown),
	    cmocka_unit_test_setup_teardown(test_adopt, setup_libvirt, teardown),
	    cmocka_unit_test_setup_teardown(test_remove_if_empty, setup_libvirt, teardown),
	    cmocka_unit_test_setup_teardown(test_rss_anon, setup_libvirt, teardown),
	    cmocka_unit_test_setup_teardown(test_memcg_read, setup_libvirt, teardown),
	    cmocka_unit_test(test_memcg_parse_edges),
	    cmocka_unit_test_setup_teardown(test_memcg_reclaim, setup_libvirt, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
