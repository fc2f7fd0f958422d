#!/usr/bin/env node
// Test launcher for the official @modelcontextprotocol/server-everything.
//
// Usage: [PORT=0] node tests/clients/everything_server.mjs <stdio|sse|streamableHttp>
//
// Runs the package's own dist/index.js unchanged, with three test-friendly tweaks:
//   * HTTP modes listen on 127.0.0.1 only (the upstream server calls
//     app.listen(PORT) with no host, i.e. all interfaces). Override with
//     EVERYTHING_HOST if you really need another address.
//   * PORT=0 (the default here; upstream defaults to 3001) picks a free port,
//     and the real port is announced in the ready line, so tests need no
//     port-probing race.
//   * console.log goes to stderr, so stdout carries nothing but the MCP stream
//     in stdio mode and nothing at all in the HTTP modes.
//   * EVERYTHING_EXIT_ON_STDIN_EOF=1 (HTTP modes only): exit when stdin reaches
//     EOF, so a server spawned with a piped stdin dies with the test process
//     even if nobody kills it. Leave unset when stdin is /dev/null.
//
// When the server is ready it prints ONE line to stderr:
//   MCPGATE_EVERYTHING_READY mode=streamableHttp port=43817 url=http://127.0.0.1:43817/mcp
//   MCPGATE_EVERYTHING_READY mode=sse port=43817 url=http://127.0.0.1:43817/sse
//   MCPGATE_EVERYTHING_READY mode=stdio
import net from "node:net";

const MODES = { stdio: null, sse: "/sse", streamableHttp: "/mcp" };
const mode = process.argv[2] ?? "stdio";
if (!(mode in MODES)) {
  console.error(`usage: node everything_server.mjs <stdio|sse|streamableHttp> (got ${JSON.stringify(mode)})`);
  process.exit(2);
}
const host = process.env.EVERYTHING_HOST || "127.0.0.1";
if (process.env.PORT === undefined || process.env.PORT === "") process.env.PORT = "0";

// Keep stdout clean: upstream uses console.log for request chatter.
console.log = (...args) => console.error(...args);

if (mode !== "stdio" && process.env.EVERYTHING_EXIT_ON_STDIN_EOF === "1") {
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("close", () => process.exit(0));
  process.stdin.resume();
}

if (mode !== "stdio") {
  const origListen = net.Server.prototype.listen;
  let announced = false;
  net.Server.prototype.listen = function (...args) {
    // express: app.listen(PORT, cb) -> http.Server.listen(PORT, cb)
    const first = args[0];
    const isPort = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
    if (isPort && typeof args[1] !== "string") {
      args.splice(1, 0, host);
      args[0] = Number(first);
    }
    this.once("listening", () => {
      if (announced) return;
      announced = true;
      const addr = this.address();
      const shownHost = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
      process.stderr.write(
        `MCPGATE_EVERYTHING_READY mode=${mode} port=${addr.port} url=http://${shownHost}:${addr.port}${MODES[mode]}\n`,
      );
    });
    return origListen.apply(this, args);
  };
}

// dist/index.js reads process.argv[2] itself, which is already the mode.
await import(new URL("./node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));

if (mode === "stdio") {
  // The stdio transport is attached synchronously by the time the import resolves.
  process.stderr.write("MCPGATE_EVERYTHING_READY mode=stdio\n");
}
