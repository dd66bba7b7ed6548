/*
 * reclaim_echo.c - the guest's reclaim, seen by host-side access bits (reclaim_echo.h says
 * why): a short list of the recent answers and their sum within a window.
 */
#include "reclaim_echo.h"

void mtd_echo_add(struct mtd_echo *ec, uint64_t now_ms, uint64_t bytes)
{
	if (!bytes)
		return;
	if (ec->n == MTD_ECHO_MAX) {
		/* Full: the two oldest become one, stamped with the later time, so the sum
		 * only ever expires late (the estimate stays low a little longer), never early. */
		ec->e[1].bytes += ec->e[0].bytes;
		for (unsigned i = 1; i < ec->n; i++)
			ec->e[i - 1] = ec->e[i];
		ec->n--;
	}
	ec->e[ec->n].at_ms = now_ms;
	ec->e[ec->n].bytes = bytes;
	ec->n++;
}

uint64_t mtd_echo_bytes(struct mtd_echo *ec, uint64_t now_ms, uint64_t window_ms)
{
	unsigned keep = 0;
	uint64_t sum = 0;

	for (unsigned i = 0; i < ec->n; i++) {
		if (now_ms >= ec->e[i].at_ms && now_ms - ec->e[i].at_ms > window_ms)
			continue; /* its pages have aged past the window */
		ec->e[keep++] = ec->e[i];
		sum += ec->e[i].bytes;
	}
	ec->n = keep;
	return sum;
}

uint64_t mtd_echo_discount(uint64_t wss_bytes, uint64_t echo_bytes)
{
	return wss_bytes > echo_bytes ? wss_bytes - echo_bytes : 0;
}
