//! The gateway's RSS over time: samples, medians over parts of the load, the slope.

/// One RSS sample: seconds since the load started, KiB, and sessions open then.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) t: f64,
    pub(crate) rss: u64,
    pub(crate) sessions: f64,
}

/// The median (0 for none).
pub(crate) fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Median RSS of the samples taken between `from` and `to` (fractions of the load).
pub(crate) fn window(samples: &[Sample], secs: f64, from: f64, to: f64) -> u64 {
    median(
        samples
            .iter()
            .filter(|s| s.t >= from * secs && s.t <= to * secs)
            .map(|s| s.rss)
            .collect(),
    )
}

/// Least-squares slope of RSS over time, in KiB per minute.
pub(crate) fn slope_kib_per_min(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mt = samples.iter().map(|s| s.t).sum::<f64>() / n;
    let mr = samples.iter().map(|s| s.rss as f64).sum::<f64>() / n;
    let num: f64 = samples
        .iter()
        .map(|s| (s.t - mt) * (s.rss as f64 - mr))
        .sum();
    let den: f64 = samples.iter().map(|s| (s.t - mt).powi(2)).sum();
    if den == 0.0 { 0.0 } else { num / den * 60.0 }
}

/// KiB as `12.3 MiB`.
pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}
