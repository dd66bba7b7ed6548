// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_vhost_vring.c - the guest memory table (host/vsock/vu_mem.c) and the split virtqueue
 * (host/vsock/vring.c) against a fake guest driver (vhost_fake_guest.h) that plays fair
 * and then breaks each rule a hostile guest can break.
 *
 * Checked: translations stop at the last byte of a region and never wrap; overlapping,
 * empty or wrapping regions are refused; buffers across two adjacent regions become two
 * iovecs; a fair chain pops with its readable and writable parts; every broken chain (a
 * loop, an out-of-range next, INDIRECT, readable after writable, a buffer outside memory,
 * more pieces than VQ_MAX_IOV, > 1 GiB) comes back as used with length 0 while the ring
 * stays usable; a ring whose available index jumps ahead, or names a head >= num, is
 * marked broken; the used ring is written in order and NO_INTERRUPT suppresses signals;
 * a restart with an unknown base resumes from the used index in memory.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "vhost_fake_guest.h"

static void test_mem_translate_bounds(void **state)
{
	struct fake_guest g;
	(void)state;

	g_init(&g, 16);
	assert_non_null(vu_mem_gpa(&g.mem, G_GPA, G_BYTES));
	assert_non_null(vu_mem_gpa(&g.mem, G_GPA + G_BYTES - 1, 1));
	assert_null(vu_mem_gpa(&g.mem, G_GPA + G_BYTES - 1, 2));
	assert_null(vu_mem_gpa(&g.mem, G_GPA - 1, 1));
	assert_null(vu_mem_gpa(&g.mem, G_GPA + 16, UINT64_MAX)); /* no wrap */
	assert_null(vu_mem_gpa(&g.mem, UINT64_MAX, 2));
	assert_non_null(vu_mem_uva(&g.mem, G_UVA + 100, 100));
	assert_null(vu_mem_uva(&g.mem, G_GPA, 1)); /* a gpa is not a uva */
	g_free(&g);
}

static void test_mem_table_rules(void **state)
{
	static uint8_t a[8192], b[8192];
	uint8_t *host[2] = {a, b};
	struct vu_memory_wire w = {.nregions = 2};
	struct vu_mem m = {0};
	char why[160];
	(void)state;

	/* Adjacent regions: a buffer across the seam becomes two pieces. */
	w.r[0] = (struct vu_region_wire){.gpa = 0, .size = 8192, .uva = 0x10000};
	w.r[1] = (struct vu_region_wire){.gpa = 8192, .size = 8192, .uva = 0x20000};
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), 0);
	struct iovec iov[4];
	unsigned n = 0;
	assert_int_equal(vu_mem_iov(&m, 8000, 400, iov, &n, 4), 0);
	assert_int_equal(n, 2);
	assert_ptr_equal(iov[0].iov_base, a + 8000);
	assert_int_equal(iov[0].iov_len, 192);
	assert_ptr_equal(iov[1].iov_base, b);
	assert_int_equal(iov[1].iov_len, 208);
	n = 0;
	assert_int_equal(vu_mem_iov(&m, 8000, 400, iov, &n, 1), -E2BIG);
	n = 0;
	assert_int_equal(vu_mem_iov(&m, 16000, 400, iov, &n, 4), -EFAULT);
	uint64_t gen = m.generation;

	/* Refused tables leave the old one in force. */
	w.r[1].gpa = 4096; /* overlaps region 0 */
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "overlap"));
	w.r[1] =
	    (struct vu_region_wire){.gpa = 8192, .size = 8192, .uva = 0x10100}; /* uva overlap */
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), -EINVAL);
	w.r[1] = (struct vu_region_wire){.gpa = UINT64_MAX - 100, .size = 8192, .uva = 0x20000};
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), -EINVAL);
	w.r[1] = (struct vu_region_wire){.gpa = 8192, .size = 0, .uva = 0x20000};
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), -EINVAL);
	w.nregions = 9;
	assert_int_equal(vu_mem_set_raw(&m, &w, host, why, sizeof(why)), -EINVAL);
	assert_int_equal(m.generation, gen);
	assert_ptr_equal(vu_mem_gpa(&m, 8192, 1), b);
	vu_mem_clear(&m);
}

static void test_mem_table_short_file_refused(void **state)
{
	struct vu_memory_wire w = {.nregions = 1};
	struct vu_mem m = {0};
	char why[160];
	(void)state;

	/* A memfd shorter than offset + size would SIGBUS on access: refused at SET time. */
	int fd = memfd_create("guest", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8192), 0);
	w.r[0] =
	    (struct vu_region_wire){.gpa = 0, .size = 8192, .uva = 0x1000, .mmap_offset = 4096};
	assert_int_equal(vu_mem_set(&m, &w, &fd, why, sizeof(why)), -EINVAL);
	assert_int_equal(m.n, 0);
	w.r[0].mmap_offset = 0;
	assert_int_equal(vu_mem_set(&m, &w, &fd, why, sizeof(why)), 0);
	/* our mapping is the guest's memory */
	uint8_t *p = vu_mem_gpa(&m, 100, 1);
	assert_non_null(p);
	*p = 42;
	uint8_t back = 0;
	assert_int_equal(pread(fd, &back, 1, 100), 1);
	assert_int_equal(back, 42);
	vu_mem_clear(&m);
	close(fd);
}

static void test_fair_chain(void **state)
{
	struct fake_guest g;
	struct vq_chain c;
	uint32_t id, len;
	(void)state;

	g_init(&g, 16);
	struct gdesc d[3] = {{g_alloc(&g, 44), 44, false},
			     {g_alloc(&g, 100), 100, false},
			     {g_alloc(&g, 4096), 4096, true}};
	uint16_t head = g_add_chain(&g, 1, d, 3);
	assert_int_equal(vq_avail_pending(&g.vq[1]), 1);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 1);
	assert_int_equal(c.head, head);
	assert_int_equal(c.nr_read, 2);
	assert_int_equal(c.nr_write, 1);
	assert_int_equal(c.read_bytes, 144);
	assert_int_equal(c.write_bytes, 4096);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 0);
	/* chain read and write stay inside their parts */
	memset(g_ptr(&g, d[1].gpa), 7, 100);
	uint8_t buf[200];
	assert_int_equal(vq_chain_read(&c, 40, buf, sizeof(buf)), 104);
	assert_int_equal(buf[4], 7);
	assert_int_equal(vq_chain_write(&c, 4000, buf, sizeof(buf)), 96);
	vq_push(&g.vq[1], c.head, 96);
	assert_true(g_take_used(&g, 1, &id, &len));
	assert_int_equal(id, head);
	assert_int_equal(len, 96);
	g_free(&g);
}

/* Post a one-descriptor chain, then corrupt it with fn; the device must give it back empty
 * and keep the ring usable for the next, fair chain. */
static void expect_dropped(struct fake_guest *g, void (*corrupt)(struct fake_guest *, uint16_t))
{
	struct vq_chain c;
	uint32_t id, len;
	struct gdesc d = {g_alloc(g, 64), 64, false};
	uint16_t head = g_add_chain(g, 1, &d, 1);

	corrupt(g, head);
	assert_int_equal(vq_pop(&g->vq[1], &g->mem, &c), -EFAULT);
	assert_false(g->vq[1].broken);
	assert_true(g_take_used(g, 1, &id, &len));
	assert_int_equal(id, head);
	assert_int_equal(len, 0);
	head = g_add_chain(g, 1, &d, 1);
	assert_int_equal(vq_pop(&g->vq[1], &g->mem, &c), 1);
	assert_int_equal(c.head, head);
	vq_push(&g->vq[1], c.head, 0);
	assert_true(g_take_used(g, 1, &id, &len));
}

static void c_self_loop(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, G_GPA + G_BUF_START, 8, VRING_DESC_F_NEXT, h);
}
static void c_next_out_of_range(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, G_GPA + G_BUF_START, 8, VRING_DESC_F_NEXT, g->num);
}
static void c_indirect(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, G_GPA + G_BUF_START, 16, VRING_DESC_F_INDIRECT, 0);
}
static void c_outside_memory(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, G_GPA + G_BYTES - 8, 16, 0, 0);
}
static void c_below_memory(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, 0, 16, 0, 0);
}
static void c_huge(struct fake_guest *g, uint16_t h)
{
	g_set_desc(g, 1, h, G_GPA, UINT32_MAX, 0, 0);
}
static void c_read_after_write(struct fake_guest *g, uint16_t h)
{
	uint16_t n = (uint16_t)((h + 1) % g->num);
	g_set_desc(g, 1, h, G_GPA + G_BUF_START, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, n);
	g_set_desc(g, 1, n, G_GPA + G_BUF_START, 8, 0, 0);
}
static void c_long_chain(struct fake_guest *g, uint16_t h)
{
	/* A cycle through every slot: longer than num, so it ends at the limit. */
	for (uint16_t i = 0; i < g->num; i++)
		g_set_desc(g, 1, (uint16_t)((h + i) % g->num), G_GPA + G_BUF_START, 1,
			   VRING_DESC_F_NEXT, (uint16_t)((h + i + 1) % g->num));
}

static void test_hostile_chains_dropped(void **state)
{
	struct fake_guest g;
	(void)state;

	g_init(&g, 16);
	expect_dropped(&g, c_self_loop);
	expect_dropped(&g, c_next_out_of_range);
	expect_dropped(&g, c_indirect);
	expect_dropped(&g, c_outside_memory);
	expect_dropped(&g, c_below_memory);
	expect_dropped(&g, c_huge);
	expect_dropped(&g, c_read_after_write);
	expect_dropped(&g, c_long_chain);
	assert_int_equal(g.vq[1].dropped_chains, 8);
	g_free(&g);
}

static void test_too_many_pieces_dropped(void **state)
{
	struct fake_guest g;
	struct vq_chain c;
	struct gdesc d[VQ_MAX_IOV + 1];
	(void)state;

	g_init(&g, 64);
	for (unsigned i = 0; i <= VQ_MAX_IOV; i++)
		d[i] = (struct gdesc){g_alloc(&g, 8), 8, false};
	g_add_chain(&g, 1, d, VQ_MAX_IOV + 1);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), -EFAULT);
	g_add_chain(&g, 1, d, VQ_MAX_IOV);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 1);
	assert_int_equal(c.nr_read, VQ_MAX_IOV);
	g_free(&g);
}

static void test_broken_rings(void **state)
{
	struct fake_guest g;
	struct vq_chain c;
	(void)state;

	/* The available index runs more than num ahead. */
	g_init(&g, 16);
	g_set_avail_idx(&g, 1, 17);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), -EIO);
	assert_true(g.vq[1].broken);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 0); /* left alone */
	assert_int_equal(vq_avail_pending(&g.vq[1]), 0);
	g_free(&g);

	/* A head past the table. */
	g_init(&g, 16);
	g_set_avail_ring(&g, 1, 0, 16);
	g_set_avail_idx(&g, 1, 1);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), -EIO);
	assert_true(g.vq[1].broken);
	g_free(&g);

	/* Rings outside memory or misaligned cannot be set up at all. */
	g_init(&g, 16);
	g.vq[1].used_uva = G_UVA + G_BYTES - 8;
	assert_int_equal(vq_translate(&g.vq[1], &g.mem), -EFAULT);
	g.vq[1].used_uva = G_UVA + g_ring_off(1, 2) + 2;
	assert_int_equal(vq_translate(&g.vq[1], &g.mem), -EINVAL);
	assert_false(vq_ready(&g.vq[1]));
	g_free(&g);
}

static void test_notify_and_no_interrupt(void **state)
{
	struct fake_guest g;
	struct vq_chain c;
	uint64_t v;
	(void)state;

	g_init(&g, 16);
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	g.vq[1].call_fd = efd;
	assert_false(vq_notify(&g.vq[1])); /* nothing pushed */
	struct gdesc d = {g_alloc(&g, 64), 64, false};
	g_add_chain(&g, 1, &d, 1);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 1);
	vq_push(&g.vq[1], c.head, 0);
	assert_true(vq_notify(&g.vq[1]));
	assert_int_equal(read(efd, &v, sizeof(v)), (ssize_t)sizeof(v));
	g_set_avail_flags(&g, 1, VRING_AVAIL_F_NO_INTERRUPT);
	g_add_chain(&g, 1, &d, 1);
	assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 1);
	vq_push(&g.vq[1], c.head, 0);
	assert_false(vq_notify(&g.vq[1]));
	assert_int_equal(read(efd, &v, sizeof(v)), -1);
	close(efd);
	g.vq[1].call_fd = -1;
	g_free(&g);
}

static void test_resume_from_used_index(void **state)
{
	struct fake_guest g;
	struct vq_chain c;
	uint32_t id, len;
	(void)state;

	/* Three chains were served by an earlier back end (used index 3); the guest has
	 * posted a fourth.  A new back end that does not know the base resumes at 3. */
	g_init(&g, 16);
	struct gdesc d = {g_alloc(&g, 64), 64, false};
	for (int i = 0; i < 3; i++) {
		g_add_chain(&g, 1, &d, 1);
		assert_int_equal(vq_pop(&g.vq[1], &g.mem, &c), 1);
		vq_push(&g.vq[1], c.head, 0);
		assert_true(g_take_used(&g, 1, &id, &len));
	}
	uint16_t head = g_add_chain(&g, 1, &d, 1);
	struct vq fresh;
	vq_init(&fresh);
	fresh.num = 16;
	fresh.desc_uva = g.vq[1].desc_uva;
	fresh.avail_uva = g.vq[1].avail_uva;
	fresh.used_uva = g.vq[1].used_uva;
	fresh.base_unknown = true;
	fresh.started = fresh.enabled = true;
	assert_int_equal(vq_translate(&fresh, &g.mem), 0);
	assert_int_equal(vq_pop(&fresh, &g.mem, &c), 1);
	assert_int_equal(c.head, head);
	assert_int_equal(fresh.last_avail, 4);
	vq_push(&fresh, c.head, 0);
	assert_int_equal(g_used_idx(&g, 1), 4);
	g_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mem_translate_bounds),
	    cmocka_unit_test(test_mem_table_rules),
	    cmocka_unit_test(test_mem_table_short_file_refused),
	    cmocka_unit_test(test_fair_chain),
	    cmocka_unit_test(test_hostile_chains_dropped),
	    cmocka_unit_test(test_too_many_pieces_dropped),
	    cmocka_unit_test(test_broken_rings),
	    cmocka_unit_test(test_notify_and_no_interrupt),
	    cmocka_unit_test(test_resume_from_used_index),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
