/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ept_cli.h - memtidectl's ept-* commands (ept_cli.c), and domxml-patch's --ept step with
 * what it needs of the file system.
 */
#ifndef MEMTIDE_HOST_EPT_CLI_H
#define MEMTIDE_HOST_EPT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * domxml-patch's --ept step (domxml_ept.h) with what needs the file system: plugin NULL
 * means mtd_ept_plugin_path's; a plugin QEMU's user could not read, or a table directory
 * that does not exist yet, is a warning line in *changes (the domain still starts, without
 * the ept source).  Returns the number of changes or -errno with err, as
 * mtd_domxml_patch_ept.
 */
int mtd_ept_domxml_step(const char *xml, const char *plugin, const char *dir, char **after,
			char **changes, char *err, size_t errlen);
/* argv[0] is the command (ept-plugin, ept-status, ept-mode).  Returns an exit code. */
int mtd_ept_cli(int argc, char **argv, bool json);

#endif /* MEMTIDE_HOST_EPT_CLI_H */
