#!/usr/bin/env node
// A session-era client on the official TypeScript SDK 1.32 (@modelcontextprotocol/sdk),
// for mcpgate's era-bridge tests against a 2026-07-28-only server (tests/modern/ts_server.mjs
// --modern-only) through the gateway.
//
//   node tests/clients/bridge_client.mjs <url>
//
// initialize -> tools/list -> tools/call notify {tag, count: 5} (counting progress) ->
// resources/read test://static -> tools/call ask (an elicitation the client answers "42")
// -> resources/subscribe test://counter, tools/call touch, wait for the update on the GET
// stream -> DELETE. Prints ONE JSON line: {ok, protocolVersion, sessionId, tools, notify,
// resource, elicit, updated, deleted, error?}. Exit 0 iff ok.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
const out = { ok: false, protocolVersion: null, sessionId: null, tools: [], notify: null, resource: null,
              elicit: null, updated: null, deleted: false };
const client = new Client({ name: 'mcpgate-bridge-client', version: '1.32.2' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { answer: '42' } }));
let wake;
const updated = new Promise((r) => { wake = r; });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => wake(n.params.uri));
const timeout = (ms, what) => new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), ms));
const text = (r) => r.content?.find((c) => c.type === 'text')?.text ?? null;
try {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion ?? null;
  out.sessionId = transport.sessionId ?? null;
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const progress = [];
  const n = await client.callTool({ name: 'notify', arguments: { tag: 't1', count: 5 } }, undefined,
    { onprogress: (p) => progress.push(p.progress) });
  out.notify = { text: text(n), progress: progress.length };
  out.resource = (await client.readResource({ uri: 'test://static' })).contents?.[0]?.text ?? null;
  out.elicit = text(await client.callTool({ name: 'ask', arguments: { question: 'What is the answer?' } }));
  await client.subscribeResource({ uri: 'test://counter' });
  // The gateway re-opens its upstream listen stream with the new subscription: touch until
  // the update arrives.
  for (let i = 0; i < 20 && out.updated === null; i++) {
    await client.callTool({ name: 'touch', arguments: { uri: 'test://counter' } });
    out.updated = await Promise.race([updated, new Promise((r) => setTimeout(() => r(null), 250))]);
  }
  await Promise.race([transport.terminateSession(), timeout(5000, 'DELETE')]);
  out.deleted = transport.sessionId === undefined;
  out.ok = out.notify.text === 't1:5' && out.notify.progress === 5 && out.resource === 'static resource' &&
           out.elicit === '42' && out.updated === 'test://counter' && out.deleted;
  if (!out.ok) out.error = 'unexpected result';
} catch (e) {
  out.error = `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(out.ok ? 0 : 1));
