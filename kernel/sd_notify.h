/* Telling the service manager how the gateway is doing: systemd's notify
 * protocol (sd_notify(3)) for a Type=notify unit. Every function does
 * nothing when NOTIFY_SOCKET is unset, and never blocks: one datagram, sent
 * without waiting, lost if the manager's queue is full. Called on the
 * control thread only. */
#ifndef MCPG_SD_NOTIFY_H
#define MCPG_SD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <mcpg/host.h> /* MCPG_PRINTF */

/* READY=1 (with MAINPID= and STATUS=): the gateway serves. The first one
 * ends the unit's start-up. */
void sd_notify_ready(const char *status_fmt, ...) MCPG_PRINTF(1, 2);
/* Whether READY=1 has been sent already. */
bool sd_notify_told_ready(void);
/* RELOADING=1 and MONOTONIC_USEC=: a reload is being read and built. Only
 * once the start-up is over (a reload during it is part of it). */
void sd_notify_reloading(void);
/* The reload is over (published or refused): READY=1 if the start-up was
 * over, else only the STATUS= (the first READY=1 still waits for readiness). */
void sd_notify_reload_over(const char *status_fmt, ...) MCPG_PRINTF(1, 2);
/* STOPPING=1: the drain has begun. */
void sd_notify_stopping(void);
/* STATUS= alone, sent only when it differs from the last one sent. */
void sd_notify_status(const char *status_fmt, ...) MCPG_PRINTF(1, 2);
/* WATCHDOG=1 when the manager asked for it (WATCHDOG_USEC, and
 * WATCHDOG_PID if set is this process) and half its interval has passed
 * since the last one. now_us: the monotonic clock. */
void sd_notify_watchdog(uint64_t now_us);

#endif
