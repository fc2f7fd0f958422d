//! The Markdown report: header, throughput/latency table, CPU table, session
//! churn, idle-session memory, and the targets with met / not met.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::client::Upstream;
use crate::idle::IdleRss;
use crate::load::{Outcome, Shape};
use crate::machine::Machine;
use crate::pair::Timing;

/// One echo cell, measured directly and through the gateway.
pub(crate) struct EchoRow {
    /// The upstream server.
    pub(crate) upstream: Upstream,
    /// How sessions are used.
    pub(crate) shape: Shape,
    /// Concurrency.
    pub(crate) c: usize,
    /// Direct to the upstream (watched: [upstream]).
    pub(crate) direct: Outcome,
    /// Through the gateway (watched: [upstream, gateway]).
    pub(crate) gw: Outcome,
    /// Through nginx (watched: [upstream, nginx]), when it ran.
    pub(crate) nginx: Option<Outcome>,
}

/// Session create+DELETE, directly and through the gateway.
pub(crate) struct Churn {
    /// Concurrency.
    pub(crate) c: usize,
    /// Direct to the testkit (watched: [upstream]).
    pub(crate) direct: Outcome,
    /// Through the gateway (watched: [upstream, gateway]).
    pub(crate) gw: Outcome,
    /// Through nginx (watched: [upstream, nginx]), when it ran.
    pub(crate) nginx: Option<Outcome>,
}

/// Everything one run produced.
pub(crate) struct Report {
    /// Where it ran.
    pub(crate) machine: Machine,
    /// Warm-up, window and slices per cell.
    pub(crate) timing: Timing,
    /// Echo cells.
    pub(crate) rows: Vec<EchoRow>,
    /// Session churn, if run.
    pub(crate) churn: Option<Churn>,
    /// Idle-session memory, if run.
    pub(crate) idle: Option<IdleRss>,
    /// Fraction of the machine busy during 1 s before the run (other load).
    pub(crate) baseline_busy: f64,
    /// Extra gateway environment (diagnostic runs only).
    pub(crate) gateway_env: Vec<(String, String)>,
    /// TOML appended to the gateway's config (`--gateway-toml`).
    pub(crate) gateway_toml: Option<String>,
    /// Parts that were skipped, and why.
    pub(crate) skipped: Vec<String>,
    /// `nginx -v` of the baseline, when it ran.
    pub(crate) nginx: Option<String>,
    /// ns per 2026-07-28 request for the gateway's envelope parse + header check,
    /// measured in this process.
    pub(crate) validation_ns: f64,
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("–".to_owned(), |d| {
        format!("{:.3}", d.as_secs_f64() * 1e3)
    })
}

fn us(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.1}"))
}

/// Req/s, marked when the cell had errors.
fn rate(o: &Outcome) -> String {
    let mark = if o.error_count() > 0 { " ⚠" } else { "" };
    format!("{:.0}{mark}", o.rate())
}

fn added_p50(r: &EchoRow) -> Option<f64> {
    let (d, g) = (r.direct.quantile(0.5)?, r.gw.quantile(0.5)?);
    Some((g.as_secs_f64() - d.as_secs_f64()) * 1e3)
}

fn ratio(r: &EchoRow) -> Option<f64> {
    let d = r.direct.rate();
    (d > 0.0).then(|| r.gw.rate() / d)
}

fn nginx_ratio(r: &EchoRow) -> Option<f64> {
    let d = r.direct.rate();
    let n = r.nginx.as_ref()?;
    (d > 0.0).then(|| n.rate() / d)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("–".to_owned(), f)
}

impl Report {
    /// Renders the whole report.
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        self.header(&mut s);
        self.echo_table(&mut s);
        self.cpu_table(&mut s);
        self.split_table(&mut s);
        self.churn_table(&mut s);
        let _ = writeln!(
            s,
            "## 2026-07-28 validation\n\nThe gateway's per-request check of a 2026-07-28 request (parse the envelope, read `_meta`, compare `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` with the body) costs **{:.0} ns** per request on this machine (in-process, 200,000 iterations of a `tools/call echo`).\n",
            self.validation_ns
        );
        self.idle_section(&mut s);
        self.targets(&mut s);
        self.errors(&mut s);
        s
    }

    fn header(&self, s: &mut String) {
        let m = &self.machine;
        let _ = writeln!(s, "# mcpgate benchmark\n");
        let _ = writeln!(
            s,
            "- machine: {} cores (available_parallelism), CPU `{}`, Linux {}",
            m.cores, m.cpu_model, m.kernel
        );
        let _ = writeln!(
            s,
            "- mcpgate: {}, binary built {}; workspace at commit {} when run",
            m.mcpgate, m.mcpgate_built, m.commit
        );
        let _ = writeln!(s, "- node: {}", m.node);
        if let Some(v) = &self.nginx {
            let _ = writeln!(
                s,
                "- baseline: {v}, one process (`master_process off`, 1 worker), `proxy_pass` to a \
                 keep-alive upstream pool, `proxy_buffering off`, no access log; measured in the \
                 same interleaved slices as direct and the gateway"
            );
        }
        let _ = writeln!(
            s,
            "- each cell: {:.1} s measured per side (direct, via gateway), in {} interleaved \
             slice pair(s) with {:.1} s unmeasured warm-up before each slice; loopback only; \
             one keep-alive HTTP/1.1 connection per worker",
            self.timing.window.as_secs_f64(),
            self.timing.slices.max(1),
            self.timing.warmup.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "- the load generator, the upstream and the gateway all run on this same \
             {}-core machine: the load generator competes with them for CPU",
            m.cores
        );
        let _ = writeln!(
            s,
            "- machine busy before the run (1 s, nothing of ours running): {:.0}%",
            self.baseline_busy * 100.0
        );
        for (k, v) in &self.gateway_env {
            let _ = writeln!(s, "- **diagnostic run**: gateway started with {k}={v}");
        }
        if let Some(t) = &self.gateway_toml {
            let _ = writeln!(
                s,
                "- **feature run**: the gateway's config adds `{}`",
                t.replace('\n', "⏎")
            );
        }
        s.push('\n');
        for why in &self.skipped {
            let _ = writeln!(s, "- skipped: {why}");
        }
        if !self.skipped.is_empty() {
            s.push('\n');
        }
    }

    fn echo_table(&self, s: &mut String) {
        let _ = writeln!(s, "## tools/call echo: direct vs through the gateway\n");
        let _ = writeln!(
            s,
            "| upstream | shape | c | direct req/s | gateway req/s | ratio | nginx req/s | nginx ratio | direct p50 (ms) | gw p50 (ms) | added p50 (ms) | nginx p50 (ms) | direct p99 (ms) | gw p99 (ms) |"
        );
        let _ = writeln!(
            s,
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.upstream.label(),
                r.shape.label(),
                r.c,
                rate(&r.direct),
                rate(&r.gw),
                opt(ratio(r), |x| format!("{x:.2}")),
                r.nginx.as_ref().map_or("–".to_owned(), rate),
                opt(nginx_ratio(r), |x| format!("{x:.2}")),
                ms(r.direct.quantile(0.5)),
                ms(r.gw.quantile(0.5)),
                opt(added_p50(r), |x| format!("{x:+.3}")),
                ms(r.nginx.as_ref().and_then(|n| n.quantile(0.5))),
                ms(r.direct.quantile(0.99)),
                ms(r.gw.quantile(0.99)),
            );
        }
        let _ = writeln!(s, "\n⚠ = the cell had errors (listed at the end).\n");
    }

    fn cpu_table(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## CPU per request (µs of CPU time per successful call)\n"
        );
        let _ = writeln!(
            s,
            "| upstream | shape | c | gateway | nginx | gateway ÷ nginx | upstream direct | upstream via gw | loadgen direct | loadgen via gw | gateway ctx switches/req | machine busy direct | machine busy via gw | other load direct | other load via gw |"
        );
        let _ = writeln!(
            s,
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        );
        for r in &self.rows {
            let n = r.nginx.as_ref().and_then(|n| n.cpu_us_per_op(1));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0}% | {:.0}% | {:.2} | {:.2} |",
                r.upstream.label(),
                r.shape.label(),
                r.c,
                us(r.gw.cpu_us_per_op(1)),
                us(n),
                opt(
                    r.gw.cpu_us_per_op(1).zip(n).map(|(g, n)| g / n),
                    |x| format!("{x:.2}")
                ),
                us(r.direct.cpu_us_per_op(0)),
                us(r.gw.cpu_us_per_op(0)),
                us(r.direct.self_cpu_us_per_op()),
                us(r.gw.self_cpu_us_per_op()),
                r.gw.ctx_per_op(1)
                    .map_or("–".to_owned(), |x| format!("{x:.2}")),
                r.direct.busy * 100.0,
                r.gw.busy * 100.0,
                r.direct.other_cores,
                r.gw.other_cores,
            );
        }
        let _ = writeln!(
            s,
            "\nother load = cores' worth of CPU used during the window by processes other than \
             the load generator, the upstream and the gateway (noise from the rest of the machine).\n"
        );
    }

    /// User and kernel CPU and allocations per request, gateway beside nginx.
    fn split_table(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "## User and kernel CPU, allocations per request (proxy process)\n"
        );
        let _ = writeln!(
            s,
            "| upstream | shape | c | gateway user µs | gateway sys µs | nginx user µs | nginx sys µs | user ÷ nginx | sys ÷ nginx | gateway allocs/req | nginx allocs/req |"
        );
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.rows {
            let n = r.nginx.as_ref();
            let nu = n.and_then(|n| n.user_us_per_op(1));
            let ns = n.and_then(|n| n.sys_us_per_op(1));
            let (gu, gs) = (r.gw.user_us_per_op(1), r.gw.sys_us_per_op(1));
            let per = |v: Option<f64>| opt(v, |x| format!("{x:.1}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.upstream.label(),
                r.shape.label(),
                r.c,
                us(gu),
                us(gs),
                us(nu),
                us(ns),
                opt(gu.zip(nu).map(|(g, n)| g / n), |x| format!("{x:.2}")),
                opt(gs.zip(ns).map(|(g, n)| g / n), |x| format!("{x:.2}")),
                per(r.gw.allocs_per_op()),
                per(n.and_then(Outcome::allocs_per_op)),
            );
        }
        let counted = self.rows.iter().any(|r| r.gw.allocs.is_some());
        let _ = writeln!(
            s,
            "\n{}\n",
            if counted {
                "allocs = libc malloc + calloc + realloc calls of the proxy process (uprobes, \
                 `--allocs`); the probes' traps inflate this run's CPU figures."
            } else {
                "allocs not counted in this run (`--allocs` counts them)."
            }
        );
    }

    fn churn_table(&self, s: &mut String) {
        let Some(ch) = &self.churn else { return };
        let _ = writeln!(
            s,
            "## Session create+DELETE (initialize → notifications/initialized → DELETE), testkit upstream, c={}\n",
            ch.c
        );
        let _ = writeln!(
            s,
            "| path | sessions/s | p50 cycle (ms) | p99 cycle (ms) | errors | gateway CPU µs/session | upstream CPU µs/session |"
        );
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|");
        let mut paths = vec![
            ("direct", &ch.direct, None),
            ("via gateway", &ch.gw, ch.gw.cpu_us_per_op(1)),
        ];
        if let Some(n) = &ch.nginx {
            paths.push((
                "via nginx (proxy CPU in the gateway column)",
                n,
                n.cpu_us_per_op(1),
            ));
        }
        for (name, o, gw_cpu) in paths {
            let _ = writeln!(
                s,
                "| {name} | {:.0} | {} | {} | {} | {} | {} |",
                o.rate(),
                ms(o.quantile(0.5)),
                ms(o.quantile(0.99)),
                o.error_count(),
                us(gw_cpu),
                us(o.cpu_us_per_op(0)),
            );
        }
        s.push('\n');
    }

    fn idle_section(&self, s: &mut String) {
        let Some(i) = &self.idle else { return };
        let _ = writeln!(
            s,
            "## Gateway memory with {} idle sessions (fresh gateway, testkit upstream)\n",
            i.wanted
        );
        let _ = writeln!(s, "| | gateway VmRSS (KiB) | gateway open fds |");
        let _ = writeln!(s, "|---|--:|--:|");
        for (what, kib, fds) in &i.points {
            let _ = writeln!(s, "| {what} | {kib} | {fds} |");
        }
        let _ = writeln!(
            s,
            "\n- round 1 opened {} of {} sessions in {:.2} s ({:.0}/s, c=32)",
            i.opened,
            i.wanted,
            i.open_secs,
            i.opened as f64 / i.open_secs.max(1e-9)
        );
        let _ = writeln!(
            s,
            "- gateway: **{} KiB per idle session** (round 1); upstream testkit for comparison: {} KiB per session",
            us(i.kib_per_session()),
            us(i.upstream_kib_per_session())
        );
        let _ = writeln!(
            s,
            "- gateway peak over {} round(s): {} KiB per session ((highest RSS − before) / {}); \
             memory freed by DELETE stays in the allocator, so RSS after DELETE does not drop\n",
            (i.points.len().saturating_sub(1)) / 2,
            us(i.peak_kib_per_session()),
            i.wanted
        );
    }

    fn targets(&self, s: &mut String) {
        let _ = writeln!(s, "## Targets\n");
        let _ = writeln!(s, "| target | measured | met |");
        let _ = writeln!(s, "|---|---|---|");
        let rows = |u: Upstream| self.rows.iter().filter(move |r| r.upstream == u);
        let vs_nginx: Vec<(f64, f64, &EchoRow)> = self
            .rows
            .iter()
            .filter_map(|r| {
                let n = r.nginx.as_ref()?.cpu_us_per_op(1)?;
                Some((r.gw.cpu_us_per_op(1)?, n, r))
            })
            .collect();
        let worst = vs_nginx
            .iter()
            .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        target(
            s,
            "gateway CPU per proxied request ≤ nginx's (same run)",
            worst.map(|(g, n, r)| {
                let all_met = vs_nginx.iter().all(|(g, n, _)| g <= n);
                let what = format!(
                    "worst {:.2}× ({g:.1} vs {n:.1} µs, {} / {} / c={}); {} of {} cells met",
                    g / n,
                    r.upstream.label(),
                    r.shape.label(),
                    r.c,
                    vs_nginx.iter().filter(|(g, n, _)| g <= n).count(),
                    vs_nginx.len()
                );
                (what, all_met)
            }),
        );
        let describe = |(x, r): (f64, &EchoRow), goal: f64| {
            let what = format!("worst ratio {x:.2} ({}, c={})", r.shape.label(), r.c);
            (what, x >= goal)
        };
        target(
            s,
            "≥ 0.5× direct req/s against the testkit at c=16 and c=64",
            worst_ratio(rows(Upstream::Testkit).filter(|r| r.c >= 16)).map(|w| describe(w, 0.5)),
        );
        target(
            s,
            "≥ 0.95× direct req/s in front of the Node everything server, every concurrency",
            worst_ratio(rows(Upstream::Everything)).map(|w| describe(w, 0.95)),
        );
        let c1: Vec<(f64, &EchoRow)> = self
            .rows
            .iter()
            .filter(|r| r.c == 1)
            .filter_map(|r| added_p50(r).map(|x| (x, r)))
            .collect();
        let node_c1 = c1
            .iter()
            .filter(|(_, r)| r.upstream == Upstream::Everything)
            .map(|(x, _)| *x)
            .max_by(f64::total_cmp);
        target(
            s,
            "p50 added ≤ 0.1 ms at c=1 in front of the Node everything server (all c=1 cells listed)",
            node_c1.map(|worst| {
                let list: Vec<String> = c1
                    .iter()
                    .map(|(x, r)| {
                        format!("{} / {}: {x:+.3} ms", r.upstream.label(), r.shape.label())
                    })
                    .collect();
                (list.join("; "), worst <= 0.1)
            }),
        );
        target(
            s,
            "≥ 10,000 session create+DELETE/s (through the gateway)",
            self.churn.as_ref().map(|c| {
                let r = c.gw.rate();
                (
                    format!("{r:.0}/s (direct: {:.0}/s)", c.direct.rate()),
                    r >= 10_000.0,
                )
            }),
        );
        target(
            s,
            "≤ 8 KiB RSS per idle session",
            self.idle
                .as_ref()
                .and_then(|i| Some((i.kib_per_session()?, i.peak_kib_per_session()?)))
                .map(|(k, peak)| {
                    let what = format!("{k:.1} KiB (peak over rounds: {peak:.1} KiB)");
                    (what, k <= 8.0)
                }),
        );
        // SSE answers against JSON answers from the same server at the same load: the
        // gateway's CPU per request in the same shape and concurrency.
        let sse: Vec<(f64, &EchoRow)> = rows(Upstream::TestkitSse)
            .filter_map(|r| {
                let json = rows(Upstream::Testkit).find(|t| t.shape == r.shape && t.c == r.c)?;
                Some((r.gw.cpu_us_per_op(1)? / json.gw.cpu_us_per_op(1)?, r))
            })
            .collect();
        let worst_sse = sse.iter().max_by(|a, b| a.0.total_cmp(&b.0));
        target(
            s,
            "SSE-answer path ≤ 1.2× the JSON-answer path's gateway CPU per request (testkit, same load)",
            worst_sse.map(|(x, r)| {
                let what = format!("worst {x:.2}× ({}, c={})", r.shape.label(), r.c);
                (what, *x <= 1.2)
            }),
        );
        s.push('\n');
    }

    fn errors(&self, s: &mut String) {
        let mut lines = Vec::new();
        for r in &self.rows {
            for (path, o) in [
                ("direct", Some(&r.direct)),
                ("gateway", Some(&r.gw)),
                ("nginx", r.nginx.as_ref()),
            ] {
                let Some(o) = o else { continue };
                push_errors(
                    &mut lines,
                    &format!(
                        "{} / {} / c={} / {path}",
                        r.upstream.label(),
                        r.shape.label(),
                        r.c
                    ),
                    &o.errors,
                );
            }
        }
        if let Some(c) = &self.churn {
            push_errors(&mut lines, "session churn / direct", &c.direct.errors);
            push_errors(&mut lines, "session churn / gateway", &c.gw.errors);
            if let Some(n) = &c.nginx {
                push_errors(&mut lines, "session churn / nginx", &n.errors);
            }
        }
        if let Some(i) = &self.idle {
            push_errors(&mut lines, "idle sessions", &i.errors);
        }
        let _ = writeln!(s, "## Errors\n");
        if lines.is_empty() {
            let _ = writeln!(s, "None.");
        }
        for l in lines {
            let _ = writeln!(s, "- {l}");
        }
    }
}

/// The row with the lowest gateway ÷ direct ratio.
fn worst_ratio<'a>(rows: impl Iterator<Item = &'a EchoRow>) -> Option<(f64, &'a EchoRow)> {
    rows.filter_map(|r| ratio(r).map(|x| (x, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

fn target(s: &mut String, name: &str, measured: Option<(String, bool)>) {
    let (what, met) = match measured {
        Some((w, true)) => (w, "yes"),
        Some((w, false)) => (w, "**no**"),
        None => ("not measured".to_owned(), "–"),
    };
    let _ = writeln!(s, "| {name} | {what} | {met} |");
}

fn push_errors(lines: &mut Vec<String>, cell: &str, errors: &BTreeMap<String, u64>) {
    for (msg, n) in errors.iter().take(5) {
        lines.push(format!("{cell}: {n} × `{msg}`"));
    }
    if errors.len() > 5 {
        lines.push(format!("{cell}: … {} more kinds", errors.len() - 5));
    }
}
