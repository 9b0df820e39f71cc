// The v2 TypeScript SDK client (@modelcontextprotocol/client) against the
// gateway on the stateless wire (2026-07-28), reached by negotiation: `auto`
// (probe with server/discover, fall back to initialize) or pinned to 2026-07-28.
// Checks server/discover, tools/list, tools/call, and an input_required round
// trip that this client answers through its elicitation handler.
//
//   node v2.mjs --url URL --mode auto|pin --tool NAME --args JSON --expect TEXT

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { assert, check, finish, options, recordingFetch, resultText } from './lib.mjs';

const opt = options();
const MODERN = '2026-07-28';
const name = `v2-${opt.mode}`;
const mode = opt.mode === 'pin' ? { pin: MODERN } : 'auto';
// The conformance fixture that answers input_required with one elicitation.
const INPUT_TOOL = 'test_input_required_result_elicitation';

const fetchLog = recordingFetch();
const client = new Client(
    { name: 'mcpg-test-v2', version: '1.0.0' },
    { capabilities: { elicitation: {} }, versionNegotiation: { mode } }
);
let elicited = 0;
client.setRequestHandler('elicitation/create', async () => {
    elicited++;
    return { action: 'accept', content: { name: 'mcpg' } };
});
const transport = new StreamableHTTPClientTransport(new URL(opt.url), { fetch: fetchLog });

const connected = await check(`${name}-connect`, async () => {
    await client.connect(transport);
    assert(client.getProtocolEra() === 'modern', `era ${client.getProtocolEra()}, expected modern`);
    const v = client.getNegotiatedProtocolVersion();
    assert(v === MODERN, `negotiated ${v}, expected ${MODERN}`);
    assert(!fetchLog.log.some(r => r.rpc?.method === 'initialize'), 'fell back to initialize');
    return true;
});

await check(`${name}-discover`, async () => {
    assert(connected, 'not connected');
    const d = await client.discover();
    assert(Array.isArray(d.supportedVersions) && d.supportedVersions.includes(MODERN),
        `supportedVersions ${JSON.stringify(d.supportedVersions)}`);
    assert(d.capabilities && d.capabilities.tools, `no tools capability in ${JSON.stringify(d.capabilities)}`);
    const probe = fetchLog.log.find(r => r.rpc?.method === 'server/discover');
    assert(probe && probe.headers.get('mcp-method') === 'server/discover', 'the probe carried no Mcp-Method');
});

await check(`${name}-tools-list`, async () => {
    assert(connected, 'not connected');
    const { tools } = await client.listTools();
    assert(tools.some(t => t.name === opt.tool), `${opt.tool} not in ${tools.map(t => t.name)}`);
});

await check(`${name}-tools-call`, async () => {
    assert(connected, 'not connected');
    const text = resultText(await client.callTool({ name: opt.tool, arguments: opt.args }));
    assert(text.includes(opt.expect), `result text ${JSON.stringify(text)} lacks ${JSON.stringify(opt.expect)}`);
    const call = fetchLog.log.filter(r => r.rpc?.method === 'tools/call').pop();
    assert(call.headers.get('mcp-name') === opt.tool, `Mcp-Name ${call.headers.get('mcp-name')}`);
});

await check(`${name}-input-required`, async () => {
    assert(connected, 'not connected');
    const res = await client.callTool({ name: INPUT_TOOL, arguments: {} });
    assert(elicited === 1, `the client's elicitation handler ran ${elicited} times, expected 1`);
    const calls = fetchLog.log.filter(r => r.rpc?.method === 'tools/call' && r.rpc.params?.name === INPUT_TOOL);
    assert(calls.length === 2, `expected the call and its retry, saw ${calls.length} tools/call requests`);
    const retry = calls[1].rpc.params;
    assert(retry.inputResponses && Object.keys(retry.inputResponses).length === 1,
        `the retry carried inputResponses ${JSON.stringify(retry.inputResponses)}`);
    assert(!res.isError, `the final result is an error: ${JSON.stringify(res)}`);
    resultText(res);
});

await client.close().catch(() => {});
finish();
