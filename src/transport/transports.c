/* transports.c - the table of transports this build has. Each transport is a
 * folder of its own and one line here; configure decides which are built. */
#include <string.h>

#include "transport/transport.h"

const hc_tl_ops_t *const hc_tl_table[] = {
    &hc_tl_shm_ops,
    &hc_tl_tcp_ops,
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
