#!/usr/bin/env node
// MCP test server on the official TypeScript SDK 2.4 (@modelcontextprotocol/server), for
// mcpgate's 2026-07-28 tests. Dual-era by default: 2026-07-28 (stateless, per-request _meta)
// and 2025-11-25 (initialize) clients on one endpoint.
//
//   node ts_server.mjs [http] [--port N] [--modern-only | --legacy-sessions]   Streamable HTTP, 127.0.0.1:N/mcp
//   node ts_server.mjs stdio [--modern-only]                                    stdio
//
// HTTP prints `MODERN_SERVER_READY url=http://127.0.0.1:PORT/mcp` on stderr once listening.
// HTTP legacy serving is the SDK default, createMcpHandler({ legacy: 'stateless' }): no sessions,
// GET/DELETE -> 405, and no server-to-client requests (so `ask`/`sample` fail for 2025 clients).
// --modern-only:     createMcpHandler({ legacy: 'reject' }) / serveStdio({ legacy: 'reject' }).
// --legacy-sessions: 2025 clients get a sessionful WebStandardStreamableHTTPServerTransport
//                    (Mcp-Session-Id, GET SSE, elicitation), routed with isLegacyRequest() in
//                    front of a legacy:'reject' handler (the SDK's documented composition).
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createMcpHandler, isLegacyRequest, McpServer, WebStandardStreamableHTTPServerTransport,
         inputRequired, acceptedContent, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { toNodeHandler, localhostHostValidation, localhostOriginValidation } from '@modelcontextprotocol/node';
import * as z from 'zod/v4';

const argv = process.argv.slice(2);
const transport = argv[0] === 'stdio' ? 'stdio' : 'http';
const modernOnly = argv.includes('--modern-only');
const legacySessions = argv.includes('--legacy-sessions');
const portArg = argv.indexOf('--port');
const port = portArg >= 0 ? Number(argv[portArg + 1]) : 0;

// Process-wide state: the HTTP entry builds a fresh McpServer per request, stdio one per
// connection, --legacy-sessions one per 2025 session.
let counter = 0;
const addedTools = [];          // names registered at runtime by add_tool
let httpHandler;                // the createMcpHandler result (HTTP only): notify.* feeds listen streams
const live = new Set();         // long-lived instances (stdio, legacy sessions): { era, server, addTool, subscribed }

const text = (t) => ({ content: [{ type: 'text', text: String(t) }] });

function buildServer({ era, requestInfo }, longLived = transport === 'stdio') {
  const server = new McpServer({ name: 'mcpgate-modern-ts-server', version: '2.4.0' }, {
    capabilities: { logging: {}, tools: { listChanged: true }, prompts: { listChanged: true },
                    resources: { subscribe: true, listChanged: true } },
  });
  const subscribed = new Set();  // legacy resources/subscribe (stdio connection, or one HTTP request)

  server.registerTool('echo', { description: 'Echo text', inputSchema: z.object({ text: z.string() }) },
    async ({ text: t }) => text(t));

  server.registerTool('notify', {
    description: 'Send `count` progress (if a progressToken was given) and `count` log notifications, then return "tag:count"',
    inputSchema: z.object({ tag: z.string(), count: z.number().int().min(0).max(1000) }),
  }, async ({ tag, count }, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (let seq = 1; seq <= count; seq++) {
      if (progressToken !== undefined)
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: seq, total: count } });
      await ctx.mcpReq.log('info', { tag, seq });  // modern: only if the request's _meta carries a logLevel
    }
    // The TS client dispatches notifications a microtask later than responses, so progress that
    // reaches it in the same read as the result is dropped ("unknown token"). Leave a gap.
    await new Promise((r) => setTimeout(r, 20));
    return text(`${tag}:${count}`);
  });

  server.registerTool('counter', { description: 'Increment and return a process-wide counter' },
    async () => text(++counter));

  const answerSchema = z.object({ answer: z.string() });
  server.registerTool('ask', { description: 'Ask the user (elicitation) and return the answer', inputSchema: z.object({ question: z.string() }) },
    async ({ question }, ctx) => {
      // 2026-07-28: input_required round trip. 2025 era: the SDK's legacy shim turns the
      // same result into a real elicitation/create request (needs a back channel: stdio, not stateless HTTP).
      const view = inputResponse(ctx.mcpReq.inputResponses, 'answer');
      if (view.kind === 'elicit' && view.action !== 'accept') return text(`(${view.action})`);
      const got = acceptedContent(ctx.mcpReq.inputResponses, 'answer', answerSchema);
      if (got !== undefined) return text(got.answer);
      return inputRequired({ inputRequests: { answer: inputRequired.elicit({ message: question, requestedSchema: answerSchema }) } });
    });

  server.registerTool('sample', { description: 'Ask the client to sample an LLM; return its text', inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx) => {
      const view = inputResponse(ctx.mcpReq.inputResponses, 'llm');
      if (view.kind === 'sampling') return text(view.result.content?.text ?? JSON.stringify(view.result.content));
      return inputRequired({ inputRequests: { llm: inputRequired.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 64 }) } });
    });

  server.registerTool('region', { description: 'Echo the region, an x-mcp-header argument (Mcp-Param-Region)',
    inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }) },
    async ({ region }) => text(`region ${region}`));

  server.registerTool('whoami', { description: 'The caller as seen in request headers, else "anonymous"' }, async (ctx) => {
    const h = ctx.http?.req?.headers ?? requestInfo?.headers;
    const auth = h?.get('authorization'), user = h?.get('x-user');
    return text(auth ? `authorization:${auth}` : user ? `x-user:${user}` : 'anonymous');
  });

  server.registerTool('touch', { description: 'Emit notifications/resources/updated for uri', inputSchema: z.object({ uri: z.string() }) },
    async ({ uri }) => {
      httpHandler?.notify.resourceUpdated(uri);   // HTTP 2026-07-28: listen streams (the handler's bus)
      for (const i of live)                       // stdio (routed to listen streams), legacy subscribers
        if (i.era === 'modern' || i.subscribed.has(uri)) await i.server.server.sendResourceUpdated({ uri }).catch(() => {});
      return text(`touched ${uri}`);
    });

  const registerAdded = (name) => server.registerTool(name, { description: 'Added at runtime by add_tool' },
    async () => text(`${name} called`));
  for (const name of addedTools) registerAdded(name);
  server.registerTool('add_tool', { description: 'Register a new tool at runtime (tools list_changed)', inputSchema: z.object({ name: z.string() }) },
    async ({ name }) => {
      if (addedTools.includes(name)) return text(`exists ${name}`);
      addedTools.push(name);
      httpHandler?.notify.toolsChanged();         // HTTP 2026-07-28: listen streams
      for (const i of live) i.addTool(name);      // long-lived instances send their own tools/list_changed
      return text(`added ${name}`);
    });
  if (longLived) live.add({ era, server, subscribed, addTool: registerAdded });

  server.registerResource('static', 'test://static', { mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'static resource' }] }));
  server.registerResource('counter', 'test://counter', { mimeType: 'text/plain', description: 'The counter tool value' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: String(counter) }] }));
  if (era === 'legacy') {  // 2025 resources/subscribe (2026-07-28 uses subscriptions/listen instead)
    server.server.setRequestHandler('resources/subscribe', async (req) => { subscribed.add(req.params.uri); return {}; });
    server.server.setRequestHandler('resources/unsubscribe', async (req) => { subscribed.delete(req.params.uri); return {}; });
  }

  server.registerPrompt('greet', { description: 'Greet someone', argsSchema: z.object({ name: z.string() }) },
    ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}!` } }] }));
  return server;
}

// --legacy-sessions: one sessionful 2025 transport + instance per Mcp-Session-Id.
const sessions = new Map();
async function legacySession(request) {
  const sid = request.headers.get('mcp-session-id');
  let t = sid ? sessions.get(sid) : undefined;
  if (sid && !t) return Response.json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }, { status: 404 });
  if (t) return t.handleRequest(request);
  t = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, t),
    onsessionclosed: (id) => sessions.delete(id),
  });
  const server = buildServer({ era: 'legacy', requestInfo: request }, true);
  t.onclose = () => { sessions.delete(t.sessionId); for (const i of live) if (i.server === server) live.delete(i); };
  await server.connect(t);
  const response = await t.handleRequest(request);
  if (!t.sessionId) await server.close();   // not an initialize: the transport answered 400
  return response;
}

const onerror = (e) => console.error(`ts_server: ${e?.message ?? e}`);
if (transport === 'stdio') {
  serveStdio(buildServer, { legacy: modernOnly ? 'reject' : 'serve', onerror });
} else {
  httpHandler = createMcpHandler(buildServer, { legacy: modernOnly || legacySessions ? 'reject' : 'stateless', onerror });
  const nodeHandler = toNodeHandler(legacySessions
    ? { fetch: async (request, opts) => (await isLegacyRequest(request)) ? legacySession(request) : httpHandler.fetch(request, opts) }
    : httpHandler);
  const validHost = localhostHostValidation(), validOrigin = localhostOriginValidation();
  const http = createServer((req, res) => {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') { res.writeHead(404).end('not found'); return; }
    if (!validHost(req, res) || !validOrigin(req, res)) return;  // 403 on a foreign Host/Origin
    void nodeHandler(req, res);
  });
  http.listen(port, '127.0.0.1', () => {
    console.error(`MODERN_SERVER_READY url=http://127.0.0.1:${http.address().port}/mcp`);
  });
  const stop = async () => { await httpHandler.close().catch(() => {}); http.closeAllConnections(); http.close(() => process.exit(0)); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
