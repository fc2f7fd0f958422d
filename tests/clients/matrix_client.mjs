#!/usr/bin/env node
// Feature matrix client: drives one MCP session (the everything server, directly or
// through mcpgate) through the protocol features a gateway has to carry in both
// directions, with the official TypeScript SDK.
//
// Usage: node tests/clients/matrix_client.mjs <url> [--sse]
//
// Streamable HTTP (default; <url> is the /mcp endpoint) or, with --sse, the legacy
// HTTP+SSE transport (<url> is the /sse endpoint). The client declares
// `sampling: {}` and `roots: {listChanged: true}` and answers
// `sampling/createMessage` and `roots/list` itself.
//
// Steps (each recorded as true or an error string):
//   initialize  connect; negotiated protocol version and server name recorded
//   toolsList   tools/list includes the capability-dependent tools
//   progress    trigger-long-running-operation with a progress token: >= 1
//               notifications/progress, then the result
//   sampling    trigger-sampling-request: the server asks the client to sample; the
//               tool result carries the client's answer
//   roots       the server's own roots/list request after `initialized` reaches the
//               client; get-roots-list shows the client's root
//   cancel      a 10 s trigger-long-running-operation aborted after 300 ms: the call
//               rejects at once, the notifications/cancelled POST is accepted, the
//               session still answers an echo
//   subscribe   resources/subscribe + toggle-subscriber-updates: a
//               notifications/resources/updated for the subscribed uri arrives
//   close       Streamable HTTP: DELETE (terminateSession) + close(); SSE: close()
//
// Prints exactly ONE JSON line on stdout:
//   {"ok":bool,"transport":"streamableHttp"|"sse","protocolVersion":"...",
//    "serverName":"...","steps":{name:true|"error"},"timingsMs":{name:ms},...}
// and exits 1 unless every step is true. Progress goes to stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import {
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const USAGE = "usage: node matrix_client.mjs <url> [--sse]";
const ROOT_URI = "file:///tmp/mcpgate-matrix";
const SAMPLED_TEXT = "mcpgate matrix: sampled by the client";
const TOTAL_TIMEOUT_MS = 25000;
const t0 = Date.now();

const out = {
  ok: false,
  transport: null,
  protocolVersion: null,
  serverName: null,
  steps: {},
  timingsMs: {},
  samplingCalls: 0,
  rootsCalls: 0,
  progress: [],
  resourceUpdates: [],
  cancelledPosts: [],
  deleteStatus: null,
  notifications: [],
  errors: [],
};

function emit(code) {
  out.totalMs = Date.now() - t0;
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(code));
}

function describe(err) {
  if (!(err instanceof Error)) return String(err);
  let msg = `${err.name}: ${err.message}`;
  if (err.cause) msg += ` (cause: ${describe(err.cause)})`;
  return msg;
}

const log = (msg) => process.stderr.write(`[matrix +${Date.now() - t0}ms] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

/** Polls `pred` every 20 ms for up to `ms`; returns its last value. */
async function waitFor(pred, ms) {
  const until = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > until) return pred();
    await sleep(20);
  }
  return true;
}

function textOf(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

async function step(name, fn) {
  const start = Date.now();
  try {
    await fn();
    out.steps[name] = true;
  } catch (e) {
    out.steps[name] = describe(e);
  }
  out.timingsMs[name] = Date.now() - start;
  log(`${name}: ${out.steps[name] === true ? "ok" : out.steps[name]} (${out.timingsMs[name]} ms)`);
  return out.steps[name] === true;
}

async function main() {
  const argv = process.argv.slice(2);
  const sse = argv.includes("--sse");
  const positional = argv.filter((a) => a !== "--sse");
  if (positional.length !== 1 || positional[0].startsWith("--")) throw new Error(USAGE);
  const url = new URL(positional[0]);
  out.transport = sse ? "sse" : "streamableHttp";

  // Observe the wire: DELETE status, and the status of every notifications/cancelled POST.
  const observingFetch = async (input, init) => {
    const res = await fetch(input, init);
    const method = (init?.method ?? "GET").toUpperCase();
    if (method === "DELETE") out.deleteStatus = res.status;
    if (method === "POST" && typeof init?.body === "string" && init.body.includes('"notifications/cancelled"')) {
      out.cancelledPosts.push(res.status);
    }
    return res;
  };
  const transport = sse
    ? new SSEClientTransport(url, { fetch: observingFetch, eventSourceInit: { fetch: observingFetch } })
    : new StreamableHTTPClientTransport(url, { fetch: observingFetch });
  const setProtocolVersion = transport.setProtocolVersion.bind(transport);
  transport.setProtocolVersion = (v) => {
    out.protocolVersion = v;
    setProtocolVersion(v);
  };

  const client = new Client(
    { name: "mcpgate-matrix-client", version: "0.0.0" },
    { capabilities: { sampling: {}, roots: { listChanged: true } } },
  );
  client.onerror = (e) => out.errors.push(describe(e));
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    out.samplingCalls++;
    return {
      role: "assistant",
      content: { type: "text", text: SAMPLED_TEXT },
      model: "mcpgate-matrix-model",
      stopReason: "endTurn",
    };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    out.rootsCalls++;
    out.rootsAtMs ??= Date.now() - t0;
    return { roots: [{ uri: ROOT_URI, name: "mcpgate matrix root" }] };
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => {
    out.resourceUpdates.push(n.params.uri);
  });
  client.fallbackNotificationHandler = async (n) => {
    out.notifications.push(n.method);
  };

  const connected = await step("initialize", async () => {
    await client.connect(transport);
    out.serverName = client.getServerVersion()?.name ?? null;
    check(out.protocolVersion, "no protocol version negotiated");
    check(out.serverName, "no serverInfo.name");
  });
  if (!connected) return;
  const initializedAt = Date.now();

  await step("toolsList", async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    out.tools = names.length;
    for (const t of [
      "echo",
      "trigger-long-running-operation",
      "toggle-subscriber-updates",
      "trigger-sampling-request",
      "get-roots-list",
    ]) {
      check(names.includes(t), `tools/list lacks ${t}: ${names.join(",")}`);
    }
  });

  await step("progress", async () => {
    const result = await client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 0.6, steps: 3 } },
      undefined,
      { onprogress: (p) => out.progress.push(p.progress), timeout: 10000 },
    );
    check(!result.isError, `tool error: ${textOf(result)}`);
    check(textOf(result).includes("Long running operation completed"), `unexpected result: ${textOf(result)}`);
    check(out.progress.length >= 1, "no notifications/progress received");
  });

  await step("sampling", async () => {
    const result = await client.callTool(
      { name: "trigger-sampling-request", arguments: { prompt: "say hello", maxTokens: 16 } },
      undefined,
      { timeout: 10000 },
    );
    check(!result.isError, `tool error: ${textOf(result)}`);
    check(out.samplingCalls >= 1, "the sampling handler never ran");
    check(textOf(result).includes(SAMPLED_TEXT), `result lacks the sampled text: ${textOf(result)}`);
  });

  await step("roots", async () => {
    // The server asks by itself ~350 ms after `initialized`.
    const asked = await waitFor(() => out.rootsCalls >= 1, Math.max(0, initializedAt + 4000 - Date.now()));
    check(asked, "the server's roots/list request never reached the client (4 s after initialized)");
    const result = await client.callTool({ name: "get-roots-list", arguments: {} }, undefined, { timeout: 10000 });
    check(!result.isError, `tool error: ${textOf(result)}`);
    check(textOf(result).includes(ROOT_URI), `get-roots-list lacks ${ROOT_URI}: ${textOf(result)}`);
  });

  await step("cancel", async () => {
    const ac = new AbortController();
    const start = Date.now();
    const call = client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 10, steps: 10 } },
      undefined,
      { signal: ac.signal, timeout: 20000 },
    );
    setTimeout(() => ac.abort(new Error("matrix: aborted by the client")), 300);
    let rejected = null;
    try {
      const r = await call;
      throw new Error(`the aborted call resolved: ${JSON.stringify(r)}`);
    } catch (e) {
      rejected = e;
    }
    const took = Date.now() - start;
    check(String(rejected?.message ?? rejected).includes("aborted by the client"), `unexpected rejection: ${describe(rejected)}`);
    check(took < 2000, `the aborted call took ${took} ms to reject`);
    // The SDK sends notifications/cancelled in the background; it must be accepted.
    const sent = await waitFor(() => out.cancelledPosts.length >= 1, 3000);
    check(sent, "no notifications/cancelled POST observed");
    check(out.cancelledPosts.every((s) => s >= 200 && s < 300), `notifications/cancelled got HTTP ${out.cancelledPosts}`);
    const failed = out.errors.filter((e) => e.includes("Failed to send cancellation"));
    check(failed.length === 0, failed.join("; "));
    const echo = await client.callTool({ name: "echo", arguments: { message: "after cancel" } }, undefined, { timeout: 5000 });
    check(textOf(echo) === "Echo: after cancel", `echo after cancel: ${JSON.stringify(echo)}`);
  });

  await step("subscribe", async () => {
    const resources = (await client.listResources()).resources;
    check(resources.length > 0, "resources/list is empty");
    const uri = resources[0].uri;
    out.subscribedUri = uri;
    await client.subscribeResource({ uri });
    const toggled = await client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, { timeout: 5000 });
    check(textOf(toggled).includes("Started"), `toggle-subscriber-updates: ${textOf(toggled)}`);
    const got = await waitFor(() => out.resourceUpdates.includes(uri), 12000);
    // Stop the 5 s timer again (best effort; the session ends right after).
    await client.callTool({ name: "toggle-subscriber-updates", arguments: {} }, undefined, { timeout: 5000 }).catch(() => {});
    check(got, `no notifications/resources/updated for ${uri} within 12 s (got ${JSON.stringify(out.resourceUpdates)})`);
  });

  await step("close", async () => {
    if (!sse) {
      await transport.terminateSession();
      check(out.deleteStatus !== null && out.deleteStatus >= 200 && out.deleteStatus < 300, `DELETE got HTTP ${out.deleteStatus}`);
    }
    await client.close();
  });
}

const timer = setTimeout(() => {
  out.steps.timeout = `the whole run exceeded ${TOTAL_TIMEOUT_MS} ms`;
  emit(1);
}, TOTAL_TIMEOUT_MS);
timer.unref();

main()
  .catch((e) => {
    out.steps.main = describe(e);
  })
  .finally(() => {
    const steps = Object.values(out.steps);
    out.ok = steps.length > 0 && steps.every((s) => s === true) && out.steps.close === true;
    emit(out.ok ? 0 : 1);
  });
