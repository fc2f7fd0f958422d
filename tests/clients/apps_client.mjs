#!/usr/bin/env node
// Drives MCP Apps through a virtual server with the official TypeScript SDK (1.32) client
// and the official host helper of @modelcontextprotocol/ext-apps.
//
// Usage: node tests/clients/apps_client.mjs <url>
//
// The virtual server is expected to have the members `app` (the official basic vanilla-JS
// app server) and `map` (the official map app server). The client lists the tools, takes
// each tool's app URI with the host helper (which accepts only ui:// URIs), calls the
// app's bare tool name before and after reading the apps (as the app itself does), reads
// each app, and calls the exposed tools.
//
// Prints ONE JSON line: {"ok":true, "tools":[...], "apps":{tool: uri},
// "reads":{uri: {"mimeType","uri","html"}}, "bareBefore": {"error"}|{...},
// "bareAfter": {...}, "exposed": {...}, "map": {...}} or {"ok":false,"error":"..."}.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n");
  process.exit(code);
}

const [url] = process.argv.slice(2);
if (!url) emit({ ok: false, error: "usage: apps_client.mjs <url>" }, 1);
setTimeout(() => emit({ ok: false, error: "timed out after 60 s" }, 1), 60_000).unref();

async function call(client, name, args) {
  try {
    const r = await client.callTool({ name, arguments: args });
    return { isError: r.isError ?? false, structured: r.structuredContent ?? null, meta: r._meta ?? null };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
}

async function main() {
  const out = { apps: {}, reads: {} };
  const client = new Client({ name: "mcpgate-apps-test", version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const tools = (await client.listTools()).tools;
  out.tools = tools.map((t) => t.name);
  for (const t of tools) {
    const uri = getToolUiResourceUri(t);
    if (uri) out.apps[t.name] = uri;
  }
  out.bareBefore = await call(client, "get-time", {});
  for (const uri of new Set(Object.values(out.apps))) {
    const r = await client.readResource({ uri });
    const c = r.contents[0] ?? {};
    out.reads[uri] = { mimeType: c.mimeType, uri: c.uri, html: typeof c.text === "string" && c.text.includes("<html") };
  }
  out.bareAfter = await call(client, "get-time", {});
  out.exposed = await call(client, "app__get-time", {});
  out.map = await call(client, "map__show-map", { west: 2.2, south: 48.8, east: 2.5, north: 48.9, label: "Paris" });
  await transport_close(client);
  emit({ ok: true, ...out }, 0);
}

async function transport_close(client) {
  try {
    await client.close();
  } catch {
    // the session's end is not what this client checks
  }
}

main().catch((e) => emit({ ok: false, error: String(e?.stack ?? e) }, 1));
