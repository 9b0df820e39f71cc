/* metrics_prometheus: what its two files share. */
#ifndef PROM_H
#define PROM_H

#include <mcpg/sdk.h>

/* v, or v / 1e6 as exact decimals ("0.000025", "1.5", "3") when micro, into text. */
void prom_format_number(char *text, size_t cap, int64_t v, int micro);

/* s appended with \\ and newline escaped, and " too when quotes (a label
 * value; a help text escapes no quote). 0 or MCPG_ENOMEM. */
int prom_append_escaped(const mcpg_host *h, mcpg_buf *out, const char *s, int quotes);

/* The process's own lines (process.c): its CPU time, resident memory, open
 * descriptors, and each thread's CPU time by name (mcpg-loop-0, ...).
 * Appended to out; 0 or MCPG_ENOMEM. */
int prom_write_process(const mcpg_host *h, mcpg_buf *out);

#endif
