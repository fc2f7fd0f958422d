// Drives the real MCP Inspector 2.x web UI (npm @modelcontextprotocol/inspector 2.12.0,
// installed as inspector2) in headless Chromium (Debian's /usr/bin/chromium), served by
// `mcpgate inspector` itself, for the Rust test tests/tests/gateway/inspector_v2_ui.rs,
// which runs mcpgate with a catalogue of two servers: "demo" (mcpgate demo-server, stdio)
// and "web" (a Streamable HTTP server).
//
//   node tests/inspector/inspector_v2_ui.mjs <ui-url> <screenshot-prefix> <tag>
//
// Talks to the test in lines:
//   stdout "CALLED"       connected to "demo" through the switch of its card, listed its
//                         tools, called echo and saw the result, called notify (tag <tag>)
//                         and saw its log notifications in the Logs panel
//   stdout "RECONNECTED <n>"  the card's switch was turned off and on again n times, each
//                         time until the UI showed the state, and echo works again
//   stdin  "NEXT"         → disconnect "demo", connect "web", call echo there
//   stdout "HTTP"         it answered
//   stdin  "CLOSE"        → the browser is closed (without disconnecting)
//   stdout "OK"           every check passed; exit 0
//   stdout "FAIL …"       a check failed; exit 1 (screenshot -failure)

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [uiUrl, shots, tag] = process.argv.slice(2);
if (!uiUrl || !shots || !tag) {
  console.log("FAIL usage: inspector_v2_ui.mjs <ui-url> <screenshot-prefix> <tag>");
  process.exit(2);
}
const WAIT = 20_000;
const ROUNDS = 20;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const say = (line) => process.stdout.write(line + "\n");
const origin = new URL(uiUrl).origin;

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

const profile = mkdtempSync(join(tmpdir(), "mcpgate-inspector-v2-ui-"));
const watchdog = setTimeout(() => { say("FAIL watchdog: the browser run took over 240 s"); process.exit(1); }, 240_000);
let browser = null;
let page = null;
const problems = [];
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  page = await browser.newPage({ viewport: { width: 1440, height: 1000 }, deviceScaleFactor: 1, colorScheme: "light" });
  page.setDefaultTimeout(WAIT);
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    // The UI links web fonts from fonts.googleapis.com; this machine has no internet.
    if (m.type() === "error" && !m.text().includes("ERR_NAME_NOT_RESOLVED")) problems.push("console error: " + m.text());
  });
  const apiStatuses = [];
  page.on("request", (r) => {
    const u = r.url();
    // Everything the UI needs comes from mcpgate (web fonts aside).
    if (!u.startsWith(origin + "/") && !u.startsWith("data:") && !u.startsWith("https://fonts.")) problems.push("request to another origin: " + u);
  });
  page.on("response", (r) => {
    if (r.url().startsWith(origin + "/api/")) apiStatuses.push(r.status() + " " + r.request().method() + " " + new URL(r.url()).pathname);
  });

  await page.goto(uiUrl, { waitUntil: "load" });
  const switchLabel = (id) => `Connect or disconnect "${id}"`;
  const demo = "demo";
  const web = "web";
  await page.getByRole("switch", { name: switchLabel(demo) }).waitFor();
  await page.getByRole("switch", { name: switchLabel(web) }).waitFor();
  await page.screenshot({ path: shots + "-1-catalogue.png" });

  const tab = (name) => page.getByRole("tab", { name }).or(page.getByText(name, { exact: true })).first();
  // A server card's switch, turned to `on`; waits until the UI shows the state. (The
  // switch's input sits under its track, so the click is dispatched to the input itself.)
  async function setSwitch(id, on) {
    await tab("Servers").click();
    const sw = page.getByRole("switch", { name: switchLabel(id) });
    await sw.waitFor();
    if ((await sw.isChecked()) === on) return;
    await sw.dispatchEvent("click");
    await page.waitForFunction(([label, want]) => {
      const el = [...document.querySelectorAll('[role="switch"]')].find((e) => e.getAttribute("aria-label") === label);
      return el && el.checked === want && !el.disabled;
    }, [switchLabel(id), on], { timeout: WAIT });
    // The card says so too.
    const card = page.locator("div", { has: sw }).filter({ hasText: on ? "Connected" : "Disconnected" }).last();
    await card.waitFor();
  }
  async function callEcho(text) {
    await tab("Tools").click();
    await page.getByRole("button", { name: "echo", exact: true }).click();
    await page.getByRole("textbox", { name: "text" }).fill(text);
    await page.getByRole("button", { name: "Execute Tool" }).click();
    await page.getByText("Results", { exact: true }).waitFor();
    await page.getByText(text, { exact: true }).last().waitFor();
  }

  // 1. demo (stdio): connect, tools, echo, notify's log notifications.
  await setSwitch(demo, true);
  await page.screenshot({ path: shots + "-2-connected.png" });
  await tab("Tools").click();
  await page.getByRole("button", { name: "notify", exact: true }).waitFor();
  await callEcho("hello from the Inspector 2.x UI");
  await page.screenshot({ path: shots + "-3-result.png" });
  await page.getByRole("button", { name: "notify", exact: true }).click();
  await page.getByRole("textbox", { name: "tag" }).fill(tag);
  await page.getByRole("textbox", { name: "count" }).fill("2");
  await page.getByRole("button", { name: "Execute Tool" }).click();
  // The log notifications show in the Logs panel, with the tag the call carried.
  await page.getByText(tag).first().waitFor();
  await page.screenshot({ path: shots + "-4-notification.png" });
  say("CALLED");

  // 2. Reconnect: the switch off and on, 20 times.
  for (let i = 0; i < ROUNDS; i++) {
    await setSwitch(demo, false);
    await setSwitch(demo, true);
  }
  await callEcho("after " + ROUNDS + " reconnects");
  say("RECONNECTED " + ROUNDS);
  check((await nextLine(60_000)) === "NEXT", "expected NEXT");

  // 3. web (Streamable HTTP) from the catalogue.
  await setSwitch(demo, false);
  await setSwitch(web, true);
  await callEcho("hello over http");
  await page.screenshot({ path: shots + "-5-http.png" });
  say("HTTP");
  check((await nextLine(60_000)) === "CLOSE", "expected CLOSE");
  await browser.close();
  browser = null;
  const refused = apiStatuses.filter((s) => !/^2\d\d /.test(s));
  check(refused.length === 0, "API requests refused: " + refused.slice(0, 10).join(", "));
  check(problems.length === 0, "problems: " + problems.slice(0, 10).join(" | "));
  say("OK");
  clearTimeout(watchdog);
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
} catch (e) {
  say("FAIL " + (e && e.message ? e.message.split("\n")[0] : String(e)));
  if (problems.length) say("diagnostic: " + problems.slice(0, 20).join(" | "));
  try { if (page) await page.screenshot({ path: shots + "-failure.png" }); } catch {}
  try { if (browser) await browser.close(); } catch {}
  rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
