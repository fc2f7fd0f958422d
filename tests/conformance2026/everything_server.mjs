#!/usr/bin/env node
// Fixture server for the MCP conformance suite, protocol revision 2026-07-28
// (npm @modelcontextprotocol/conformance@0.2.0-alpha.12, `--requirements 2026-07-28`), on the
// official TypeScript SDK 2.4 (@modelcontextprotocol/server + node). Written for mcpgate from
// the suite's own scenario descriptions ("Server Implementation Requirements"); not vendored:
// the TS SDK's test/conformance/src/everythingServer.ts sits under the MCP project's mixed
// MIT / Apache-2.0 licence transition, so we keep our own equivalent instead.
//
//   node everything_server.mjs [--port N]      (or PORT=N; default 0 = any free port)
//
// Streamable HTTP on 127.0.0.1:N/mcp, dual-era (createMcpHandler's default legacy:'stateless'),
// Host/Origin checked for localhost (403 otherwise). Prints
// `CONFORMANCE2026_SERVER_READY url=http://127.0.0.1:PORT/mcp` on stderr once listening.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { createMcpHandler, McpServer, ResourceTemplate, completable, createRequestStateCodec,
         fromJsonSchema, inputRequired, acceptedContent, inputResponse } from '@modelcontextprotocol/server';
import { toNodeHandler, localhostHostValidation, localhostOriginValidation } from '@modelcontextprotocol/node';
import * as z from 'zod/v4';

const portArg = process.argv.indexOf('--port');
const port = Number(portArg >= 0 ? process.argv[portArg + 1] : process.env.PORT ?? 0);

// 1x1 red PNG and a 44-byte (empty) 8 kHz mono 8-bit WAV.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const codec = createRequestStateCodec({ key: randomBytes(32) });  // one process serves every round
const dynamicTools = new Set();
let handler;

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ask = (message, properties) => inputRequired.elicit({ message, requestedSchema:
  { type: 'object', properties, required: Object.keys(properties) } });
const nameSchema = z.object({ name: z.string() });

function buildServer() {
  const s = new McpServer({ name: 'mcpgate-conformance-2026', version: '1.0.0' }, {
    capabilities: { logging: {}, completions: {}, tools: { listChanged: true }, prompts: { listChanged: true },
                    resources: { subscribe: true, listChanged: true } },
    requestState: { verify: codec.verify },  // tampered or expired state -> -32602
  });
  const tool = (name, description, inputSchema, fn) => s.registerTool(name, { description, ...(inputSchema && { inputSchema }) }, fn);

  // --- content -----------------------------------------------------------------------
  tool('test_simple_text', 'Returns simple text', undefined, async () => text('This is a simple text response for testing.'));
  tool('test_image_content', 'Returns an image', undefined, async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
  tool('test_audio_content', 'Returns audio', undefined, async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
  tool('test_embedded_resource', 'Returns an embedded resource', undefined, async () => ({ content: [{ type: 'resource',
    resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }));
  tool('test_multiple_content_types', 'Returns text, image and resource', undefined, async () => ({ content: [
    { type: 'text', text: 'Multiple content types test:' },
    { type: 'image', data: PNG, mimeType: 'image/png' },
    { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }] }));
  tool('test_error_handling', 'Always fails', undefined, async () => ({ isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }));

  // --- progress, logging, change notifications ----------------------------------------------
  tool('test_tool_with_progress', 'Reports progress 0/50/100', undefined, async (ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (progressToken !== undefined)
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
      if (progress < 100) await sleep(50);
    }
    return text('Progress tool completed');
  });
  const logging = async (ctx) => {
    for (const msg of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
      await ctx.mcpReq.log('info', msg);  // sent only when the request's _meta carries a logLevel
      await sleep(50);
    }
    return text('Logging tool completed');
  };
  tool('test_tool_with_logging', 'Emits log messages', undefined, logging);
  tool('test_logging_tool', 'Emits log messages', undefined, logging);
  tool('test_trigger_tool_change', 'Adds a tool and notifies listen streams', undefined, async () => {
    dynamicTools.add(`test_dynamic_tool_${dynamicTools.size + 1}`);
    handler.notify.toolsChanged();
    return text('Tool list changed');
  });
  tool('test_trigger_prompt_change', 'Notifies listen streams of a prompt list change', undefined, async () => {
    handler.notify.promptsChanged();
    return text('Prompt list changed');
  });
  for (const name of dynamicTools) tool(name, 'Added by test_trigger_tool_change', undefined, async () => text(name));

  // --- SEP-2243 headers, SEP-1613/2106 schemas -----------------------------------------------
  tool('test_custom_headers', 'Mirrors arguments into Mcp-Param headers', z.object({
    region: z.string().meta({ 'x-mcp-header': 'Region' }),
    priority: z.number().int().meta({ 'x-mcp-header': 'Priority' }).optional(),
    verbose: z.boolean().meta({ 'x-mcp-header': 'Verbose' }).optional(),
  }), async (args) => text(`headers ok: ${JSON.stringify(args)}`));
  tool('test_custom_headers_null', 'Optional x-mcp-header value', z.object({
    region: z.string().nullable().optional().meta({ 'x-mcp-header': 'Region' }),
  }), async (args) => text(`headers ok: ${JSON.stringify(args)}`));
  tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', fromJsonSchema({
    $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object',
    $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' },
                  contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' } },
    allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
    if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
    then: { required: ['phone'] }, else: { required: ['email'] }, additionalProperties: false,
  }), async () => text('ok'));

  // --- input_required (SEP-2322) -------------------------------------------------------------
  tool('test_missing_capability', 'Needs the sampling capability (-32021 without it)', undefined, async (ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, 'llm');
    if (r.kind === 'sampling') return text(`LLM: ${r.result.content?.text}`);
    return inputRequired({ inputRequests: { llm: inputRequired.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }], maxTokens: 20 }) } });
  });
  tool('test_streaming_elicitation', 'Asks for input in-band', undefined, async (ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, 'user_name', nameSchema);
    return got ? text(`Hello, ${got.name}!`) : inputRequired({ inputRequests: { user_name: ask('What is your name?', { name: { type: 'string' } }) } });
  });
  tool('test_input_required_result_elicitation', 'One elicitation round', undefined, async (ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, 'user_name', nameSchema);
    if (got) return text(`Hello, ${got.name}!`);
    return inputRequired({ inputRequests: { user_name: ask('What is your name?', { name: { type: 'string' } }) } });
  });
  tool('test_input_required_result_sampling', 'One sampling round', undefined, async (ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
    if (r.kind === 'sampling') return text(`The model said: ${r.result.content?.text ?? ''}`);
    return inputRequired({ inputRequests: { capital_question: inputRequired.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 }) } });
  });
  tool('test_input_required_result_list_roots', 'One roots/list round', undefined, async (ctx) => {
    const r = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    if (r.kind === 'roots') return text(`Roots: ${r.roots.map((x) => x.uri).join(', ')}`);
    return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
  });
  tool('test_input_required_result_request_state', 'Round trip of a signed requestState', undefined, async (ctx) => {
    const state = ctx.mcpReq.requestState();  // verified and decoded by codec.verify
    const ok = acceptedContent(ctx.mcpReq.inputResponses, 'confirm');
    if (state?.step === 'confirm' && ok) return text(`state-ok: confirmed=${ok.ok}`);
    return inputRequired({ inputRequests: { confirm: ask('Please confirm', { ok: { type: 'boolean' } }) },
                           requestState: await codec.mint({ step: 'confirm' }) });
  });
  tool('test_input_required_result_multiple_inputs', 'Elicitation, sampling and roots at once', undefined, async (ctx) => {
    const rs = ctx.mcpReq.inputResponses ?? {};
    const keys = ['user_name', 'greeting', 'client_roots'];
    if (ctx.mcpReq.requestState()?.step === 'all' && keys.every((k) => inputResponse(rs, k).kind !== 'missing'))
      return text(`Got all inputs: ${keys.join(', ')}`);
    return inputRequired({ inputRequests: {
      user_name: ask('What is your name?', { name: { type: 'string' } }),
      greeting: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 }),
      client_roots: inputRequired.listRoots(),
    }, requestState: await codec.mint({ step: 'all' }) });
  });
  tool('test_input_required_result_multi_round', 'Two elicitation rounds', undefined, async (ctx) => {
    const state = ctx.mcpReq.requestState();
    const step1 = acceptedContent(ctx.mcpReq.inputResponses, 'step1');
    const step2 = acceptedContent(ctx.mcpReq.inputResponses, 'step2');
    if (state?.round === 2 && step2) return text(`Hello ${state.name}, favourite colour ${step2.color}`);
    if (state?.round === 1 && step1)
      return inputRequired({ inputRequests: { step2: ask('Step 2: What is your favorite color?', { color: { type: 'string' } }) },
                             requestState: await codec.mint({ round: 2, name: step1.name }) });
    return inputRequired({ inputRequests: { step1: ask('Step 1: What is your name?', { name: { type: 'string' } }) },
                           requestState: await codec.mint({ round: 1 }) });
  });
  tool('test_input_required_result_tampered_state', 'Rejects a tampered requestState', undefined, async (ctx) => {
    if (ctx.mcpReq.requestState()?.step === 'sealed' && acceptedContent(ctx.mcpReq.inputResponses, 'confirm'))
      return text('state verified');
    return inputRequired({ inputRequests: { confirm: ask('Please confirm', { ok: { type: 'boolean' } }) },
                           requestState: await codec.mint({ step: 'sealed' }) });
  });
  tool('test_input_required_result_capabilities', 'Only asks for what the client declared', undefined, async (ctx) => {
    if (ctx.mcpReq.inputResponses) return text('Thanks for the input');
    const caps = ctx.mcpReq.envelope?.[CAPS] ?? {};
    const requests = {};
    if (caps.elicitation) requests.user_name = ask('What is your name?', { name: { type: 'string' } });
    if (caps.sampling) requests.greeting = inputRequired.createMessage({
      messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 });
    if (caps.roots) requests.client_roots = inputRequired.listRoots();
    return Object.keys(requests).length ? inputRequired({ inputRequests: requests }) : text('No client capabilities to ask with');
  });

  // --- resources -----------------------------------------------------------------------------
  s.registerResource('static-text', 'test://static-text', { description: 'A static text resource', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] }));
  s.registerResource('static-binary', 'test://static-binary', { description: 'A static PNG', mimeType: 'image/png' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }));
  s.registerResource('watched-resource', 'test://watched-resource', { description: 'A resource for subscriptions', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Watched resource content.' }] }));
  s.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A templated resource', mimeType: 'application/json' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json',
      text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }));

  // --- prompts -------------------------------------------------------------------------------
  s.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] }));
  s.registerPrompt('test_prompt_with_arguments', { description: 'A prompt with two arguments', argsSchema: z.object({
    arg1: completable(z.string().describe('First test argument'), (v) => ['paris', 'park', 'party'].filter((x) => x.startsWith(v ?? ''))),
    arg2: z.string().describe('Second test argument'),
  }) }, ({ arg1, arg2 }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }));
  s.registerPrompt('test_prompt_with_embedded_resource', { description: 'A prompt embedding a resource',
    argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }) }, ({ resourceUri }) => ({ messages: [
    { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
    { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }] }));
  s.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, () => ({ messages: [
    { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
    { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }] }));
  s.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that needs input first' }, (ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, 'user_context');
    if (!got) return inputRequired({ inputRequests: { user_context: ask('What context should the prompt use?', { context: { type: 'string' } }) } });
    return { messages: [{ role: 'user', content: { type: 'text', text: `Prompt with context: ${got.context}` } }] };
  });
  return s;
}

handler = createMcpHandler(buildServer, { onerror: (e) => console.error(`everything_server: ${e?.message ?? e}`) });
const nodeHandler = toNodeHandler(handler);
const validHost = localhostHostValidation(), validOrigin = localhostOriginValidation();
const http = createServer((req, res) => {
  if (new URL(req.url, 'http://x').pathname !== '/mcp') { res.writeHead(404).end('not found'); return; }
  if (!validHost(req, res) || !validOrigin(req, res)) return;
  void nodeHandler(req, res);
});
http.listen(port, '127.0.0.1', () => console.error(`CONFORMANCE2026_SERVER_READY url=http://127.0.0.1:${http.address().port}/mcp`));
const stop = async () => { await handler.close().catch(() => {}); http.closeAllConnections(); http.close(() => process.exit(0)); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
