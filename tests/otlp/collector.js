// A tiny OTLP/HTTP traces collector for the integration tests. It listens
// on 127.0.0.1 (a free port, printed as "port N" on stdout), decodes each
// POST /v1/traces body (protobuf with the OpenTelemetry project's own
// generated definitions, or OTLP/JSON) and keeps every span it saw; GET
// /spans answers them as JSON, ids in lowercase hex, attributes as an
// object, with the body's encoding and its resource's service.name.
// It counts the connections that carried a POST (postConnections).
// --refuse-first N answers the first N POSTs 503 (counted as "refused") without
// reading them, as a collector that is overloaded does.
'use strict';
const http = require('http');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');

const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Response = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
const spans = [];
let posts = 0;
let refused = 0;
let postConnections = 0; // connections that carried at least one POST
const at = process.argv.indexOf('--refuse-first');
const refuseFirst = at > 0 ? Number(process.argv[at + 1]) : 0;

const hex = (b) => (b && b.length ? Buffer.from(b).toString('hex') : '');

function anyValue(v) {
  if (!v) return null;
  if (v.stringValue !== undefined && v.stringValue !== null) return v.stringValue;
  if (v.intValue !== undefined && v.intValue !== null) return Number(v.intValue);
  return null;
}

function attributes(list) {
  const out = {};
  for (const kv of list || []) out[kv.key] = anyValue(kv.value);
  return out;
}

// One span, the same shape from either encoding (JSON ids are hex already).
function keep(span, service, encoding, idOf) {
  spans.push({
    traceId: idOf(span.traceId), spanId: idOf(span.spanId), parentSpanId: idOf(span.parentSpanId),
    name: span.name, kind: Number(span.kind), traceState: span.traceState || '',
    start: String(span.startTimeUnixNano), end: String(span.endTimeUnixNano),
    attributes: attributes(span.attributes),
    status: span.status ? { code: Number(span.status.code || 0), message: span.status.message || '' } : { code: 0 },
    service, encoding,
  });
}

function take(req, encoding, idOf) {
  for (const rs of req.resourceSpans || []) {
    const service = attributes(rs.resource && rs.resource.attributes)['service.name'];
    for (const ss of rs.scopeSpans || []) for (const s of ss.spans || []) keep(s, service, encoding, idOf);
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/spans') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ posts, refused, postConnections, spans }));
      return;
    }
    if (!req.socket.carriedPost) {
      req.socket.carriedPost = true;
      postConnections++;
    }
    if (refused < refuseFirst) {
      refused++;
      res.writeHead(503);
      res.end();
      return;
    }
    const body = Buffer.concat(chunks);
    try {
      if ((req.headers['content-type'] || '').startsWith('application/json')) {
        take(JSON.parse(body.toString('utf8')), 'json', (s) => s || '');
      } else {
        take(Request.decode(body), 'protobuf', hex);
      }
    } catch (e) {
      process.stderr.write(`collector: undecodable body: ${e}\n`);
      res.writeHead(400);
      res.end();
      return;
    }
    posts++;
    res.writeHead(200, { 'content-type': 'application/x-protobuf' });
    res.end(Buffer.from(Response.encode({}).finish()));
  });
});

server.listen(0, '127.0.0.1', () => process.stdout.write(`port ${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
