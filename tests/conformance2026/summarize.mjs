// Summarises scripts/conformance-2026 runs.
//
//   node summarize.mjs OUT_DIR META_JSON
//
// OUT_DIR/runs/<target>/server-<scenario>-<timestamp>/checks.json are the suite's results
// (`conformance server -o DIR`); META_JSON = {targets:[{name,url,exit_code}], suite, ...}.
// A scenario passes on a target when its checks hold no FAILURE (the suite's own verdict);
// no checks.json at all = "missing" (suite crashed or timed out). The scored/not-scored split
// comes from the suite's requirements/2026-07-28.yaml. Writes OUT_DIR/summary.json, prints a
// table, exits 0 when every scenario passing on "direct" also passes on every other target
// (with no other target: when every scored scenario passes directly), else 1; 2 on bad input.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [outDir, metaPath] = process.argv.slice(2);
if (!outDir || !metaPath) { console.error('usage: node summarize.mjs OUT_DIR META_JSON'); process.exit(2); }
const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
const here = path.dirname(new URL(import.meta.url).pathname);
const suiteDir = path.join(here, 'node_modules/@modelcontextprotocol/conformance');
const YAML = createRequire(path.join(suiteDir, 'package.json'))('yaml');
const req = YAML.parse(fs.readFileSync(path.join(suiteDir, 'requirements/2026-07-28.yaml'), 'utf8'));
const notScored = new Map((req.not_scored ?? []).filter((e) => e.leg === 'server').map((e) => [e.scenario, e.reason]));
const scenarios = [...req.server, ...notScored.keys()];

function results(target) {
  const dir = path.join(outDir, 'runs', target);
  const byScenario = {};
  for (const d of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const m = d.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
    const file = path.join(dir, d, 'checks.json');
    if (!m || !fs.existsSync(file)) continue;
    const checks = JSON.parse(fs.readFileSync(file, 'utf8'));
    const count = (s) => checks.filter((c) => c.status === s).length;
    byScenario[m[1]] = { status: count('FAILURE') ? 'fail' : 'pass', passed: count('SUCCESS'), failed: count('FAILURE'),
      failures: checks.filter((c) => c.status === 'FAILURE').map((c) => ({ id: c.id, message: (c.errorMessage ?? '').slice(0, 300) })) };
  }
  return byScenario;
}

const targets = meta.targets.map((t) => t.name);
const per = Object.fromEntries(targets.map((t) => [t, results(t)]));
const rows = scenarios.map((name) => ({
  name, scored: !notScored.has(name), ...(notScored.has(name) && { reason: notScored.get(name) }),
  results: Object.fromEntries(targets.map((t) => [t, per[t][name] ?? { status: 'missing' }])),
}));
// Record-only targets (the era bridge in front of a session-era server, and that server
// directly, where no 2026-07-28 scenario can run) are reported, never held against the
// gateway: the fixture's scenarios are not that server's surface.
const recordOnly = new Set((process.env.RECORD_ONLY ?? '').split(/\s+/).filter(Boolean));
const others = targets.filter((t) => t !== 'direct' && !recordOnly.has(t));
const regressions = [];
for (const r of rows)
  for (const t of others)
    if (r.results.direct?.status === 'pass' && r.results[t].status !== 'pass') regressions.push({ scenario: r.name, target: t });
const scoredDirectFail = rows.filter((r) => r.scored && r.results.direct?.status !== 'pass').map((r) => r.name);
const ok = others.length ? regressions.length === 0 : scoredDirectFail.length === 0;
const tally = (t, scored) => rows.filter((r) => r.scored === scored && r.results[t].status === 'pass').length;

const summary = { generated_at: new Date().toISOString(), requirements: '2026-07-28', ...meta,
  totals: Object.fromEntries(targets.map((t) => [t, { scored_pass: tally(t, true), scored: req.server.length,
    not_scored_pass: tally(t, false), not_scored: notScored.size }])),
  scenarios: rows, regressions, scored_failing_directly: scoredDirectFail, ok };
fs.writeFileSync(path.join(outDir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');

const label = (r) => r.name + (r.scored ? '' : ` (${r.reason})`);
const w = Math.max(...rows.map((r) => label(r).length)) + 2;
const mark = { pass: 'pass', fail: 'FAIL', missing: '-' };
console.log(['scenario'.padEnd(w), ...targets.map((t) => t.padEnd(9))].join(''));
for (const r of rows) console.log([label(r).padEnd(w), ...targets.map((t) => mark[r.results[t].status].padEnd(9))].join(''));
for (const t of targets) {
  const x = summary.totals[t];
  console.log(`${t}: scored ${x.scored_pass}/${x.scored}, not scored ${x.not_scored_pass}/${x.not_scored}`);
}
if (others.length) console.log(regressions.length ? `${regressions.length} scenario(s) pass directly but not through the gateway` : 'no regressions through the gateway');
process.exit(ok ? 0 : 1);
