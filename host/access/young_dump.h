/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * young_dump.h - a diagnostic wrapper around any access-bit source (young_dump.c), on when
 * [daemon] young_dump_dir is set.
 */
#ifndef MEMTIDE_HOST_ACCESS_YOUNG_DUMP_H
#define MEMTIDE_HOST_ACCESS_YOUNG_DUMP_H

#include "access/source.h"

/* Wrap src so that each aging round writes the pages in libvmm's two youngest generations
 * to DIR/NAME.young (young_dump.c; a diagnostic).  0 or -ENOMEM (src unchanged). */
int mtd_source_young_dump(struct mtd_source *src, const char *dir, const char *vm_name);

#endif /* MEMTIDE_HOST_ACCESS_YOUNG_DUMP_H */
