// One client's sweep of an MCP server: every tool called, every resource and
// resource template read, every prompt got, a few completions, and the
// server-to-client traffic that goes with them (sampling, elicitation and
// roots requests this client answers with fixed values, progress, log and
// resource-updated notifications). It writes what it saw, raw, as one JSON
// record; proxylib.py normalises and compares two records, so the same sweep
// run directly against an upstream and through mcpg proves the proxy changed
// nothing but the names' prefix.
//
//   node sweep.mjs --client v1|v2 (--url URL | --stdio PROGRAM) --out FILE
//                  [--prefix PREFIX] [--task-tools JSON]
//
// --task-tools names (a JSON array, unprefixed) the tools that can only be
// called task-augmented. Without it the sweep reads each tool's
// execution.taskSupport; the v2 client drops execution when it parses
// tools/list, so its caller names them from another listing.
//
// v1 is @modelcontextprotocol/sdk on the session wire (2025-11-25); v2 is
// @modelcontextprotocol/client pinned to the stateless wire (2026-07-28), where
// the server's questions come back as input_required results that the client
// answers through the same handlers and retries. The packages live in
// tests/clients/node_modules (scripts/install-deps.sh).

import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const MODULES = join(HERE, '..', 'clients', 'node_modules', '@modelcontextprotocol');
const load = rel => import(pathToFileURL(join(MODULES, rel)).href);

const { values: opt } = parseArgs({
    options: {
        client: { type: 'string', default: 'v1' },
        url: { type: 'string' },
        stdio: { type: 'string' },
        out: { type: 'string' },
        prefix: { type: 'string', default: '' },
        'task-tools': { type: 'string' }
    }
});
if (!opt.out || !!opt.url === !!opt.stdio || !['v1', 'v2'].includes(opt.client)) {
    console.error('usage: sweep.mjs --client v1|v2 (--url URL | --stdio PROGRAM) --out FILE [--prefix P] [--task-tools JSON]');
    process.exit(2);
}
const V2 = opt.client === 'v2';
const TASK_TOOLS = opt['task-tools'] === undefined ? null : new Set(JSON.parse(opt['task-tools']));
const taskAugmented = tool => TASK_TOOLS
    ? TASK_TOOLS.has(tool.name)
    : tool.execution?.taskSupport === 'required';
// One request never waits longer than this: a proxy that never answers is a
// recorded error, not a hung test.
const CALL_TIMEOUT_MS = Number(process.env.MCPG_SWEEP_TIMEOUT_MS || 20000);
// How long a notification is awaited once what triggers it is answered. The
// wait ends as soon as it arrives (milliseconds, directly and through mcpg); the
// bound only ends the wait for one that never comes (through mcpg, the
// upstream's log message about a resources/subscribe: see proxylib.py), so it is
// generous for a loaded machine.
const NOTICE_WAIT_MS = Number(process.env.MCPG_SWEEP_NOTICE_MS || 10000);

// ---- what this client answers --------------------------------------------------

const SAMPLED = { model: 'mcpg-sweep-model', role: 'assistant',
    content: { type: 'text', text: 'sampled by the mcpg sweep' } };
const FORM_ANSWER = { name: 'mcpg', check: true, email: 'mcpg@example.com',
    homepage: 'https://example.com/mcpg', birthdate: '2001-02-03', integer: 7, number: 2.5 };
const ROOTS = [{ uri: 'file:///srv/mcpg-sweep', name: 'sweep root' },
               { uri: 'file:///tmp/mcpg-sweep-b' }];

function elicitAnswer(params) {
    if (params.mode === 'url') return { action: 'accept' };
    const props = Object.keys(params.requestedSchema?.properties || {});
    if (props.includes('interpretation')) {
        // simulate-research-query's clarification: its first choice.
        const choice = params.requestedSchema.properties.interpretation.oneOf?.[0]?.const;
        return { action: 'accept', content: { interpretation: choice || 'technical' } };
    }
    const content = {};
    for (const k of props) if (k in FORM_ANSWER) content[k] = FORM_ANSWER[k];
    return { action: 'accept', content };
}

// ---- arguments -------------------------------------------------------------------

// Argument sets per tool: explicit where a schema-derived value would not do
// (a data: URI instead of a download, a short long-running operation, a fixed
// elicitation id); any other tool gets one set derived from its inputSchema.
const TEXT_B64 = Buffer.from('mcpg proxy transparency\n'.repeat(8)).toString('base64');
const TOOL_ARGS = {
    'echo': [{ message: 'hello through the proxy' }],
    'get-annotated-message': [{ messageType: 'error', includeImage: true }, { messageType: 'success' },
                              { messageType: 'debug' }],
    'get-resource-links': [{ count: 4 }],
    'get-resource-reference': [{ resourceType: 'Text', resourceId: 1 }, { resourceType: 'Blob', resourceId: 2 }],
    'get-structured-content': [{ location: 'Chicago' }],
    'get-sum': [{ a: 2, b: 3.5 }, { a: 'two', b: 3 }],
    'gzip-file-as-resource': [
        { name: 'sweep.txt.gz', data: `data:text/plain;base64,${TEXT_B64}` },
        { name: 'sweep-inline.txt.gz', data: `data:text/plain;base64,${TEXT_B64}`, outputType: 'resource' }],
    'trigger-long-running-operation': [{ duration: 0.3, steps: 3 }],
    'trigger-sampling-request': [{ prompt: 'say something about proxies', maxTokens: 20 }],
    'trigger-url-elicitation': [{ url: 'https://example.com/mcpg-consent', message: 'Open the consent page.',
                                  elicitationId: 'mcpg-sweep-elicitation' }],
    'simulate-research-query': [{ topic: 'python', ambiguous: true }]
};
const PROMPT_ARGS = {
    'args-prompt': [{ city: 'Lyon', state: 'Rhone' }, { city: 'Oslo' }],
    'completable-prompt': [{ department: 'Engineering', name: 'Alice' }],
    'resource-prompt': [{ resourceType: 'Text', resourceId: '1' }, { resourceType: 'Blob', resourceId: '2' }]
};

function valueFor(schema) {
    if (!schema || typeof schema !== 'object') return 'mcpg';
    if ('default' in schema) return schema.default;
    if (Array.isArray(schema.enum)) return schema.enum[0];
    if ('const' in schema) return schema.const;
    const t = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    if (t === 'number' || t === 'integer') return schema.minimum ?? 1;
    if (t === 'boolean') return true;
    if (t === 'array') return [valueFor(schema.items)];
    if (t === 'object') return argsFromSchema(schema);
    if (schema.format === 'uri') return 'https://example.com/mcpg';
    return 'mcpg';
}

function argsFromSchema(schema) {
    const out = {};
    for (const [k, s] of Object.entries(schema?.properties || {})) out[k] = valueFor(s);
    return out;
}

// ---- the two clients behind one interface ---------------------------------------

async function v1Client(record) {
    const { Client } = await load('sdk/dist/esm/client/index.js');
    const { StreamableHTTPClientTransport } = await load('sdk/dist/esm/client/streamableHttp.js');
    const { StdioClientTransport } = await load('sdk/dist/esm/client/stdio.js');
    const T = await load('sdk/dist/esm/types.js');
    const client = new Client({ name: 'mcpg-sweep-v1', version: '1.0.0' }, {
        capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } }
    });
    client.setRequestHandler(T.CreateMessageRequestSchema, async req => record.serverRequest(req, SAMPLED));
    client.setRequestHandler(T.ElicitRequestSchema, async req => record.serverRequest(req, elicitAnswer(req.params)));
    client.setRequestHandler(T.ListRootsRequestSchema, async req => record.serverRequest(req, { roots: ROOTS }));
    // Progress is recorded as notifications, not through onprogress: the SDK
    // drops the handler when the response arrives, and over stdio the last
    // notification's handler may run after that.
    client.setNotificationHandler(T.ProgressNotificationSchema, n => record.notice(n));
    client.setNotificationHandler(T.LoggingMessageNotificationSchema, n => record.notice(n));
    client.setNotificationHandler(T.ResourceUpdatedNotificationSchema, n => record.notice(n));
    client.setNotificationHandler(T.ResourceListChangedNotificationSchema, n => record.notice(n));
    client.setNotificationHandler(T.ToolListChangedNotificationSchema, n => record.notice(n));
    client.setNotificationHandler(T.PromptListChangedNotificationSchema, n => record.notice(n));
    const transport = opt.url
        ? new StreamableHTTPClientTransport(new URL(opt.url))
        : new StdioClientTransport({ command: opt.stdio, args: [], stderr: 'ignore' });
    await client.connect(transport);
    const o = extra => ({ timeout: CALL_TIMEOUT_MS, ...extra });
    return {
        wire: client.getServerVersion() ? 'session' : 'unknown',
        close: () => client.close(),
        page: (kind, cursor) => client[kind](cursor ? { cursor } : {}, o()),
        callTool: (params, onprogress) => client.callTool(params, undefined, o(onprogress ? { onprogress } : {})),
        callToolTask: async params => {
            const seen = [];
            const stream = client.experimental.tasks.callToolStream(params, undefined,
                o({ task: { ttl: 60000 } }));
            for await (const m of stream) seen.push(m);
            return seen;
        },
        readResource: params => client.readResource(params, o()),
        getPrompt: params => client.getPrompt(params, o()),
        complete: params => client.complete(params, o()),
        setLoggingLevel: level => client.setLoggingLevel(level, o()),
        subscribe: uri => client.subscribeResource({ uri }, o()),
        unsubscribe: uri => client.unsubscribeResource({ uri }, o())
    };
}

async function v2Client(record) {
    const { Client, StreamableHTTPClientTransport } = await load('client/dist/index.mjs');
    const { StdioClientTransport } = await load('client/dist/stdio.mjs');
    const client = new Client({ name: 'mcpg-sweep-v2', version: '1.0.0' }, {
        capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} },
        versionNegotiation: { mode: { pin: '2026-07-28' } }
    });
    client.setRequestHandler('sampling/createMessage', async req => record.serverRequest(req, SAMPLED));
    client.setRequestHandler('elicitation/create', async req => record.serverRequest(req, elicitAnswer(req.params)));
    client.setRequestHandler('roots/list', async req => record.serverRequest(req, { roots: ROOTS }));
    for (const m of ['notifications/progress', 'notifications/message', 'notifications/resources/updated']) {
        client.setNotificationHandler(m, n => record.notice(n));
    }
    const transport = opt.url
        ? new StreamableHTTPClientTransport(new URL(opt.url))
        : new StdioClientTransport({ command: opt.stdio, args: [], stderr: 'ignore' });
    await client.connect(transport);
    const era = client.getProtocolEra();
    if (era !== 'modern') throw new Error(`the v2 client negotiated the ${era} era, not 2026-07-28`);
    const o = extra => ({ timeout: CALL_TIMEOUT_MS, ...extra });
    return {
        wire: 'stateless',
        close: () => client.close(),
        page: (kind, cursor) => client[kind](cursor ? { cursor } : undefined, o()),
        callTool: (params, onprogress) => client.callTool(params, o(onprogress ? { onprogress } : {})),
        callToolTask: null,
        readResource: params => client.readResource(params, o()),
        getPrompt: params => client.getPrompt(params, o()),
        complete: params => client.complete(params, o()),
        setLoggingLevel: null,
        subscribe: null,
        unsubscribe: null
    };
}

// ---- recording --------------------------------------------------------------------

class Record {
    constructor() {
        this.steps = {};
        this.current = null;
        this.notices = [];
        this.rootsRequests = 0;
    }
    serverRequest(req, answer) {
        if (req.method === 'roots/list') {
            // The upstream asks for roots when a session starts, on a timer
            // of its own, so whichever step runs then is chance: counted only
            // (get-roots-list's answer shows the roots arrived).
            this.rootsRequests++;
            return answer;
        }
        if (this.current) this.current.serverRequests.push({ method: req.method, params: req.params ?? null });
        return answer;
    }
    notice(n) {
        this.notices.push({ at: this.current?.key ?? null, method: n.method, params: n.params ?? null });
    }
    async step(key, fn) {
        const s = { serverRequests: [] };
        this.current = { key, serverRequests: s.serverRequests };
        try {
            s.result = await fn(s);
        } catch (e) {
            s.error = errorOf(e);
        }
        this.current = null;
        if (!s.serverRequests.length) delete s.serverRequests;
        this.steps[key] = s;
        return s;
    }
    async waitNotice(pred, ms = NOTICE_WAIT_MS) {
        const t0 = Date.now();
        for (;;) {
            const hit = this.notices.find(pred);
            if (hit || Date.now() - t0 > ms) return hit || null;
            await new Promise(r => setTimeout(r, 25));
        }
    }
}

// A JSON-RPC error as it came over the wire: the v1 SDK spells its message
// "MCP error <code>: <message>", the v2 client keeps the message alone.
function errorOf(e) {
    const out = { message: String(e && e.message ? e.message : e) };
    if (e && typeof e.code === 'number') {
        out.code = e.code;
        const sdkPrefix = `MCP error ${e.code}: `;
        if (out.message.startsWith(sdkPrefix)) out.message = out.message.slice(sdkPrefix.length);
    }
    if (e && e.data !== undefined) out.data = e.data;
    return out;
}

// ---- the sweep --------------------------------------------------------------------

const prefixed = name => opt.prefix + name;
function unprefixed(name, what) {
    if (!name.startsWith(opt.prefix)) throw new Error(`${what} ${name} lacks the prefix ${opt.prefix}`);
    return name.slice(opt.prefix.length);
}

async function listAll(c, kind, field) {
    const out = [];
    let cursor;
    for (let i = 0; i < 50; i++) {
        const page = await c.page(kind, cursor);
        out.push(...page[field]);
        cursor = page.nextCursor;
        if (!cursor) return out;
    }
    throw new Error(`${kind} never stopped paging`);
}

function fillTemplate(uriTemplate, value) {
    return uriTemplate.replace(/\{[^}]+\}/g, value);
}

async function sweep(c, rec) {
    const lists = await rec.step('list/tools', async () =>
        (await listAll(c, 'listTools', 'tools')).map(t => ({ ...t, name: unprefixed(t.name, 'tool') })));
    await rec.step('list/resources', () => listAll(c, 'listResources', 'resources'));
    await rec.step('list/resource-templates', () => listAll(c, 'listResourceTemplates', 'resourceTemplates'));
    const prompts = await rec.step('list/prompts', async () =>
        (await listAll(c, 'listPrompts', 'prompts')).map(p => ({ ...p, name: unprefixed(p.name, 'prompt') })));
    const tools = lists.result || [];
    const resources = rec.steps['list/resources'].result || [];
    const templates = rec.steps['list/resource-templates'].result || [];

    if (c.setLoggingLevel) await rec.step('logging/setLevel', () => c.setLoggingLevel('debug'));
    const watched = resources.find(r => r.uri.startsWith('demo://resource/static/')) || resources[0];
    if (c.subscribe && watched) await rec.step('resources/subscribe', async s => {
        const r = await c.subscribe(watched.uri);
        const log = await rec.waitNotice(n => n.method === 'notifications/message' &&
            String(n.params?.data).includes('Subscribe') && String(n.params?.data).includes(watched.uri));
        s.notice = log ? log.params : null;
        return r;
    });

    for (const t of [...tools].sort((a, b) => a.name.localeCompare(b.name))) {
        const sets = TOOL_ARGS[t.name] || [argsFromSchema(t.inputSchema)];
        for (let i = 0; i < sets.length; i++) {
            await callOne(c, rec, t, sets[i], `tool/${t.name}#${i}`);
        }
    }

    // Resources as listed after the calls (gzip-file-as-resource adds to them).
    const after = await rec.step('list/resources-after-calls', () => listAll(c, 'listResources', 'resources'));
    for (const r of after.result || resources) {
        await rec.step(`read/${r.uri}`, () => c.readResource({ uri: r.uri }));
    }
    for (const t of templates) {
        for (const v of ['1', '2']) {
            const uri = fillTemplate(t.uriTemplate, v);
            await rec.step(`read/${uri}`, () => c.readResource({ uri }));
        }
        const bad = fillTemplate(t.uriTemplate, '0');
        await rec.step(`read/${bad}`, () => c.readResource({ uri: bad }));
    }

    for (const p of [...(prompts.result || [])].sort((a, b) => a.name.localeCompare(b.name))) {
        const sets = PROMPT_ARGS[p.name] ||
            [Object.fromEntries((p.arguments || []).filter(a => a.required).map(a => [a.name, 'mcpg']))];
        for (let i = 0; i < sets.length; i++) {
            await rec.step(`prompt/${p.name}#${i}`, () => c.getPrompt({ name: prefixed(p.name), arguments: sets[i] }));
        }
    }

    if ((prompts.result || []).some(p => p.name === 'completable-prompt')) {
        const ref = { type: 'ref/prompt', name: prefixed('completable-prompt') };
        await rec.step('complete/prompt-department', () =>
            c.complete({ ref, argument: { name: 'department', value: 'S' } }));
        await rec.step('complete/prompt-name', () =>
            c.complete({ ref, argument: { name: 'name', value: '' }, context: { arguments: { department: 'Engineering' } } }));
    }
    for (const t of templates) {
        await rec.step(`complete/${t.uriTemplate}`, () =>
            c.complete({ ref: { type: 'ref/resource', uri: t.uriTemplate }, argument: { name: 'resourceId', value: '3' } }));
    }

    if (c.unsubscribe && watched) await rec.step('resources/unsubscribe', () => c.unsubscribe(watched.uri));
}

async function callOne(c, rec, tool, args, key) {
    const params = { name: prefixed(tool.name), arguments: args };
    if (taskAugmented(tool)) {
        if (!c.callToolTask) {
            rec.steps[key] = { skipped: 'task-augmented calls are not swept on this wire' };
            return;
        }
        await rec.step(key, async () => (await c.callToolTask(params)).map(m => {
            if (m.type === 'error') return { type: 'error', error: errorOf(m.error) };
            return m;
        }));
        return;
    }
    if (tool.name === 'trigger-long-running-operation') {
        await rec.step(key, async s => {
            const before = rec.notices.length;
            const progress = () => rec.notices.slice(before).filter(n => n.method === 'notifications/progress');
            const res = await c.callTool(params, () => {});
            await rec.waitNotice(n => progress().includes(n) && n.params?.progress === n.params?.total);
            s.progress = progress().map(n => ({ progress: n.params.progress, total: n.params.total }));
            return res;
        });
        return;
    }
    if (tool.name === 'toggle-simulated-logging' || tool.name === 'toggle-subscriber-updates') {
        await toggle(c, rec, params, key, tool.name);
        return;
    }
    await rec.step(key, () => c.callTool(params));
}

// The toggles start a per-session timer that sends notifications; on the
// session wire the first one comes at once. Each is switched on, the
// notification awaited, and switched off again.
async function toggle(c, rec, params, key, name) {
    const before = rec.notices.length;
    await rec.step(key, async s => {
        const on = await c.callTool(params);
        if (c.subscribe) {
            const want = name === 'toggle-simulated-logging'
                ? n => n.method === 'notifications/message' && /level[- ]message/.test(String(n.params?.data))
                : n => n.method === 'notifications/resources/updated';
            const hit = await rec.waitNotice(n => rec.notices.indexOf(n) >= before && want(n));
            s.notified = hit ? (name === 'toggle-simulated-logging' ? 'a simulated log message' : hit.params) : null;
        }
        s.off = await c.callTool(params);
        return on;
    });
}

const rec = new Record();
const started = Date.now();
let client;
let status = 0;
try {
    client = await (V2 ? v2Client(rec) : v1Client(rec));
    await sweep(client, rec);
} catch (e) {
    rec.fatal = errorOf(e);
    status = 1;
}
const out = {
    client: opt.client,
    target: opt.url || opt.stdio,
    prefix: opt.prefix,
    seconds: (Date.now() - started) / 1000,
    steps: rec.steps,
    rootsRequests: rec.rootsRequests,
    fatal: rec.fatal
};
writeFileSync(opt.out, JSON.stringify(out, null, 2));
console.log(`${opt.client} sweep of ${out.target}: ${Object.keys(rec.steps).length} steps in ${out.seconds}s` +
    (rec.fatal ? `; stopped: ${rec.fatal.message}` : ''));
if (client) await Promise.race([client.close().catch(() => {}), new Promise(r => setTimeout(r, 2000))]);
process.exit(status);
