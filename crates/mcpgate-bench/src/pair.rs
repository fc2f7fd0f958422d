//! Direct vs through the gateway, measured in interleaved slices (direct,
//! gateway, direct, gateway, …) so that load from the rest of the machine
//! falls on both sides alike.

use std::time::Duration;

use anyhow::Result;

use crate::client::Target;
use crate::load::{self, Outcome, Plan, Work};
use crate::procs::Proc;

/// Durations of each cell.
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    /// Unmeasured time before each slice.
    pub(crate) warmup: Duration,
    /// Measured time per side, split over `slices`.
    pub(crate) window: Duration,
    /// How many direct/gateway slice pairs.
    pub(crate) slices: u32,
}

/// The endpoints of a comparison: the upstream (direct), the gateway in front of it, and
/// nginx in front of it as the baseline when there is one.
pub(crate) struct Endpoints<'a> {
    /// The upstream process and its MCP URL.
    pub(crate) up: (&'a Proc, &'a str),
    /// The gateway process and its MCP URL.
    pub(crate) gw: (&'a Proc, &'a str),
    /// nginx and its MCP URL.
    pub(crate) nginx: Option<(&'a Proc, &'a str)>,
}

/// One cell's outcomes.
pub(crate) struct Measured {
    /// Direct (watched: [upstream]).
    pub(crate) direct: Outcome,
    /// Through the gateway (watched: [upstream, gateway]).
    pub(crate) gw: Outcome,
    /// Through nginx (watched: [upstream, nginx]).
    pub(crate) nginx: Option<Outcome>,
}

/// Measures `work` at `concurrency` directly, through the gateway and through nginx.
///
/// Watched CPU: direct `[upstream]`, via gateway `[upstream, gateway]`, via nginx
/// `[upstream, nginx]`.
pub(crate) async fn compare(
    ends: &Endpoints<'_>,
    work: Work,
    concurrency: usize,
    timing: Timing,
    name: &str,
) -> Result<Measured> {
    let slices = timing.slices.max(1);
    let slice = Timing {
        window: timing.window / slices,
        ..timing
    };
    let (up, gw) = (ends.up.0.pid(), ends.gw.0.pid());
    let mut direct = Outcome::default();
    let mut via = Outcome::default();
    let mut nginx = ends.nginx.map(|_| Outcome::default());
    for _ in 0..slices {
        direct.merge(cell(ends.up.1, work, concurrency, slice, vec![up]).await?);
        via.merge(cell(ends.gw.1, work, concurrency, slice, vec![up, gw]).await?);
        if let (Some((p, url)), Some(n)) = (ends.nginx, nginx.as_mut()) {
            n.merge(cell(url, work, concurrency, slice, vec![up, p.pid()]).await?);
        }
    }
    log(&format!("{name} direct"), &direct);
    log(&format!("{name} via {}", ends.gw.0.name()), &via);
    if let (Some((p, _)), Some(n)) = (ends.nginx, &nginx) {
        log(&format!("{name} via {}", p.name()), n);
    }
    Ok(Measured {
        direct,
        gw: via,
        nginx,
    })
}

/// Unmeasured load on both paths, so JIT (Node) and pools are warm before the
/// first measured cell.
pub(crate) async fn prewarm(ends: &Endpoints<'_>, work: Work, secs: Duration) -> Result<()> {
    let t = Timing {
        warmup: Duration::ZERO,
        window: secs,
        slices: 1,
    };
    cell(ends.up.1, work, 16, t, Vec::new()).await?;
    cell(ends.gw.1, work, 16, t, Vec::new()).await?;
    if let Some((_, url)) = ends.nginx {
        cell(url, work, 16, t, Vec::new()).await?;
    }
    Ok(())
}

/// Runs one slice; a slice that cannot start is recorded as failed.
async fn cell(
    url: &str,
    work: Work,
    concurrency: usize,
    timing: Timing,
    watch: Vec<u32>,
) -> Result<Outcome> {
    let plan = Plan {
        target: Target::parse(url)?,
        work,
        concurrency,
        warmup: timing.warmup,
        window: timing.window,
        watch,
    };
    Ok(match load::run(&plan).await {
        Ok(o) => o,
        Err(e) => Outcome::failed(&e),
    })
}

fn log(name: &str, out: &Outcome) {
    eprintln!(
        "mcpgate-bench: {name}: {:.0}/s, p50 {:.3} ms, p99 {:.3} ms, errors {}",
        out.rate(),
        out.quantile(0.5).map_or(0.0, |d| d.as_secs_f64() * 1e3),
        out.quantile(0.99).map_or(0.0, |d| d.as_secs_f64() * 1e3),
        out.error_count()
    );
}
