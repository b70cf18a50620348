/* transports.c - the table of transports this build has. Each transport is a
 * folder of its own and one line here; configure decides which are built. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "transport/transport.h"

const hc_tl_ops_t *const hc_tl_table[] = {
    &hc_tl_shm_ops,
    &hc_tl_tcp_ops,
#ifdef HC_HAVE_VERBS
    &hc_tl_ib_ops,
#endif
#ifdef HC_HAVE_OFI
    &hc_tl_ofi_ops,
#endif
#ifdef HC_HAVE_UCX
    &hc_tl_ucx_ops,
#endif
    NULL,
};

int hc_tl_table_len(void)
{
    int n = 0;
    while (hc_tl_table[n] != NULL)
        n++;
    return n;
}

int hc_tl_index(const char *name, size_t len)
{
    for (int i = 0; hc_tl_table[i] != NULL; i++)
        if (strlen(hc_tl_table[i]->name) == len && strncmp(hc_tl_table[i]->name, name, len) == 0)
            return i;
    return -1;
}

int hc_tl_forced(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return -1;
    int t = hc_tl_index(name, strlen(name));
    if (t < 0) {
        char names[128] = "";
        for (int i = 0; hc_tl_table[i] != NULL; i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), ", %s",
                     hc_tl_table[i]->name);
        hc_error(INIT, "HCOMM_TRANSPORT=%s: expected auto%s", name, names);
        return -2;
    }
    return t;
}

static int dir_has_entries(const char *path)
{
    DIR           *d = opendir(path);
    struct dirent *e;
    int            found = 0;
    while (d != NULL && !found && (e = readdir(d)) != NULL)
        found = e->d_name[0] != '.';
    if (d != NULL)
        closedir(d);
    return found;
}

int hc_tl_host_has_fabric(void)
{
    return dir_has_entries("/sys/class/infiniband") || dir_has_entries("/sys/class/cxi");
}

int hc_tl_fabric_only(const hc_params_t *prm)
{
    return hc_tl_forced(prm->transport) == -1 && strcmp(prm->net, HC_PARAM_NET_DEFAULT) == 0;
}

int hc_tl_choose(int forced, const char *net, uint32_t usable, int same_host)
{
    if (forced >= 0)
        return usable & (1u << forced) ? forced : -1;
    int shm = hc_tl_index("shm", 3);
    if (same_host && shm >= 0 && (usable & (1u << shm)))
        return shm;
    for (const char *n = net; *n != '\0';) {
        size_t len = strcspn(n, ",");
        int    t   = hc_tl_index(n, len);
        if (t >= 0 && (usable & (1u << t)))
            return t;
        n += len + (n[len] == ',');
    }
    return -1;
}
