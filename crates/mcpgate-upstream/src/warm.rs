//! Warm starts: for a stdio target with `warm = N`, N children are started ahead of
//! their sessions, so that a session's `initialize` does not wait for a process start.
//! A session takes one (never shared: it is moved into the session's upstream, as a cold
//! child is) and a replacement is started in the background. A warm child is started but
//! not initialized: the client's `initialize` (its capabilities, its version) is the
//! first thing it reads.
//!
//! Warm children count toward `max_stdio_children`; none is started beyond it, or while
//! the command backs off. One that died while waiting is discarded when a session would
//! have taken it (and counted as a failed start if it exited on its own).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use crate::children::{Children, Ready, Spawn};
use crate::target::Target;

/// The warm pools of one connector, one per warm target.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pools {
    list: Arc<Mutex<Vec<Arc<Pool>>>>,
}

#[derive(Debug)]
struct Pool {
    target: Target,
    want: usize,
    ready: Mutex<VecDeque<Ready>>,
    /// Starts under way (so two refills do not overshoot `want`).
    filling: AtomicUsize,
}

/// Where a pool's children come from: the connector's children, the task owner, and the
/// cap on live children.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) children: Children,
    pub(crate) tasks: TaskTracker,
    pub(crate) max: i64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Pools {
    /// Makes `target`'s pool (if it is warm and has none yet) and starts filling it.
    pub(crate) fn ensure(&self, target: &Target, src: &Source) {
        let want = match target {
            Target::Stdio { warm, .. } if *warm > 0 => *warm,
            _ => return,
        };
        let pool = {
            let mut list = lock(&self.list);
            if list.iter().any(|p| p.target == *target) {
                return;
            }
            let p = Arc::new(Pool {
                target: target.clone(),
                want,
                ready: Mutex::new(VecDeque::new()),
                filling: AtomicUsize::new(0),
            });
            list.push(p.clone());
            p
        };
        refill(pool, src);
    }

    /// Drops the pools of targets not in `targets`: their waiting children's groups are
    /// killed (as a child nobody took is, see `Held`).
    pub(crate) fn retain(&self, targets: &[&Target]) {
        let dropped: Vec<Arc<Pool>> = {
            let mut list = lock(&self.list);
            let (keep, drop): (Vec<_>, Vec<_>) =
                list.drain(..).partition(|p| targets.contains(&&p.target));
            *list = keep;
            drop
        };
        for p in dropped {
            lock(&p.ready).clear();
        }
    }

    /// A live warm child of `target`, if its pool has one; a replacement is started.
    pub(crate) fn take(&self, target: &Target, src: &Source) -> Option<Ready> {
        let pool = lock(&self.list)
            .iter()
            .find(|p| p.target == *target)?
            .clone();
        let got = loop {
            let Some(mut r) = lock(&pool.ready).pop_front() else {
                break None;
            };
            match r.child.try_wait() {
                Ok(None) => break Some(r),
                // Exited on its own: a start that failed (the command backs off). Killed
                // by a signal (an operator, the OOM killer): discarded only.
                Ok(Some(status)) if status.code().is_some() => {
                    let how = format!("a warm child ended before its session ({status})");
                    let wait = r.held.record.failed(how);
                    warn!(%status, "a warm stdio child ended while waiting; its next start waits {wait:?}");
                }
                Ok(Some(status)) => {
                    warn!(%status, "a warm stdio child was killed while waiting; discarded");
                }
                Err(e) => warn!(error = %e, "a warm stdio child cannot be waited for; discarded"),
            }
        };
        refill(pool, src);
        got
    }
}

/// Starts children until the pool holds (or is starting) `want`, in a task of its own.
fn refill(pool: Arc<Pool>, src: &Source) {
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let src = src.clone();
    src.tasks.clone().spawn(async move {
        loop {
            let have = lock(&pool.ready).len() + pool.filling.load(Ordering::Acquire);
            if have >= pool.want || src.children.live() >= src.max {
                return;
            }
            pool.filling.fetch_add(1, Ordering::AcqRel);
            let started = launch(&pool.target, &src);
            pool.filling.fetch_sub(1, Ordering::AcqRel);
            match started {
                Some(r) => lock(&pool.ready).push_back(r),
                None => return,
            }
            // One fork per turn: other tasks of this worker run between starts.
            tokio::task::yield_now().await;
        }
    });
}

fn launch(target: &Target, src: &Source) -> Option<Ready> {
    let Target::Stdio {
        command,
        env,
        cwd,
        env_clear,
        contain,
        ..
    } = target
    else {
        return None;
    };
    let how = Spawn {
        command,
        env,
        env_clear: *env_clear,
        cwd: cwd.as_deref(),
        contain,
    };
    match src.children.launch(how, &src.tasks, true) {
        Ok(r) => Some(r),
        Err(e) => {
            debug!(error = %e, "no warm stdio child started");
            None
        }
    }
}
