/* Several --url targets (a fleet's replicas): which one a connection talks
 * to, and with --spread call which connection of a slot's group sends the
 * slot's next call. Pure arithmetic, tested by selftest.c.
 *
 * By connection: connection i -> target i % n.
 * By call: the run has -c groups of n connections each (group g is
 * connections g*n .. g*n+n-1, connection g*n+r talking to target r); one
 * connection of a group holds the group's turn, and after each call the turn
 * moves to the connection of the next target. Group g starts on target g % n
 * so the first calls are spread as evenly as by connection. */
#include "load.h"

unsigned load_spread_target(unsigned conn, unsigned ntargets) { return ntargets ? conn % ntargets : 0; }

unsigned load_spread_first(unsigned group, unsigned ntargets) { return group * ntargets + group % ntargets; }

unsigned load_spread_next(unsigned conn, unsigned ntargets) {
    unsigned base = conn - conn % ntargets;
    return base + (conn % ntargets + 1) % ntargets;
}
