#!/usr/bin/env node
// subscriptions/listen check on the official TypeScript SDK 2.4 client.
//
//   node ts_listen.mjs [--mode pin|auto] [--header 'K: V']... <url>
//   node ts_listen.mjs [--mode pin|auto] --stdio CMD [ARGS...]
//   --passive MS: only listen (trigger nothing) until stdin closes, MS milliseconds at most,
//                 and report what arrived (ok when the stream opened and closed); says
//                 LISTENING on stderr once the subscription is acknowledged, and
//                 NOTIFIED <method> for each notification as it arrives
//
// Opens client.listen({ toolsListChanged, resourceSubscriptions: ['test://counter'] }), then,
// on a second client (HTTP; over stdio the same client, since a second one would be another
// process), calls add_tool {name} and touch {uri:'test://counter'}, waits for both change
// notifications on the listen stream, closes the subscription and prints ONE JSON line:
// {ok, protocolVersion, honored, notifications:[{method, subscriptionId, uri?}], closed, error?}.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const MODERN = '2026-07-28';
const SUB_ID = 'io.modelcontextprotocol/subscriptionId';
const args = process.argv.slice(2);
let mode = 'pin', target, stdio, passive = null;
const headers = {};
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--mode') mode = args[++i];
  else if (a === '--header') { const h = args[++i]; const c = h.indexOf(':'); headers[h.slice(0, c).trim()] = h.slice(c + 1).trim(); }
  else if (a === '--passive') passive = Number(args[++i]);
  else if (a === '--stdio') { stdio = args.slice(i + 1); break; }
  else target = a;
}
if (!['auto', 'pin'].includes(mode) || (!target && !stdio?.length)) {
  console.error('usage: ts_listen.mjs [--mode pin|auto] [--header "K: V"]... <url> | --stdio CMD...');
  process.exit(2);
}
const newClient = () => new Client({ name: 'mcpgate-modern-ts-listen', version: '2.4.0' },
  { versionNegotiation: { mode: mode === 'pin' ? { pin: MODERN } : mode } });
const newTransport = () => stdio
  ? new StdioClientTransport({ command: stdio[0], args: stdio.slice(1), stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });

const out = { ok: false, protocolVersion: null, honored: null, notifications: [], closed: null };
const listener = newClient();
let trigger, wake;
const arrived = new Promise((r) => { wake = r; });
const record = (n) => {
  out.notifications.push({ method: n.method, subscriptionId: n.params?._meta?.[SUB_ID] ?? null,
                           ...(n.params?.uri !== undefined && { uri: n.params.uri }) });
  if (passive !== null) process.stderr.write(`NOTIFIED ${n.method}\n`);
  const m = new Set(out.notifications.map((x) => x.method));
  if (m.has('notifications/tools/list_changed') && m.has('notifications/resources/updated')) wake();
};
listener.setNotificationHandler('notifications/tools/list_changed', record);
listener.setNotificationHandler('notifications/resources/updated', record);
const timeout = (ms, what) => new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), ms));
try {
  await listener.connect(newTransport());
  out.protocolVersion = listener.getNegotiatedProtocolVersion() ?? null;
  const sub = await listener.listen({ toolsListChanged: true, resourceSubscriptions: ['test://counter'] });
  out.honored = sub.honoredFilter;
  if (passive !== null) {
    process.stderr.write('LISTENING\n');
    await new Promise((r) => {
      setTimeout(r, passive);
      process.stdin.on('end', r).on('close', r).on('error', r).resume();
    });
    await sub.close();
    out.closed = await Promise.race([sub.closed, timeout(5000, 'the subscription to close')]);
    out.ok = true;
    await listener.close().catch(() => {});
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
  }
  if (stdio) trigger = listener;
  else { trigger = newClient(); await trigger.connect(newTransport()); }
  const name = `added_${process.pid}_${Date.now()}`;
  await trigger.callTool({ name: 'add_tool', arguments: { name } });
  await trigger.callTool({ name: 'touch', arguments: { uri: 'test://counter' } });
  await Promise.race([arrived, timeout(5000, 'the change notifications')]);
  await new Promise((r) => setTimeout(r, 200));   // let duplicates, if any, show up
  await sub.close();
  out.closed = await Promise.race([sub.closed, timeout(5000, 'the subscription to close')]);
  const ids = new Set(out.notifications.map((n) => n.subscriptionId));
  out.ok = ids.size === 1 && !ids.has(null) && out.notifications.length === 2;
  if (!out.ok) out.error = 'expected exactly one tools/list_changed and one resources/updated, tagged with one subscriptionId';
} catch (e) {
  out.error = `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
}
await listener.close().catch(() => {});
if (trigger && trigger !== listener) await trigger.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(out.ok ? 0 : 1);
