// Drives mcpgate's admin dashboard in headless Chromium (Debian's /usr/bin/chromium) for
// the Rust test tests/tests/gateway/dashboard.rs, which runs the gateway and the sessions.
//
//   node tests/browser/dashboard.mjs <dashboard-url#token=…> <screenshot-prefix> <prefix-A> <prefix-B>
//
// Writes <screenshot-prefix>-1-listed.png, -2-b-gone.png, -3-a-ended.png,
// -4-wrong-token.png (and -failure.png when something goes wrong). Talks to the test in lines:
//   stdout "ROWS"      rows for A and B are shown (and the charts have data)
//   stdin  "B_DELETED" the test has ended B through its client (DELETE /mcp)
//                      → the script asserts B's row disappears, then clicks "End" on A
//   stdout "A_ENDED"   A's row is gone after the click (the DELETE answered 200)
//   stdout "OK"        every check passed; exit 0
//   stdout "FAIL …"    a check failed; exit 1
// Every other stdout line is diagnostic.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [url, shots, prefixA, prefixB] = process.argv.slice(2);
if (!url || !shots || !prefixA || !prefixB) {
  console.log("FAIL usage: dashboard.mjs <url#token=…> <screenshot-prefix> <prefix-A> <prefix-B>");
  process.exit(2);
}

const WAIT = 15_000;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const say = (line) => process.stdout.write(line + "\n");

// Lines from the test, one at a time.
const stdinLines = [];
let stdinWaiter = null;
createInterface({ input: process.stdin }).on("line", (l) => {
  if (stdinWaiter) { const w = stdinWaiter; stdinWaiter = null; w(l.trim()); } else stdinLines.push(l.trim());
});
function nextLine(timeoutMs) {
  if (stdinLines.length) return Promise.resolve(stdinLines.shift());
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { stdinWaiter = null; reject(new Error("no line from the test in " + timeoutMs + " ms")); }, timeoutMs);
    stdinWaiter = (l) => { clearTimeout(t); resolve(l); };
  });
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

const profile = mkdtempSync(join(tmpdir(), "mcpgate-dashboard-"));
// The whole run is bounded even if Chromium hangs.
const watchdog = setTimeout(() => { say("FAIL watchdog: the browser run took over 120 s"); process.exit(1); }, 120_000);

let context = null;
let page = null;
const problems = [];
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1360, height: 900 },
    deviceScaleFactor: 1,
    colorScheme: "light",
  });
  page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(WAIT);
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push("console error: " + m.text());
  });
  // Only the admin origin may be contacted: the page is self-contained.
  const origin = new URL(url).origin;
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(origin + "/") && !u.startsWith("data:")) problems.push("request to another origin: " + u);
  });

  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector('body[data-state="live"]');
  // The token left the address bar; it lives in sessionStorage.
  check(!page.url().includes("token="), "the token stays in the URL: " + page.url());
  const rowA = `#sessions tr[data-session="${prefixA}"]`;
  const rowB = `#sessions tr[data-session="${prefixB}"]`;
  await page.waitForSelector(rowA);
  await page.waitForSelector(rowB);
  check(await page.locator(`button[data-end="${prefixA}"]`).isVisible(), "no end button for A");
  // Let a few samples in so the charts have something to draw.
  await page.waitForFunction(() => Number(document.body.dataset.samples || 0) >= 6, null, { timeout: 20_000 });
  const paths = await page.locator("#chart-sessions path[data-series]").count();
  check(paths >= 1, "the sessions chart draws no series");
  check((await page.textContent(`${rowA} td.id`)).startsWith(prefixA), "A's row shows another id");
  await page.screenshot({ path: `${shots}-1-listed.png`, fullPage: true });
  say("ROWS");

  const line = await nextLine(30_000);
  check(line === "B_DELETED", "unexpected line from the test: " + line);
  await page.waitForSelector(rowB, { state: "detached" });
  check(await page.locator(rowA).count() === 1, "A's row went away with B's");
  say("B row gone");
  await page.screenshot({ path: `${shots}-2-b-gone.png`, fullPage: true });

  await page.click(`button[data-end="${prefixA}"]`);
  await page.waitForSelector(rowA, { state: "detached" });
  // The row is removed on the DELETE's 200; the next poll must not bring it back.
  await page.waitForTimeout(1500);
  check(await page.locator(rowA).count() === 0, "A's row came back");
  say("A_ENDED");
  // The effective configuration, redacted: the token is not in it.
  await page.click("#config-panel summary");
  await page.waitForFunction(() => document.getElementById("config").textContent.includes("<redacted>"));
  const token = new URL(url).hash.replace(/^#token=/, "");
  check(!(await page.textContent("#config")).includes(token), "the config shows the token");
  await page.mouse.move(0, 0);
  await page.screenshot({ path: `${shots}-3-a-ended.png`, fullPage: true });

  // A wrong token: the page asks for one and shows no data.
  const other = await context.newPage();
  other.on("pageerror", (e) => problems.push("page error (wrong token): " + e.message));
  await other.goto(url.replace(/#token=.*/, "#token=not-the-token"), { waitUntil: "load" });
  await other.waitForSelector('body[data-state="login"]');
  check((await other.textContent("#login-error")).includes("rejected"), "no message for a wrong token");
  check(await other.locator("#app").isHidden(), "data shown without a valid token");
  await other.screenshot({ path: `${shots}-4-wrong-token.png` });
  await other.close();

  check(problems.length === 0, problems.join("; "));
  say("OK");
  clearTimeout(watchdog);
  await context.close();
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
} catch (e) {
  if (page) {
    try { await page.screenshot({ path: `${shots}-failure.png`, fullPage: true }); } catch (_) { /* best effort */ }
  }
  say("FAIL " + String(e && e.message || e).split("\n")[0] + (problems.length ? " | " + problems.join("; ") : ""));
  try { if (context) await context.close(); } catch (_) { /* best effort */ }
  rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
