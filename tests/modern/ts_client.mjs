#!/usr/bin/env node
// MCP test client on the official TypeScript SDK 2.4 (@modelcontextprotocol/client).
//
//   node ts_client.mjs [options] <url>
//   node ts_client.mjs [options] --stdio CMD [ARGS...]      (everything after --stdio is the command)
// options: --mode legacy|auto|pin   (default auto; pin = { pin: '2026-07-28' }; legacy = SDK default)
//          --header 'K: V'          (repeatable, HTTP only)
//          --elicit ANSWER          also call `ask`, answering the elicitation with ANSWER
//          --sample                 also call `sample`, answering sampling/createMessage
//          --everything             against the official everything server: only
//                                   tools/list and tools/call echo {message}
//          --tour                   against the everything server, more of it: echo,
//                                   trigger-long-running-operation (progress), a text
//                                   resource, simple-prompt, and with --elicit / --sample
//                                   its elicitation and sampling tools
//
// Runs connect, tools/list, tools/call notify {tag:"t1",count:5} (counting progress and log
// notifications), resources/read test://static, tools/call whoami, prompts/get greet, [ask], [sample], close,
// and prints ONE JSON line on stdout. Exit 0 iff ok.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const MODERN = '2026-07-28';
const args = process.argv.slice(2);
let mode = 'auto', target, stdio, elicit = null, sample = false, everything = false, tour = false;
const headers = {};
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--mode') mode = args[++i];
  else if (a === '--header') { const h = args[++i]; const c = h.indexOf(':'); headers[h.slice(0, c).trim()] = h.slice(c + 1).trim(); }
  else if (a === '--elicit') elicit = args[++i];
  else if (a === '--sample') sample = true;
  else if (a === '--everything') everything = true;
  else if (a === '--tour') tour = true;
  else if (a === '--stdio') { stdio = args.slice(i + 1); break; }
  else target = a;
}
if (!['legacy', 'auto', 'pin'].includes(mode) || (!target && !stdio?.length)) {
  console.error('usage: ts_client.mjs [--mode legacy|auto|pin] [--header "K: V"]... [--elicit A] [--sample] <url> | --stdio CMD...');
  process.exit(2);
}

const out = { ok: false, era: null, protocolVersion: null, serverInfo: null, tools: [], notify: null,
              resource: null, whoami: null, prompt: null, elicit: null, sample: null };
const capabilities = {};
if (elicit !== null) capabilities.elicitation = { form: {} };
if (sample) capabilities.sampling = {};
const client = new Client({ name: 'mcpgate-modern-ts-client', version: '2.4.0' }, {
  capabilities,
  versionNegotiation: { mode: mode === 'pin' ? { pin: MODERN } : mode },
});
if (elicit !== null)
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { answer: elicit, name: elicit } }));
if (sample)
  client.setRequestHandler('sampling/createMessage', async (req) => ({
    role: 'assistant', model: 'mcpgate-test-model', stopReason: 'endTurn',
    content: { type: 'text', text: `sampled: ${req.params.messages.at(-1)?.content?.text}` } }));
const logSeqs = [];
let allLogs = 0;
client.setNotificationHandler('notifications/message', (n) => {
  allLogs += 1;
  if (n.params?.data?.tag === 't1') logSeqs.push(n.params.data.seq);
});

const duplicates = (xs) => xs.length - new Set(xs).size;
try {
  const transport = stdio
    ? new StdioClientTransport({ command: stdio[0], args: stdio.slice(1), stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
  await client.connect(transport);
  out.era = client.getProtocolEra() ?? null;
  out.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
  out.serverInfo = client.getServerVersion() ?? null;
  const modern = out.era === 'modern';

  out.tools = (await client.listTools()).tools.map((t) => t.name);
  if (tour) {
    const text = (r) => r.content?.find((c) => c.type === 'text')?.text ?? null;
    out.echo = text(await client.callTool({ name: 'echo', arguments: { message: 'from ts' } }));
    const progress = [];
    const lr = await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
      { onprogress: (p) => progress.push(p.progress) });
    out.long = { text: text(lr), progress };
    out.resource = (await client.readResource({ uri: 'demo://resource/dynamic/text/1' })).contents?.[0]?.text ?? null;
    out.prompt = (await client.getPrompt({ name: 'simple-prompt' })).messages?.[0]?.content?.text ?? null;
    // Simulated logging sends a log message at once (over HTTP on the server's standalone
    // stream, so it may race the call's answer) and then every 5 s: a call that lasts
    // 5.5 s, asking for logs with its logLevel, gets at least the second on its stream.
    const before = allLogs;
    const debug = { 'io.modelcontextprotocol/logLevel': 'debug' };
    await client.callTool({ name: 'toggle-simulated-logging', arguments: {}, _meta: debug });
    await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 5.5, steps: 1 }, _meta: debug });
    out.logs = allLogs - before;
    await client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    const all = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    if (elicit !== null) out.elicit = all(await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }));
    if (sample) out.sample = text(await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'say hi' } }));
    out.ok = out.echo === 'Echo: from ts' && progress.length === 3 && /^Resource 1:/.test(out.resource ?? '') &&
      out.prompt === 'This is a simple prompt without arguments.' && out.logs >= 1 &&
      (elicit === null || (out.elicit ?? '').includes(elicit)) && (!sample || (out.sample ?? '').includes('sampled: '));
    if (!out.ok) out.error = 'unexpected result';
    await client.close().catch(() => {});
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(out.ok ? 0 : 1);
  }
  if (everything) {
    const e = await client.callTool({ name: 'echo', arguments: { message: 'from ts' } });
    out.echo = e.content?.[0]?.text ?? null;
    out.ok = out.echo === 'Echo: from ts';
    if (!out.ok) out.error = 'unexpected result';
    await client.close().catch(() => {});
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(out.ok ? 0 : 1);
  }

  const progress = [];
  // 2026-07-28: logs are opt-in per request (_meta logLevel); 2025: the server sends them unasked.
  const r = await client.callTool(
    { name: 'notify', arguments: { tag: 't1', count: 5 }, ...(modern && { _meta: { 'io.modelcontextprotocol/logLevel': 'debug' } }) },
    { onprogress: (p) => progress.push(p.progress) });
  out.notify = { text: r.content?.[0]?.text ?? null, progress: progress.length, logs: logSeqs.length,
                 duplicates: duplicates(progress) + duplicates(logSeqs) };

  out.resource = (await client.readResource({ uri: 'test://static' })).contents?.[0]?.text ?? null;
  if (out.tools.includes('whoami'))
    out.whoami = (await client.callTool({ name: 'whoami', arguments: {} })).content?.[0]?.text ?? null;
  if (client.getServerCapabilities()?.prompts) {
    const p = await client.getPrompt({ name: 'greet', arguments: { name: 'mcpgate' } });
    out.prompt = p.messages?.[0]?.content?.text ?? null;
  }
  if (elicit !== null) {
    const a = await client.callTool({ name: 'ask', arguments: { question: 'What is the answer?' } });
    out.elicit = a.isError ? { error: a.content?.[0]?.text } : a.content?.[0]?.text ?? null;
  }
  if (sample) {
    const s = await client.callTool({ name: 'sample', arguments: { prompt: 'say hi' } });
    out.sample = s.isError ? { error: s.content?.[0]?.text } : s.content?.[0]?.text ?? null;
  }
  out.ok = out.notify.text === 't1:5' && out.resource === 'static resource' &&
           (elicit === null || out.elicit === elicit) && (!sample || out.sample === 'sampled: say hi');
  if (!out.ok) out.error = 'unexpected result';
} catch (e) {
  out.error = `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(out.ok ? 0 : 1);
