// What the client scripts share: the command line, named checks that print one
// PASS/FAIL line each, and a fetch that records every exchange so a check can
// assert what went over the wire, not only what the SDK made of it.

import { parseArgs } from 'node:util';

// One check never waits longer than this: a gateway that never answers is a
// FAIL line, not a hung test.
const CHECK_TIMEOUT_MS = Number(process.env.MCPG_CLIENT_CHECK_TIMEOUT_MS || 15000);

export function options() {
    const { values } = parseArgs({
        options: {
            url: { type: 'string' },
            'url-b': { type: 'string' },
            tool: { type: 'string' },
            args: { type: 'string', default: '{}' },
            expect: { type: 'string' },
            mode: { type: 'string', default: 'auto' }
        }
    });
    for (const k of ['url', 'tool', 'expect']) {
        if (!values[k]) throw new Error(`--${k} is required`);
    }
    values.args = JSON.parse(values.args);
    return values;
}

let failures = 0;

function timeout(ms, what) {
    let timer;
    const p = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    });
    return { p, cancel: () => clearTimeout(timer) };
}

// Runs fn; prints `PASS name` or `FAIL name: reason`. Returns fn's value, or
// undefined when it failed (later checks that need it then fail on their own).
export async function check(name, fn, ms = CHECK_TIMEOUT_MS) {
    const t = timeout(ms, name);
    try {
        const v = await Promise.race([fn(), t.p]);
        console.log(`PASS ${name}`);
        return v;
    } catch (e) {
        failures++;
        const msg = (e && e.message ? e.message : String(e)).replace(/\s+/g, ' ').slice(0, 400);
        console.log(`FAIL ${name}: ${msg}`);
        return undefined;
    } finally {
        t.cancel();
    }
}

export function assert(cond, msg) {
    if (!cond) throw new Error(msg);
}

export function finish() {
    console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
    process.exit(failures ? 1 : 0);
}

// The text of a tools/call result's content blocks, joined.
export function resultText(result) {
    assert(result && Array.isArray(result.content), `no content in ${JSON.stringify(result)}`);
    return result.content.filter(c => c.type === 'text').map(c => c.text).join('\n');
}

// A fetch that keeps {method, rpc, headers, status, contentType} for every request.
// hooks.body(request record, response) may replace the response body stream.
export function recordingFetch(hooks = {}) {
    const log = [];
    const f = async (url, init = {}) => {
        const headers = new Headers(init.headers || {});
        let rpc;
        if (typeof init.body === 'string') {
            try {
                rpc = JSON.parse(init.body);
            } catch {
                rpc = undefined;
            }
        }
        const rec = { method: init.method || 'GET', rpc, headers, status: 0, contentType: '' };
        log.push(rec);
        if (hooks.url) url = hooks.url(rec, url);
        rec.url = String(url);
        const res = await fetch(url, init);
        rec.status = res.status;
        rec.contentType = res.headers.get('content-type') || '';
        const body = hooks.body ? hooks.body(rec, res) : undefined;
        if (!body) return res;
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
    f.log = log;
    return f;
}
