#!/usr/bin/env node
// Drives a virtual server through mcpgate with the official TypeScript SDK (1.32) client.
//
// Usage: node tests/clients/virtual_client.mjs <url> <fs-dir>
//
// The virtual server is expected to have the members `ev` (the everything server), `fs`
// (the filesystem server, allowed <fs-dir>, which holds a.txt) and `kit` (mcpgate's
// testkit). The client declares sampling and roots (its one root is <fs-dir>), lists the
// merged catalogue, calls a tool of each member (progress and logs counted per call),
// reads a resource of `ev` and of `kit`, gets a prompt of each, has `ev` and `kit` ask it
// to sample and for its roots, then DELETEs the session.
//
// Prints ONE JSON line: {"ok":true, "tools":[...], "prompts":[...], "resources":[...],
// "templates":[...], "calls":{name: text}, "progress":{name: count},
// "logs":[{"logger","data"}], "reads":{uri: text}, "prompted":{name: text},
// "sampled":[prompt texts the client was asked], "rootsAsked": n, "deleted": bool}
// or {"ok":false,"error":"..."} and exit code 1.

import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n");
  process.exit(code);
}

const [url, fsDir] = process.argv.slice(2);
if (!url || !fsDir) emit({ ok: false, error: "usage: virtual_client.mjs <url> <fs-dir>" }, 1);
setTimeout(() => emit({ ok: false, error: "timed out after 60 s" }, 1), 60_000).unref();

const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

async function main() {
  const out = { calls: {}, progress: {}, logs: [], reads: {}, prompted: {}, sampled: [], rootsAsked: 0 };
  const client = new Client(
    { name: "mcpgate-virtual-test", version: "1.0.0" },
    { capabilities: { sampling: {}, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    const m = req.params.messages?.[0]?.content;
    out.sampled.push(m?.type === "text" ? m.text : JSON.stringify(m));
    return { role: "assistant", model: "test-model", content: { type: "text", text: "sampled by ts" } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    out.rootsAsked += 1;
    return { roots: [{ uri: pathToFileURL(fsDir).href, name: "fs-dir" }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    out.logs.push({ logger: n.params.logger ?? null, data: n.params.data });
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  out.serverInfo = client.getServerVersion();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  const call = async (name, args) => {
    let n = 0;
    const r = await client.callTool({ name, arguments: args }, undefined, {
      onprogress: () => {
        n += 1;
      },
    });
    out.calls[name] = text(r);
    out.progress[name] = n;
    return r;
  };
  await call("ev__echo", { message: "to ev" });
  await call("fs__read_text_file", { path: `${fsDir}/a.txt` });
  await call("kit__echo", { text: "to kit" });
  await call("kit__notify", { tag: "kit-logs", count: 3 });
  await call("ev__trigger-long-running-operation", { duration: 1, steps: 4 });
  await call("ev__trigger-sampling-request", { prompt: "ev asks", maxTokens: 10 });
  await call("kit__sample", { prompt: "kit asks" });
  await call("ev__get-roots-list", {});
  await call("kit__roots", {});
  for (const uri of ["ev+demo://resource/static/document/architecture.md", "kit+test://static"]) {
    const r = await client.readResource({ uri });
    out.reads[uri] = { uri: r.contents[0]?.uri, text: (r.contents[0]?.text ?? "").slice(0, 80) };
  }
  for (const [name, args] of [["ev__simple-prompt", {}], ["kit__greet", { name: "ts" }]]) {
    const r = await client.getPrompt({ name, arguments: args });
    const c = r.messages[0]?.content;
    out.prompted[name] = c?.type === "text" ? c.text : JSON.stringify(c);
  }
  await transport.terminateSession();
  out.deleted = transport.sessionId === undefined;
  await client.close();
  emit({ ok: true, ...out }, 0);
}

main().catch((e) => emit({ ok: false, error: String(e?.stack ?? e) }, 1));
