/* log.c - log lines "host:pid:rank LEVEL subsys file:line message". */
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/params.h"

hc_log_level_t hc_log_level_g  = HC_LOG_WARN;
unsigned       hc_log_subsys_g = ~0u;

static int             log_rank = -1;
static FILE           *log_file;
static char            log_host[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
static const char *const subsys_names[] = {
#define HC_LOG_SUBSYS_NAME_(id, str) str,
    HC_LOG_SUBSYS_MAP(HC_LOG_SUBSYS_NAME_)
#undef HC_LOG_SUBSYS_NAME_
};

void hc_log_set_rank(int rank)
{
    if (log_rank < 0)
        log_rank = rank;
}

/* Expands %h and %p in a HCOMM_LOG_FILE pattern. */
static void log_expand_path(const char *pattern, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < size; p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int w = (p[1] == 'h') ? snprintf(out + n, size - n, "%s", log_host)
                                  : snprintf(out + n, size - n, "%d", (int)getpid());
            n = (w > 0 && (size_t)w < size - n) ? n + (size_t)w : size - 1;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* Called by params.c once the parameters are parsed. */
void hc_log_configure(const char *level, const char *subsys, const char *file);
/* A child forked while another thread (the rendezvous root) held the lock
 * would never get it: the child starts with a fresh one. */
static void log_atfork_child(void)
{
    pthread_mutex_init(&log_lock, NULL);
}

void hc_log_configure(const char *level, const char *subsys, const char *file)
{
    static int atfork_done;
    if (!atfork_done && pthread_atfork(NULL, NULL, log_atfork_child) == 0)
        atfork_done = 1;
    if (gethostname(log_host, sizeof(log_host) - 1) != 0)
        strcpy(log_host, "?");
    int level_known = level[0] == '\0';
    for (int l = HC_LOG_NONE; l <= HC_LOG_TRACE; l++)
        if (strcasecmp(level, level_names[l]) == 0) {
            __atomic_store_n(&hc_log_level_g, (hc_log_level_t)l, __ATOMIC_RELAXED);
            level_known    = 1;
        }

    char unknown[256] = ""; /* subsystem names not known, to say so once */
    if (strcmp(subsys, "all") != 0 && subsys[0] != '\0') {
        int      exclude = (subsys[0] == '^');
        unsigned mask    = 0;
        char     buf[256];
        snprintf(buf, sizeof(buf), "%s", subsys + exclude);
        for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned bit = strcasecmp(tok, "all") == 0 ? ~0u : 0;
            for (int i = 0; i < HC_SUBSYS_COUNT; i++)
                if (strcasecmp(tok, subsys_names[i]) == 0)
                    bit = 1u << i;
            if (bit == 0) {
                size_t n = strlen(unknown);
                snprintf(unknown + n, sizeof(unknown) - n, "%s%s", n ? "," : "", tok);
            }
            mask |= bit;
        }
        __atomic_store_n(&hc_log_subsys_g, exclude ? ~mask : mask, __ATOMIC_RELAXED);
    }

    const char *file_err = NULL;
    char        path[512];
    if (file[0] != '\0') {
        log_expand_path(file, path, sizeof(path));
        FILE *f = fopen(path, "a");
        if (f != NULL) {
            setvbuf(f, NULL, _IOLBF, 0);
            if (log_file != NULL)
                fclose(log_file);
            log_file = f;
        } else {
            file_err = strerror(errno);
        }
    }
    /* said once the rest is set: errors and warnings pass any subsystem mask */
    if (!level_known)
        hc_warn(PARAM,
                "HCOMM_LOG_LEVEL=%s is not a level (NONE, ERROR, WARN, INFO, DEBUG, "
                "TRACE); kept %s",
                level, level_names[hc_log_level()]);
    if (unknown[0] != '\0')
        hc_warn(PARAM, "HCOMM_LOG_SUBSYS: no subsystem named %s; ignored", unknown);
    if (file_err != NULL)
        hc_warn(PARAM, "HCOMM_LOG_FILE: cannot open %s: %s; the log stays on %s", path, file_err,
                log_file != NULL ? "its earlier file" : "stderr");
}

void hc_log_emit(hc_log_level_t level, unsigned subsys, const char *file, int line,
                 const char *fmt, ...)
{
    char    msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    const char *sub  = "?";
    for (int i = 0; i < HC_SUBSYS_COUNT; i++)
        if (subsys == (1u << i))
            sub = subsys_names[i];
    const char *base = strrchr(file, '/');
    base             = base ? base + 1 : file;

    struct timeval tv;
    gettimeofday(&tv, NULL);
    pthread_mutex_lock(&log_lock);
    fprintf(log_file ? log_file : stderr, "[%ld.%06ld] %s:%d:%d hcomm %s %s %s:%d %s\n",
            (long)tv.tv_sec, (long)tv.tv_usec, log_host[0] ? log_host : "?", (int)getpid(),
            log_rank, level_names[level], sub, base, line, msg);
    pthread_mutex_unlock(&log_lock);
}
