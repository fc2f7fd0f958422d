// Drives the real MCP Inspector web UI (npm @modelcontextprotocol/inspector, its built
// client/dist, served here statically on loopback) in headless Chromium (Debian's
// /usr/bin/chromium) against `mcpgate inspector`, for the Rust test
// tests/tests/gateway/inspector_ui.rs, which runs the gateway.
//
//   node tests/inspector/inspector_ui.mjs <screenshot-prefix> <expected-command> <expected-args>
//
// Talks to the test in lines:
//   stdout "UI <origin>"   the UI is served at <origin> (the test starts mcpgate with it)
//   stdin  "OPEN <url>"    the ready URL mcpgate printed (proxy address + token prefilled)
//   stdout "CALLED"        connected through mcpgate, listed the tools, called echo, saw the
//                          result (screenshots -1-connected, -2-tools, -3-result)
//   stdout "STORM <clicks> <ms>"  the Restart/Reconnect button was clicked <clicks> times in
//                          a row, each click as soon as the button could take it
//   stdout "LIVE <n>"      the UI is connected again (its tools work) and holds <n> open
//                          proxy streams (/stdio requests that neither finished nor failed)
//   stdin  "NEXT"          → the button is clicked 20 times within one task (a burst: every
//                          click starts a disconnect and a connect before any finishes; the
//                          browser opens at most 6 connections per host, so the UI is left
//                          holding SSE streams whose initialize POSTs can never be sent)
//   stdout "BURST <clicks>" then, once things are quiet, "LIVE <n>" again
//   stdin  "NEXT"          → the page is reloaded (the UI drops what it held), connected,
//                          and a tool is called again: "LIVE <n>" again
//   stdin  "CLOSE"         → the browser is closed
//   stdout "OK"            every check passed; exit 0
//   stdout "FAIL …"        a check failed; exit 1 (screenshot -failure)
// Every other stdout line is diagnostic.

import { createServer } from "node:http";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { extname, join, resolve, sep } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const [shots, expectCommand, expectArgs] = process.argv.slice(2);
if (!shots || !expectCommand || expectArgs === undefined) {
  console.log("FAIL usage: inspector_ui.mjs <screenshot-prefix> <expected-command> <expected-args>");
  process.exit(2);
}
const WAIT = 20_000;
const CLICKS = 20;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const say = (line) => process.stdout.write(line + "\n");
const here = fileURLToPath(new URL(".", import.meta.url));
const DIST = resolve(here, "node_modules/@modelcontextprotocol/inspector/client/dist");

// --- the UI, served statically on loopback --------------------------------------------
const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
  ".ico": "image/x-icon", ".json": "application/json", ".woff2": "font/woff2",
};
const ui = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  let file = resolve(DIST, "." + path);
  const inside = file === DIST || file.startsWith(DIST + sep);
  let ok = false;
  try { ok = inside && statSync(file).isFile(); } catch { ok = false; }
  // A single-page app: every other path is index.html.
  if (!ok) file = join(DIST, "index.html");
  try {
    const body = readFileSync(file);
    res.writeHead(200, { "content-type": TYPES[extname(file)] || "application/octet-stream",
      "cache-control": "no-store" });
    res.end(body);
  } catch (e) {
    res.writeHead(500); res.end(String(e));
  }
});
await new Promise((r) => ui.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${ui.address().port}`;

// --- lines from the test ---------------------------------------------------------------
const stdinLines = [];
let stdinWaiter = null;
createInterface({ input: process.stdin }).on("line", (l) => {
  if (stdinWaiter) { const w = stdinWaiter; stdinWaiter = null; w(l.trim()); } else stdinLines.push(l.trim());
});
function nextLine(timeoutMs) {
  if (stdinLines.length) return Promise.resolve(stdinLines.shift());
  return new Promise((resolve_, reject) => {
    const t = setTimeout(() => { stdinWaiter = null; reject(new Error("no line from the test in " + timeoutMs + " ms")); }, timeoutMs);
    stdinWaiter = (l) => { clearTimeout(t); resolve_(l); };
  });
}
function check(cond, msg) { if (!cond) throw new Error(msg); }

say("UI " + origin);
const profile = mkdtempSync(join(tmpdir(), "mcpgate-inspector-ui-"));
const watchdog = setTimeout(() => { say("FAIL watchdog: the browser run took over 240 s"); process.exit(1); }, 240_000);

let context = null;
let page = null;
const problems = [];
try {
  const open = await nextLine(60_000);
  check(open.startsWith("OPEN "), "expected OPEN <url>, got " + open);
  const readyUrl = open.slice(5);
  const proxy = new URL(readyUrl).searchParams.get("MCP_PROXY_FULL_ADDRESS");
  check(proxy, "the ready URL has no MCP_PROXY_FULL_ADDRESS: " + readyUrl);

  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1440, height: 1000 },
    deviceScaleFactor: 1,
    colorScheme: "light",
  });
  page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });

  // Every request to the proxy, and whether it is still open (an SSE stream).
  const open_ = new Map(); // request → {url, method}
  const proxyStatuses = [];
  page.on("request", (r) => {
    const u = r.url();
    if (u.startsWith(proxy + "/")) open_.set(r, { url: u, method: r.method() });
    else if (!u.startsWith(origin + "/") && !u.startsWith("data:")) problems.push("request to another origin: " + u);
  });
  page.on("response", (r) => {
    if (!r.url().startsWith(proxy + "/")) return;
    proxyStatuses.push(r.status() + " " + r.request().method() + " " + new URL(r.url()).pathname);
    const x = open_.get(r.request());
    if (x) x.answered = true;
  });
  const done = (r) => open_.delete(r);
  page.on("requestfinished", done);
  page.on("requestfailed", done);
  // Open streams: answered, not finished. (Requests still waiting for one of the browser's
  // six connections per host have reached nobody yet.)
  const liveStreams = () => [...open_.values()].filter((x) => x.answered && x.method === "GET" && new URL(x.url).pathname === "/stdio").length;
  const waiting = () => [...open_.values()].filter((x) => !x.answered).length;

  await page.goto(readyUrl, { waitUntil: "load" });
  // /config prefilled the sidebar: transport STDIO, the command and its arguments.
  await page.waitForFunction(
    ([c, a]) => document.querySelector("#command-input")?.value === c && document.querySelector("#arguments-input")?.value === a,
    [expectCommand, expectArgs], { timeout: WAIT });
  say("prefilled from /config: " + expectCommand + " " + expectArgs);
  const status = page.locator("span", { hasText: /^(Connected|Disconnected|Connection Error.*|Error Connecting.*)$/ }).first();

  await page.getByRole("button", { name: "Connect", exact: true }).click();
  await page.getByText("Connected", { exact: true }).waitFor();
  await page.screenshot({ path: shots + "-1-connected.png" });
  say("connected");

  // Tools: list, pick echo, run it, see the result.
  await page.getByRole("tab", { name: "Tools" }).click();
  await page.getByRole("button", { name: "List Tools" }).click();
  const echo = page.getByText("Returns its text.").first();
  await echo.waitFor();
  await page.screenshot({ path: shots + "-2-tools.png" });
  await echo.click();
  const message = "hello from the real Inspector UI through mcpgate";
  await page.locator("textarea#text").fill(message);
  await page.getByRole("button", { name: "Run Tool" }).click();
  await page.getByText("Tool Result:").waitFor();
  await page.getByText("Success", { exact: true }).waitFor();
  await page.getByText(message).last().waitFor();
  await page.screenshot({ path: shots + "-3-result.png" });
  check(liveStreams() === 1, "expected 1 open proxy stream after connecting, got " + liveStreams());
  say("CALLED");

  // The Restart (stdio) / Reconnect button, 20 times as fast as it can be clicked: each
  // click disconnects and connects again, and the next click lands as soon as the button
  // is there (often while the previous connect is still under way).
  const button = page.locator('[data-testid="connect-button"]');
  const label = (await button.innerText()).trim();
  const t0 = Date.now();
  let clicks = 0;
  for (let i = 0; i < CLICKS; i++) {
    await button.click({ timeout: WAIT });
    clicks++;
  }
  const stormMs = Date.now() - t0;
  say(`STORM ${clicks} ${stormMs} (button "${label}")`);

  // Settle: the UI ends connected (or is connected once more by hand), and stays so.
  const settle = async () => {
    await page.waitForTimeout(300);
    for (let i = 0; i < 100; i++) {
      const s = (await status.innerText().catch(() => "")).trim();
      if (s === "Connected") return s;
      if (s !== "" && s !== "Disconnected" && i > 25) return s;
      await page.waitForTimeout(100);
    }
    return (await status.innerText().catch(() => "")).trim();
  };
  // The UI is connected afterwards (connected once more by hand if the clicks left it
  // disconnected) and still works through the gateway.
  const stillWorks = async (what, shot) => {
    const after = await settle();
    say("status after the " + what + ": " + after);
    if (after !== "Connected") {
      await page.getByRole("button", { name: "Connect", exact: true }).click();
      await page.getByText("Connected", { exact: true }).waitFor();
    }
    await page.waitForTimeout(1000);
    await page.getByRole("tab", { name: "Tools" }).click();
    const clear = page.getByRole("button", { name: "Clear", exact: true }).first();
    if (await clear.isEnabled().catch(() => false)) await clear.click();
    await page.getByRole("button", { name: "List Tools" }).click();
    await page.getByText("Returns its text.").first().click();
    const text = "after the " + what;
    await page.locator("textarea#text").fill(text);
    await page.getByRole("button", { name: "Run Tool" }).click();
    await page.getByText('"' + text + '"').last().waitFor();
    await page.screenshot({ path: shots + "-" + shot + ".png" });
    await page.waitForTimeout(500);
    say("proxy answers: " + [...new Set(proxyStatuses)].join(", "));
    say("LIVE " + liveStreams());
  };
  await stillWorks(clicks + " restarts", "4-after-restarts");

  const next = await nextLine(60_000);
  check(next === "NEXT", "expected NEXT, got " + next);
  const burst = await page.evaluate((n) => {
    const b = document.querySelector('[data-testid="connect-button"]');
    if (!b) return 0;
    for (let i = 0; i < n; i++) b.click();
    return n;
  }, CLICKS);
  check(burst === CLICKS, "the button was not there for the burst");
  say("BURST " + burst);
  await page.waitForTimeout(3000);
  say("status after the burst: " + (await status.innerText().catch(() => "?")).trim());
  await page.screenshot({ path: shots + "-5-after-burst.png" });
  say("proxy answers: " + [...new Set(proxyStatuses)].join(", "));
  say("requests still waiting for a connection: " + waiting());
  say("LIVE " + liveStreams());

  const again = await nextLine(60_000);
  check(again === "NEXT", "expected NEXT, got " + again);
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(
    ([c, a]) => document.querySelector("#command-input")?.value === c && document.querySelector("#arguments-input")?.value === a,
    [expectCommand, expectArgs], { timeout: WAIT });
  await page.getByRole("button", { name: "Connect", exact: true }).click();
  await page.getByText("Connected", { exact: true }).waitFor();
  await stillWorks("reload", "6-after-reload");

  const close = await nextLine(60_000);
  check(close === "CLOSE", "expected CLOSE, got " + close);
  await context.close();
  context = null;
  if (problems.length) say("diagnostic: " + problems.slice(0, 20).join(" | "));
  say("OK");
  clearTimeout(watchdog);
  ui.close();
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
} catch (e) {
  say("FAIL " + (e && e.message ? e.message.split("\n")[0] : String(e)));
  if (problems.length) say("diagnostic: " + problems.slice(0, 20).join(" | "));
  try { if (page) await page.screenshot({ path: shots + "-failure.png" }); } catch { }
  try { if (context) await context.close(); } catch { }
  rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
