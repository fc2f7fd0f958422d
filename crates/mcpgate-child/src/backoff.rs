//! Start backoff: a server whose children keep dying at start is not restarted at the
//! pace of its clients' retries. After `n` failed starts in a row the next start waits
//! `base · 2ⁿ⁻¹` (capped); a session opened before then is refused at once with how the
//! last child ended, and spawns nothing. One child that starts (writes its first line)
//! clears the record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The start records of every stdio command (one gateway's).
#[derive(Debug)]
pub struct Starts {
    base: Duration,
    cap: Duration,
    records: Mutex<HashMap<String, Arc<Record>>>,
}

impl Default for Starts {
    fn default() -> Self {
        Starts::new(Duration::from_millis(500), Duration::from_secs(30))
    }
}

/// Why a start is refused: the command is backing off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Failed starts in a row.
    pub failures: u32,
    /// Until the next start is allowed.
    pub retry_in: Duration,
    /// How the last child ended (status and stderr tail).
    pub last: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server failed to start {} time(s) in a row; next start in {:.1} s; last start: {}",
            self.failures,
            self.retry_in.as_secs_f64(),
            self.last
        )
    }
}

impl Starts {
    /// Backoff from `base` doubling up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Starts {
            base,
            cap,
            records: Mutex::new(HashMap::new()),
        }
    }

    /// Every command that failed to start and has not started since: the command, and
    /// how it stands.
    pub fn failing(&self) -> Vec<(Vec<String>, Standing)> {
        let m = match self.records.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        m.values()
            .filter_map(|r| r.standing().map(|s| (r.command.clone(), s)))
            .collect()
    }

    /// The record of the child that `key` describes whole (its command, environment,
    /// directory and containment: two servers that differ in any of them do not share a
    /// record), made on first use; `command` is what the admin API shows of it.
    pub fn record(&self, key: &str, command: &[String]) -> Arc<Record> {
        let mut m = match self.records.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(r) = m.get(key) {
            return r.clone();
        }
        let r = Arc::new(Record {
            base: self.base,
            cap: self.cap,
            command: command.to_vec(),
            state: Mutex::new(State::default()),
        });
        m.insert(key.to_owned(), r.clone());
        r
    }
}

/// How a command that keeps failing to start stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// Failed starts in a row.
    pub failures: u32,
    /// Until the next start is allowed (zero: allowed now).
    pub retry_in: Duration,
    /// How the last child ended (status and stderr tail).
    pub last: String,
}

/// One command's starts.
#[derive(Debug)]
pub struct Record {
    base: Duration,
    cap: Duration,
    command: Vec<String>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    until: Option<Instant>,
    last: String,
}

impl Record {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether a child may be started now. After failures, the first start past the
    /// wait is the one trial: the window is set again at once, so sessions arriving
    /// together cause one spawn, not one each; the trial's outcome then clears the
    /// record or extends the wait.
    pub fn admit(&self) -> Result<(), Refused> {
        let mut s = self.state();
        let now = Instant::now();
        match s.until {
            Some(until) if until > now => Err(Refused {
                failures: s.failures,
                retry_in: until - now,
                last: s.last.clone(),
            }),
            _ => {
                if s.failures > 0 {
                    s.until = Some(now + self.wait(s.failures));
                }
                Ok(())
            }
        }
    }

    /// The wait after `failures` failed starts in a row.
    fn wait(&self, failures: u32) -> Duration {
        let doubling = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
        self.base.saturating_mul(doubling).min(self.cap)
    }

    /// How it stands, if its last start failed.
    pub fn standing(&self) -> Option<Standing> {
        let s = self.state();
        (s.failures > 0).then(|| Standing {
            failures: s.failures,
            retry_in: s
                .until
                .map(|u| u.saturating_duration_since(Instant::now()))
                .unwrap_or_default(),
            last: s.last.clone(),
        })
    }

    /// A child started (it wrote its first line): the record is cleared.
    pub fn started(&self) {
        let mut s = self.state();
        if s.failures > 0 {
            *s = State::default();
        }
    }

    /// A child ended before it started; `how` says how. Returns the wait before the next.
    pub fn failed(&self, how: String) -> Duration {
        let mut s = self.state();
        s.failures = s.failures.saturating_add(1);
        let wait = self.wait(s.failures);
        s.until = Some(Instant::now() + wait);
        s.last = how;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_clears_on_a_start() {
        let starts = Starts::new(Duration::from_millis(100), Duration::from_millis(350));
        let r = starts.record("x|env", &["x".into()]);
        assert!(r.admit().is_ok());
        let waits: Vec<_> = (0..4)
            .map(|_| r.failed("exited with status 1".into()))
            .collect();
        assert_eq!(
            waits,
            [100, 200, 350, 350].map(Duration::from_millis).to_vec()
        );
        let refused = r.admit().err();
        assert_eq!(refused.as_ref().map(|e| e.failures), Some(4));
        assert_eq!(
            refused.map(|e| e.last),
            Some("exited with status 1".to_owned())
        );
        r.started();
        assert!(r.admit().is_ok());
        assert!(Arc::ptr_eq(&r, &starts.record("x|env", &["x".into()])));
        assert!(!Arc::ptr_eq(
            &r,
            &starts.record("x|other env", &["x".into()])
        ));
    }

    #[test]
    fn one_trial_start_past_the_wait() {
        let starts = Starts::new(Duration::from_millis(1), Duration::from_millis(1));
        let r = starts.record("y", &["y".into()]);
        r.failed("exited with status 1".into());
        std::thread::sleep(Duration::from_millis(5));
        assert!(r.admit().is_ok(), "the trial");
        assert!(r.admit().is_err(), "the others wait for the trial");
    }
}
