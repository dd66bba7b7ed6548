/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_plugin_arg.h - the ept plugin's -plugin argument (ept_plugin_arg.c), which
 * `memtidectl ept-plugin` prints and domxml-patch --ept writes into a domain.
 */
#ifndef MEMTIDE_HOST_EPT_PLUGIN_ARG_H
#define MEMTIDE_HOST_EPT_PLUGIN_ARG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* memtide-ept.so beside this program's install (BIN/../lib/memtide/), else /usr/lib/memtide.
 * 0, or -ENOENT when not found (out still holds the default path). */
int mtd_ept_plugin_path(char *out, size_t len);
/* "PLUGIN,table=DIR/NAME.ept,ram=NM[,lowmem=NM]" for a guest of ram bytes on the pc or q35
 * machine.  0, -ENAMETOOLONG or -ENOSPC. */
int mtd_ept_plugin_arg(const char *plugin, const char *dir, const char *name, uint64_t ram,
		       bool q35, char *out, size_t len);

#endif /* MEMTIDE_HOST_EPT_PLUGIN_ARG_H */
