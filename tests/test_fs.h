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
 * buf, installing it first if needed. Returns the test's exit code so far: 0
 * with the path in buf; 77 (skip, a SKIP line on stderr) only when pip cannot
 * reach the packages (install-models.sh exit 3); 1 (a FAIL line) for any other
 * failure, such as a sha256 mismatch or an unwritable cache. Uses
 * MS_SOURCE_DIR (set by ms_add_test). */
int ms_test_gguf_model(const char *name, char *buf, size_t cap);

#endif
