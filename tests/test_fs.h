/* test_fs.h — file-system helpers every test program can use (built into
 * each test by ms_add_test). */
#ifndef MS_TEST_FS_H
#define MS_TEST_FS_H

#include <stdbool.h>
#include <stddef.h>

/* A fresh folder $TMPDIR/<prefix>-XXXXXX (default /tmp) into buf. */
bool ms_test_tmpdir(const char *prefix, char *buf, size_t cap);
/* Remove a file or a folder and everything below it (no symlink following). */
void ms_test_rmtree(const char *path);
/* The path of real GGUF model `name` (tools/install-models.sh names) into
 * buf, installing it first if needed; false (with a SKIP line on stderr) if it
 * cannot be had. Uses MS_SOURCE_DIR (set by ms_add_test). */
bool ms_test_gguf_model(const char *name, char *buf, size_t cap);

#endif
