// The v1 TypeScript SDK (@modelcontextprotocol/sdk) as a real client of the
// gateway on the session wire (2025-11-25): initialize and its session, the GET
// stream, tools, a dropped POST stream resumed with Last-Event-ID, sampling and
// elicitation answered by this client, and DELETE ending the session.
//
//   node v1.mjs --url http://127.0.0.1:PORT/mcp --tool NAME --args JSON --expect TEXT
//                [--url-b http://127.0.0.1:PORT2/mcp]   (a second replica: see fleetRoute)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { assert, check, finish, options, recordingFetch, resultText } from './lib.mjs';

const opt = options();
// the checks' names: v1-<check>, or v1-fleet-<check> across two replicas
const RUN = opt['url-b'] ? 'v1-fleet' : 'v1';
const SAMPLED = 'sampled by the mcpg v1 client test';
// what lib.mjs's check() allows one check (the same variable, the same default)
const CHECK_TIMEOUT_MS = Number(process.env.MCPG_CLIENT_CHECK_TIMEOUT_MS || 15000);

// Cuts one POST answer short, the way a dropped connection would: the events
// up to and including the first one with an id that is not the JSON-RPC
// response (the priming event) pass, then the stream fails. The SDK must then
// resume with GET + Last-Event-ID and get the response from the replay buffer.
let cutNextCall = false;
function dropAfterPriming(body) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    const enc = new TextEncoder();
    let buf = '';
    return new ReadableStream({
        async pull(ctl) {
            for (;;) {
                const i = buf.search(/\r?\n\r?\n/);
                if (i >= 0) {
                    const m = buf.slice(i).match(/^\r?\n\r?\n/);
                    const event = buf.slice(0, i + m[0].length);
                    buf = buf.slice(i + m[0].length);
                    const isResponse = /"(result|error)"\s*:/.test(event);
                    const hasId = /^id:/m.test(event);
                    if (isResponse) {
                        reader.cancel().catch(() => {});
                        ctl.error(new Error('stream dropped by the test before the response'));
                        return;
                    }
                    ctl.enqueue(enc.encode(event));
                    if (hasId) {
                        reader.cancel().catch(() => {});
                        ctl.error(new Error('stream dropped by the test after the priming event'));
                        return;
                    }
                    continue;
                }
                const { value, done } = await reader.read();
                if (done) {
                    ctl.close();
                    return;
                }
                buf += dec.decode(value, { stream: true });
            }
        },
        cancel() {
            return reader.cancel();
        }
    });
}

// With --url-b (a fleet of two gateways on one coordinator): initialize and
// every GET (the stream, a resumption) go to --url, every other POST and the
// DELETE to --url-b, so the session is opened on one replica and used and
// ended on the other.
function fleetRoute(rec, url) {
    if (!opt['url-b']) return url;
    const onA = rec.rpc?.method === 'initialize' || rec.method === 'GET';
    return onA ? url : new URL(opt['url-b']);
}

const fetchLog = recordingFetch({
    url: fleetRoute,
    body(rec, res) {
        if (!cutNextCall || rec.method !== 'POST' || rec.rpc?.method !== 'tools/call') return undefined;
        if (!rec.contentType.startsWith('text/event-stream') || !res.body) return undefined;
        cutNextCall = false;
        rec.cut = true;
        return dropAfterPriming(res.body);
    }
});

const client = new Client(
    { name: 'mcpg-test-v1', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: {} } }
);
let sampled = 0;
let elicited = 0;
client.setRequestHandler(CreateMessageRequestSchema, async () => {
    sampled++;
    return { model: 'mcpg-test-model', role: 'assistant', content: { type: 'text', text: SAMPLED } };
});
client.setRequestHandler(ElicitRequestSchema, async () => {
    elicited++;
    return { action: 'accept', content: { username: 'mcpg', email: 'mcpg@example.com' } };
});
const transport = new StreamableHTTPClientTransport(new URL(opt.url), {
    fetch: fetchLog,
    reconnectionOptions: {
        initialReconnectionDelay: 100,
        maxReconnectionDelay: 1000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 2
    }
});
transport.onerror = () => {}; // drops the test makes on purpose are reported by the checks

const connected = await check(`${RUN}-initialize`, async () => {
    await client.connect(transport);
    assert(transport.sessionId, 'no Mcp-Session-Id after initialize');
    const v = transport.protocolVersion;
    assert(v === '2025-11-25', `negotiated protocol version ${v}, expected 2025-11-25`);
    const init = fetchLog.log.find(r => r.rpc?.method === 'notifications/initialized');
    assert(init && init.status === 202, `notifications/initialized answered ${init && init.status}, expected 202`);
    return true;
});

await check(`${RUN}-get-stream`, async () => {
    assert(connected, 'not connected');
    // The SDK opens the GET stream right after notifications/initialized: wait
    // for its answer as long as the check itself may take (less a second, so a
    // missing GET is reported as such rather than as the check's timeout).
    const deadline = Date.now() + CHECK_TIMEOUT_MS - 1000;
    while (!fetchLog.log.some(r => r.method === 'GET' && r.status) && Date.now() < deadline) {
        await new Promise(r => setTimeout(r, 20));
    }
    const get = fetchLog.log.find(r => r.method === 'GET');
    assert(get, 'the SDK sent no GET');
    assert(get.status === 200, `GET stream answered ${get.status}, expected 200`);
    assert(get.contentType.startsWith('text/event-stream'), `GET stream content-type ${get.contentType}`);
});

await check(`${RUN}-tools-list`, async () => {
    assert(connected, 'not connected');
    const { tools } = await client.listTools();
    assert(tools.some(t => t.name === opt.tool), `${opt.tool} not in ${tools.map(t => t.name)}`);
});

await check(`${RUN}-tools-call`, async () => {
    assert(connected, 'not connected');
    const text = resultText(await client.callTool({ name: opt.tool, arguments: opt.args }));
    assert(text.includes(opt.expect), `result text ${JSON.stringify(text)} lacks ${JSON.stringify(opt.expect)}`);
});

await check(`${RUN}-resume-after-drop`, async () => {
    assert(connected, 'not connected');
    cutNextCall = true;
    const text = resultText(await client.callTool({ name: opt.tool, arguments: opt.args }));
    const cut = fetchLog.log.find(r => r.cut);
    assert(cut, 'the call was not answered as SSE, so there was no stream to drop');
    const resumed = fetchLog.log.find(r => r.method === 'GET' && r.headers.get('last-event-id'));
    assert(resumed, 'no GET with Last-Event-ID after the drop');
    assert(resumed.status === 200, `resumption GET answered ${resumed.status}`);
    assert(text.includes(opt.expect), `replayed result ${JSON.stringify(text)} lacks ${JSON.stringify(opt.expect)}`);
});

await check(`${RUN}-sampling`, async () => {
    assert(connected, 'not connected');
    const res = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'say something' } });
    assert(sampled === 1, `the client's sampling handler ran ${sampled} times, expected 1`);
    const text = resultText(res);
    assert(text.includes(SAMPLED), `result ${JSON.stringify(text)} does not carry the client's answer`);
});

await check(`${RUN}-elicitation`, async () => {
    assert(connected, 'not connected');
    const res = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } });
    assert(elicited === 1, `the client's elicitation handler ran ${elicited} times, expected 1`);
    const text = resultText(res);
    assert(/accept/.test(text), `result ${JSON.stringify(text)} does not carry the accepted answer`);
});

await check(`${RUN}-delete-then-404`, async () => {
    assert(connected, 'not connected');
    const sid = transport.sessionId;
    await transport.terminateSession();
    const del = fetchLog.log.find(r => r.method === 'DELETE');
    assert(del && del.status === 200, `DELETE answered ${del && del.status}, expected 200`);
    const ask = async () => {
        const res = await fetch(opt.url, {
            method: 'POST',
            headers: {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-session-id': sid,
                'mcp-protocol-version': '2025-11-25'
            },
            body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list', params: {} })
        });
        return { res, body: await res.text() };
    };
    let { res, body } = await ask();
    // Across a fleet the DELETE went to --url-b, and --url's replica learns of the
    // end from the coordinator (mcpg.session.end), a moment after the DELETE's
    // answer: until then it may still serve the session. One gateway ends it
    // before it answers the DELETE, so there the first answer must be the 404.
    const deadline = Date.now() + CHECK_TIMEOUT_MS - 1000;
    while (opt['url-b'] && res.status === 200 && Date.now() < deadline) {
        await new Promise(r => setTimeout(r, 20));
        ({ res, body } = await ask());
    }
    assert(res.status === 404, `a request on the ended session answered ${res.status}, expected 404 (${body.slice(0, 200)})`);
    const err = JSON.parse(body).error;
    assert(err && err.code === -32001, `expected JSON-RPC error -32001, got ${body.slice(0, 200)}`);
});

await client.close().catch(() => {});
finish();
