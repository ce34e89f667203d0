/* test_fs.c — temporary folders for tests. */
#include "test_fs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ms_check.h"
#include "ms_common.h"

int g_fail; /* the failure count of ms_check.h's CHECK */

bool ms_test_tmpdir(const char *prefix, char *buf, size_t cap) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    if ((size_t)snprintf(buf, cap, "%s/%s-XXXXXX", base, prefix) >= cap) return false;
    return mkdtemp(buf) != NULL;
}

void ms_test_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *dp = opendir(path);
        if (dp) {
            struct dirent *e;
            while ((e = readdir(dp)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char *child = ms_path_join(path, e->d_name);
                if (child) ms_test_rmtree(child);
                free(child);
            }
            closedir(dp);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}
