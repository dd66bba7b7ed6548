/*
 * pt_format.c - look up a page-table format by id (Part 1 of libvmm).
 *
 * The formats are constant tables (pt_ept.c, pt_s2.c); callers hold the returned pointer
 * for as long as they like.  walk.c recognises these two objects by address and uses its
 * inlined inner loop for them; any other `struct vmm_pt_format` a caller builds still walks,
 * through the function pointers.
 */
#include <stddef.h>

#include "pt_format.h"

const struct vmm_pt_format *vmm_pt_format_get(enum vmm_pt_format_id id)
{
	switch (id) {
	case VMM_PT_EPT:
		return &vmm_pt_format_ept;
	case VMM_PT_S2:
		return &vmm_pt_format_s2;
	}
	return NULL;
}
