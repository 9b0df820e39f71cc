/* coordinator_redis: each op's one atomic step, as a Lua script run by
 * EVALSHA (loaded with SCRIPT LOAD at connect; EVAL once on NOSCRIPT).
 *
 * A key is a hash: v = the value, r = its revision. KEYS[2] is the store's
 * revision counter: every write takes the next number from it in the same
 * script, so revisions strictly increase per key, also across delete and
 * re-create, and never repeat in the store. Expiry is Redis's own
 * (PEXPIRE): a key past it is absent to every command at once.
 *
 * Lua numbers are doubles: the scripts do no arithmetic on values except
 * rate_take's microsecond times (below 2^53 until the year 2255); incr
 * is HINCRBY, which Redis checks for int64 overflow itself. */
#ifndef RD_SCRIPTS_H
#define RD_SCRIPTS_H

enum {
    RD_S_PUT,
    RD_S_PUT_IF_ABSENT,
    RD_S_CAS,
    RD_S_INCR,
    RD_S_DEL,
    RD_S_RATE,
    RD_S_SCAN,
    RD_S_COUNT
};

/* ARGV: value, ttl_ms. Returns the new revision. */
#define RD_LUA_SET_EXPIRY                                                       \
    "local function expiry(ttl)\n"                                              \
    "  if tonumber(ttl) > 0 then redis.call('PEXPIRE', KEYS[1], ttl)\n"         \
    "  else redis.call('PERSIST', KEYS[1]) end\n"                               \
    "end\n"

#define RD_LUA_WRITE                                                            \
    "local function write(v, ttl)\n"                                            \
    "  local r = redis.call('INCR', KEYS[2])\n"                                 \
    "  redis.call('HSET', KEYS[1], 'v', v, 'r', r)\n"                           \
    "  expiry(ttl)\n"                                                           \
    "  return r\n"                                                              \
    "end\n"

static const char *const rd_scripts[RD_S_COUNT] = {
    [RD_S_PUT] = RD_LUA_SET_EXPIRY RD_LUA_WRITE
    "return write(ARGV[1], ARGV[2])\n",

    /* ARGV: value, ttl_ms. {1, rev} or {0, value, rev} when present. */
    [RD_S_PUT_IF_ABSENT] = RD_LUA_SET_EXPIRY RD_LUA_WRITE
    "local cur = redis.call('HMGET', KEYS[1], 'v', 'r')\n"
    "if cur[2] then return {0, cur[1], cur[2]} end\n"
    "return {1, write(ARGV[1], ARGV[2])}\n",

    /* ARGV: value, ttl_ms, expected revision ("0": must be absent).
     * {1, rev}, or {0[, value, rev]} on a conflict. */
    [RD_S_CAS] = RD_LUA_SET_EXPIRY RD_LUA_WRITE
    "local cur = redis.call('HMGET', KEYS[1], 'v', 'r')\n"
    "local want = ARGV[3]\n"
    "if (want == '0' and cur[2]) or (want ~= '0' and cur[2] ~= want) then\n"
    "  if cur[2] then return {0, cur[1], cur[2]} end\n"
    "  return {0}\n"
    "end\n"
    "return {1, write(ARGV[1], ARGV[2])}\n",

    /* ARGV: delta, ttl_ms (set only on the key it creates). {n as text, rev}
     * (the text: a Lua number would round an int64 past 2^53).
     * HINCRBY fails, changing nothing, on a non-integer or an overflow. */
    [RD_S_INCR] =
    "local fresh = redis.call('EXISTS', KEYS[1]) == 0\n"
    "redis.call('HINCRBY', KEYS[1], 'v', ARGV[1])\n"
    "local r = redis.call('INCR', KEYS[2])\n"
    "redis.call('HSET', KEYS[1], 'r', r)\n"
    "if fresh and tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end\n"
    "return {redis.call('HGET', KEYS[1], 'v'), r}\n",

    /* The revision the key had, or nil. */
    [RD_S_DEL] =
    "local r = redis.call('HGET', KEYS[1], 'r')\n"
    "if not r then return nil end\n"
    "redis.call('DEL', KEYS[1])\n"
    "return r\n",

    /* GCRA (kinds.h, rate_take). ARGV: now_us, interval_us, burst_us.
     * {1, paid_until, rev} or {0, earliest now_us that fits}. The key is
     * kept until paid-until has passed: (paid_until - now)/1000 + 1 ms. */
    [RD_S_RATE] = RD_LUA_SET_EXPIRY RD_LUA_WRITE
    "local now, iv, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])\n"
    "local cur = redis.call('HGET', KEYS[1], 'v')\n"
    "local t = now\n"
    "if cur then\n"
    "  if not string.match(cur, '^%-?%d+$') then\n"
    "    return redis.error_reply('ERR value is not an integer')\n"
    "  end\n"
    "  local paid = tonumber(cur)\n"
    "  if paid > now then t = paid end\n"
    "end\n"
    "local nxt = t + iv\n"
    "if nxt - now > burst then return {0, string.format('%.0f', nxt - burst)} end\n"
    "local ttl = string.format('%.0f', math.floor((nxt - now) / 1000) + 1)\n"
    "local r = write(string.format('%.0f', nxt), ttl)\n"
    "return {1, string.format('%.0f', nxt), r}\n",

    /* One SCAN step. ARGV: cursor, MATCH pattern, COUNT. {next cursor,
     * key, rev, key, rev, ...}: keys gone (or not ours) in between are
     * left out. */
    [RD_S_SCAN] =
    "local res = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])\n"
    "local out = {res[1]}\n"
    "for _, k in ipairs(res[2]) do\n"
    "  local r = redis.pcall('HGET', k, 'r')\n"
    "  if type(r) == 'string' then out[#out + 1] = k; out[#out + 1] = r end\n"
    "end\n"
    "return out\n",
};

#endif
