// Summarises the MCP conformance suite's result directories for scripts/conformance.
//
//   node summarize.mjs OUT_DIR META_JSON
//
// OUT_DIR/runs/<target>/server-<scenario>-<timestamp>/checks.json are the suite's own
// results (written by `conformance server -o DIR`); META_JSON describes the run (targets,
// urls, scenario list, versions, comparisons). Writes OUT_DIR/<target>.json per target,
// OUT_DIR/summary.json and OUT_DIR/summary.md, prints a comparison table, and exits
//   0  the baselines hold and no scenario passes on a baseline target but fails through
//      the gateway,
//   1  at least one such regression (dns-rebinding-protection is only reported,
//      unless meta.requireDnsRebinding is set: then every gateway target must pass it),
//      or a baseline that does not hold: a baseline target with no results, a scenario
//      missing on it (the suite crashed or timed out), or, for a run of the whole suite
//      (meta.fullSuite), fewer scenarios passing on it than KNOWN_BASELINE_PASS says
//      (without this, a server or suite that fails everywhere shows no regression),
//   2  bad input.
// Plain Node (>= 18), no dependencies.

import fs from 'node:fs';
import path from 'node:path';

const [outDir, metaPath] = process.argv.slice(2);
if (!outDir || !metaPath) {
  console.error('usage: node summarize.mjs OUT_DIR META_JSON');
  process.exit(2);
}
const meta = JSON.parse(fs.readFileSync(metaPath, 'utf8'));
const DNS = 'dns-rebinding-protection';
// Scenarios that pass on each baseline target with the pinned suite (0.1.16), everything
// server and reference server (docs/CONFORMANCE.md); raise a number when a server passes
// more, never lower it to make a run pass.
const KNOWN_BASELINE_PASS = { direct: 11, reference: 31 };

// Status of one scenario from its checks, matching the suite's own verdict (a scenario
// fails iff it has a FAILURE check; warnings do not fail a server scenario) but telling
// apart a scenario that passed no check at all (only INFO/WARNING: "inconclusive").
function classify(checks) {
  const count = (s) => checks.filter((c) => c.status === s).length;
  const success = count('SUCCESS');
  const failure = count('FAILURE');
  const warning = count('WARNING');
  const info = count('INFO');
  let status = 'pass';
  if (failure > 0) status = 'fail';
  else if (success === 0) status = 'inconclusive';
  const brief = (c) => ({
    id: c.id,
    message: c.errorMessage || c.description,
  });
  return {
    status,
    success,
    failure,
    warning,
    info,
    failures: checks.filter((c) => c.status === 'FAILURE').map(brief),
    warnings: checks.filter((c) => c.status === 'WARNING').map(brief),
    passed_checks: checks.filter((c) => c.status === 'SUCCESS').map((c) => c.id),
  };
}

// The newest result directory of each scenario (a scenario re-run after a timeout
// leaves a second, later directory).
function loadTarget(name) {
  const dir = path.join(outDir, 'runs', name);
  const latest = new Map();
  const entries = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  for (const e of entries) {
    const m = /^server-(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z)$/.exec(e);
    if (!m) continue;
    const [, scenario, stamp] = m;
    const file = path.join(dir, e, 'checks.json');
    if (!fs.existsSync(file)) continue;
    const prev = latest.get(scenario);
    if (!prev || prev.stamp < stamp) latest.set(scenario, { stamp, file, dir: e });
  }
  const scenarios = {};
  for (const s of meta.scenarios) {
    const hit = latest.get(s);
    if (!hit) {
      scenarios[s] = {
        status: 'missing',
        success: 0,
        failure: 0,
        warning: 0,
        info: 0,
        failures: [{ id: s, message: 'no result: the suite crashed or timed out on this scenario' }],
        warnings: [],
        passed_checks: [],
      };
      continue;
    }
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(hit.file, 'utf8'));
    } catch (e) {
      checks = [{ id: s, status: 'FAILURE', errorMessage: `unreadable checks.json: ${e.message}` }];
    }
    scenarios[s] = { ...classify(checks), result_dir: path.join('runs', name, hit.dir) };
  }
  return scenarios;
}

const results = {};
for (const t of meta.targets) {
  const scenarios = loadTarget(t.name);
  const counts = {};
  for (const v of Object.values(scenarios)) counts[v.status] = (counts[v.status] || 0) + 1;
  results[t.name] = scenarios;
  const doc = {
    target: t.name,
    description: t.description,
    url: t.url,
    suite_exit_code: t.exit_code ?? null,
    generated_at: meta.generated_at,
    versions: meta.versions,
    counts,
    scenarios,
  };
  fs.writeFileSync(path.join(outDir, `${t.name}.json`), JSON.stringify(doc, null, 2) + '\n');
}

// Regressions: pass on the baseline, anything but pass through the gateway.
const regressions = [];
const reported = [];
const notes = [];
for (const cmp of meta.comparisons) {
  const base = results[cmp.baseline];
  for (const g of cmp.gateways) {
    const gw = results[g];
    if (!base || !gw) continue;
    for (const s of meta.scenarios) {
      const b = base[s];
      const r = gw[s];
      if (b.status === 'pass' && r.status !== 'pass') {
        const item = {
          scenario: s,
          baseline: cmp.baseline,
          gateway: g,
          baseline_status: b.status,
          gateway_status: r.status,
          failures: r.failures,
        };
        if (s === DNS) (meta.requireDnsRebinding ? regressions : reported).push(item);
        else regressions.push(item);
      } else if (b.status === r.status) {
        // Same verdict; note checks that passed on the baseline but not here.
        const lost = b.passed_checks.filter((id) => !r.passed_checks.includes(id));
        if (lost.length > 0) {
          notes.push({ scenario: s, baseline: cmp.baseline, gateway: g, checks_not_passed: lost });
        }
      }
      if (b.status !== 'pass' && r.status === 'pass') {
        notes.push({
          scenario: s,
          baseline: cmp.baseline,
          gateway: g,
          note: `${b.status} on ${cmp.baseline} but pass through ${g}`,
        });
      }
    }
  }
}
// With --require-dns-rebinding the gateway must pass dns-rebinding-protection on its own
// (it is the gateway's Host/Origin check that counts), whatever the baseline did.
if (meta.requireDnsRebinding) {
  for (const cmp of meta.comparisons) {
    for (const g of cmp.gateways) {
      const r = results[g]?.[DNS];
      const b = results[cmp.baseline]?.[DNS];
      if (!r || r.status === 'pass' || b?.status === 'pass') continue; // pass, or counted above
      regressions.push({
        scenario: DNS,
        baseline: cmp.baseline,
        gateway: g,
        baseline_status: b?.status ?? 'not run',
        gateway_status: r.status,
        failures: r.failures,
      });
    }
  }
}
// The baselines themselves: every one compared against ran, no scenario is missing on it,
// and (whole suite) at least the known number of scenarios pass on it.
const baselineFailures = [];
for (const b of [...new Set(meta.comparisons.map((c) => c.baseline))]) {
  const base = results[b];
  if (!base) {
    baselineFailures.push(`${b}: no results (the target did not run)`);
    continue;
  }
  const missing = meta.scenarios.filter((s) => base[s].status === 'missing');
  if (missing.length > 0) baselineFailures.push(`${b}: missing (the suite crashed or timed out): ${missing.join(', ')}`);
  const passed = meta.scenarios.filter((s) => base[s].status === 'pass').length;
  const known = KNOWN_BASELINE_PASS[b];
  if (meta.fullSuite && known !== undefined && passed < known) {
    baselineFailures.push(`${b}: ${passed} scenarios pass, ${known} are known to`);
  }
}
const dns = Object.fromEntries(meta.targets.map((t) => [t.name, results[t.name][DNS]?.status]));

// Table: one row per scenario, one column per target.
const names = meta.targets.map((t) => t.name);
const mark = { pass: 'pass', fail: 'FAIL', inconclusive: 'n/a', missing: 'MISSING' };
const cell = (v) => {
  const m = mark[v.status] || v.status;
  const n = `${v.success}/${v.success + v.failure}`;
  return v.status === 'missing' ? m : `${m} ${n}`;
};
const rows = meta.scenarios.map((s) => [s, ...names.map((n) => cell(results[n][s]))]);
const header = ['scenario', ...names];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r) => r.map((c, i) => c.padEnd(widths[i])).join('  ');
console.log(line(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));
const totals = names.map((n) => {
  const v = Object.values(results[n]);
  return `${n}: ${v.filter((x) => x.status === 'pass').length} pass, ${v.filter((x) => x.status === 'fail').length} fail, ${v.filter((x) => x.status === 'inconclusive').length} n/a, ${v.filter((x) => x.status === 'missing').length} missing`;
});
console.log('');
for (const t of totals) console.log(t);
console.log('');
console.log('(cell: verdict, then SUCCESS checks / SUCCESS+FAILURE checks; n/a = no FAILURE but no SUCCESS either, which the suite counts as passed)');

const md = [];
md.push(`| scenario | ${names.join(' | ')} |`);
md.push(`| --- | ${names.map(() => '---').join(' | ')} |`);
for (const r of rows) md.push(`| \`${r[0]}\` | ${r.slice(1).join(' | ')} |`);
fs.writeFileSync(path.join(outDir, 'summary.md'), md.join('\n') + '\n');

const summary = {
  generated_at: meta.generated_at,
  versions: meta.versions,
  targets: meta.targets,
  comparisons: meta.comparisons,
  regressions,
  baseline_failures: baselineFailures,
  reported_not_fatal: reported,
  notes,
  dns_rebinding_protection: dns,
  totals,
};
fs.writeFileSync(path.join(outDir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');

console.log('');
console.log(`dns-rebinding-protection: ${names.map((n) => `${n}=${dns[n]}`).join(', ')}` +
  (meta.requireDnsRebinding ? ' (required)' : ' (reported only; pass --require-dns-rebinding to enforce)'));
for (const n of notes) {
  console.log(`note: ${n.scenario} (${n.baseline} vs ${n.gateway}): ` +
    (n.note ?? `same verdict, but checks passed only on ${n.baseline}: ${n.checks_not_passed.join(', ')}`));
}
for (const r of reported) {
  console.log(`reported: ${r.scenario} passes on ${r.baseline} but is ${r.gateway_status} through ${r.gateway}: ` +
    r.failures.map((f) => `[${f.id}] ${f.message}`).join('; '));
}
if (baselineFailures.length > 0) {
  console.log('');
  console.log(`BASELINE FAILURES (${baselineFailures.length}): a comparison against these means nothing`);
  for (const b of baselineFailures) console.log(`  ${b}`);
}
if (regressions.length > 0) {
  console.log('');
  console.log(`REGRESSIONS (${regressions.length}): pass on the baseline (or required), not through the gateway`);
  for (const r of regressions) {
    console.log(`  ${r.scenario}: ${r.baseline}=${r.baseline_status} ${r.gateway}=${r.gateway_status}`);
    for (const f of r.failures) console.log(`    - [${f.id}] ${f.message}`);
  }
}
if (regressions.length > 0 || baselineFailures.length > 0) process.exit(1);
console.log('');
console.log('no regressions: every scenario that passes on a baseline also passes through the gateway' +
  (reported.length && !meta.requireDnsRebinding ? ` (except ${DNS}, reported above)` : ''));
