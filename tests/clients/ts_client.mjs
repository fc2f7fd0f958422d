#!/usr/bin/env node
// Drive an MCP server (or mcpgate) with the official TypeScript SDK client.
//
// Usage:
//   node tests/clients/ts_client.mjs <url> [--tool NAME] [--args JSON] [--sse]
//        [--no-terminate] [--allow-tool-error] [--header "Name: value"]... [--timeout MS]
//
// Streamable HTTP (default): initialize -> tools/list -> tools/call ->
// DELETE (transport.terminateSession()) -> close.
// --sse: legacy HTTP+SSE transport (GET <url> then POST to the announced
// endpoint); there is no DELETE in that transport, "terminated" is false.
//
// Prints exactly ONE JSON line on stdout:
//   {"ok":true,"transport":"streamableHttp"|"sse","sessionId":"...",
//    "protocolVersion":"...","serverInfo":{...},"tools":[...],
//    "callResult":{...},"terminated":true,"deleteStatus":200,
//    "notifications":[...methods received...]}
// or, on any failure, {"ok":false,"error":"..."} and exit code 1.
// A tool result with isError:true also counts as a failure (ok:false, exit 1,
// all the fields above still present) unless --allow-tool-error is given.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const USAGE =
  "usage: node ts_client.mjs <url> [--tool NAME] [--args JSON] [--sse] " +
  "[--no-terminate] [--allow-tool-error] [--header 'Name: value']... [--timeout MS]";

function emit(obj, code) {
  process.stdout.write(JSON.stringify(obj) + "\n", () => process.exit(code));
}

function describe(err) {
  if (!(err instanceof Error)) return String(err);
  let msg = `${err.name}: ${err.message}`;
  // undici's "fetch failed" hides the real reason (ECONNREFUSED, ...) in .cause
  if (err.cause) msg += ` (cause: ${describe(err.cause)})`;
  return msg;
}

function fail(err) {
  emit({ ok: false, error: describe(err) }, 1);
}

function parseArgs(argv) {
  const opts = {
    url: undefined,
    tool: "echo",
    args: undefined,
    sse: false,
    terminate: true,
    allowToolError: false,
    headers: {},
    timeoutMs: 30000,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${a}; ${USAGE}`);
      return argv[++i];
    };
    switch (a) {
      case "--tool":
        opts.tool = next();
        break;
      case "--args": {
        const raw = next();
        try {
          opts.args = JSON.parse(raw);
        } catch (e) {
          throw new Error(`--args is not valid JSON: ${e.message}`);
        }
        if (opts.args === null || typeof opts.args !== "object" || Array.isArray(opts.args)) {
          throw new Error("--args must be a JSON object");
        }
        break;
      }
      case "--sse":
        opts.sse = true;
        break;
      case "--no-terminate":
        opts.terminate = false;
        break;
      case "--allow-tool-error":
        opts.allowToolError = true;
        break;
      case "--header": {
        const h = next();
        const idx = h.indexOf(":");
        if (idx <= 0) throw new Error(`--header must look like 'Name: value', got ${JSON.stringify(h)}`);
        opts.headers[h.slice(0, idx).trim()] = h.slice(idx + 1).trim();
        break;
      }
      case "--timeout":
        opts.timeoutMs = Number(next());
        if (!Number.isFinite(opts.timeoutMs) || opts.timeoutMs <= 0) throw new Error("--timeout must be a positive number of ms");
        break;
      case "-h":
      case "--help":
        throw new Error(USAGE);
      default:
        if (a.startsWith("--")) throw new Error(`unknown flag ${a}; ${USAGE}`);
        if (opts.url !== undefined) throw new Error(`unexpected argument ${a}; ${USAGE}`);
        opts.url = a;
    }
  }
  if (opts.url === undefined) throw new Error(USAGE);
  if (opts.args === undefined) {
    opts.args = opts.tool === "echo" ? { message: "hello from ts" } : {};
  }
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const url = new URL(opts.url);

  // Observe the wire: the DELETE status, and (for legacy SSE) the session id
  // carried in the POST endpoint's query string.
  let deleteStatus;
  let sseSessionId;
  const observingFetch = async (input, init) => {
    const res = await fetch(input, init);
    const method = (init?.method ?? "GET").toUpperCase();
    if (method === "DELETE") deleteStatus = res.status;
    if (method === "POST" && opts.sse) {
      const sid = new URL(String(input instanceof Request ? input.url : input)).searchParams.get("sessionId");
      if (sid) sseSessionId = sid;
    }
    return res;
  };

  const requestInit = { headers: { ...opts.headers } };
  const transport = opts.sse
    ? new SSEClientTransport(url, {
        fetch: observingFetch,
        requestInit,
        eventSourceInit: { fetch: observingFetch, headers: { ...opts.headers } },
      })
    : new StreamableHTTPClientTransport(url, { fetch: observingFetch, requestInit });

  const client = new Client({ name: "mcpgate-ts-test-client", version: "0.0.0" }, { capabilities: {} });
  const notifications = [];
  client.fallbackNotificationHandler = async (n) => {
    notifications.push(n.method);
  };

  // Client.connect() hands the negotiated version to the transport (both
  // transports implement setProtocolVersion); record it there.
  let protocolVersion;
  const setProtocolVersion = transport.setProtocolVersion.bind(transport);
  transport.setProtocolVersion = (v) => {
    protocolVersion = v;
    setProtocolVersion(v);
  };

  await client.connect(transport);
  const sessionId = opts.sse ? sseSessionId : transport.sessionId;
  const serverInfo = client.getServerVersion();

  const listed = await client.listTools();
  const tools = listed.tools.map((t) => t.name);

  const callResult = await client.callTool({ name: opts.tool, arguments: opts.args });

  let terminated = false;
  if (!opts.sse && opts.terminate) {
    await transport.terminateSession();
    terminated = deleteStatus !== undefined && deleteStatus >= 200 && deleteStatus < 300;
  }
  await client.close();

  const out = {
    ok: true,
    transport: opts.sse ? "sse" : "streamableHttp",
    sessionId: sessionId ?? null,
    protocolVersion: protocolVersion ?? null,
    serverInfo: serverInfo ?? null,
    tools,
    callResult,
    terminated,
    deleteStatus: deleteStatus ?? null,
    notifications,
  };
  if (callResult?.isError && !opts.allowToolError) {
    out.ok = false;
    out.error = `tool ${opts.tool} returned isError`;
  }
  emit(out, out.ok ? 0 : 1);
}

let timer;
try {
  const opts = parseArgs(process.argv.slice(2));
  timer = setTimeout(() => fail(new Error(`timed out after ${opts.timeoutMs} ms`)), opts.timeoutMs);
  timer.unref();
} catch (e) {
  fail(e);
}
if (timer) main().catch(fail);
