//! Opening dedicated upstream sessions over a transport.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::children::{Children, Spawn};
use crate::client::{Clients, header_map};
use crate::endpoint::Endpoint;
use crate::error::{ProtocolError, UpstreamError};
use crate::http_state::Resume;
use crate::sink::Opening;
use crate::target::Target;
use crate::timeouts::Timeouts;
use crate::upstream::Upstream;
use crate::warm::{Pools, Source};
use crate::{http, legacy_sse, stdio};

/// How a new upstream session starts.
#[derive(Debug, Clone, Default)]
pub enum Start {
    /// An ordinary new session.
    #[default]
    Fresh,
    /// A sealed Streamable HTTP session: new (`session: None`), or one the upstream
    /// already has, resumed from a sealed id — nothing is sent until the next request.
    Sealed(Resume),
}

/// Opens upstream sessions. One per gateway: it owns the HTTP connection pools (one per
/// distinct [`HttpOptions`]; the only thing sessions share upstream) and counts live stdio
/// children.
#[derive(Debug, Clone)]
pub struct Connector {
    pub(crate) clients: Clients,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    children: Children,
    max_children: i64,
    pools: Pools,
    /// Owns every task an upstream starts (stream readers, stdio pipes and supervisors).
    tasks: TaskTracker,
}

impl Connector {
    /// A connector with the given timeouts; `max_line` bounds one stdio line.
    pub fn new(timeouts: Timeouts, max_line: usize) -> Self {
        Connector {
            clients: Clients::default(),
            timeouts,
            max_line,
            children: Children::default(),
            max_children: i64::MAX,
            pools: Pools::default(),
            tasks: TaskTracker::new(),
        }
    }

    /// Caps the number of live stdio children; opening one more fails with
    /// [`UpstreamError::Capacity`].
    pub fn with_max_stdio_children(mut self, max: usize) -> Self {
        self.max_children = i64::try_from(max).unwrap_or(i64::MAX);
        self
    }

    /// Tells `reaper` every stdio child's process group, so that none outlives the
    /// gateway even when it is killed.
    pub fn with_reaper(mut self, reaper: Arc<mcpgate_child::Reaper>) -> Self {
        self.children.set_reaper(reaper);
        self
    }

    /// Puts every stdio child in a cgroup of its own under `cgroups` (killed whole and
    /// removed at reaping; memory and process bounds held by the kernel where it can).
    pub fn with_cgroups(mut self, cgroups: Arc<mcpgate_child::Cgroups>) -> Self {
        self.children.set_cgroups(cgroups);
        self
    }

    /// Replaces the start backoff of stdio commands (default: 0.5 s doubling to 30 s).
    pub fn with_start_backoff(mut self, starts: mcpgate_child::Starts) -> Self {
        self.children.set_starts(starts);
        self
    }

    /// The bounds on each upstream step.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// The owner of every task the upstreams start (layers above the transports start
    /// theirs here too, so shutdown waits for them alike).
    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// The longest one upstream teardown takes (its steps are each bounded): a stdio
    /// child's close, SIGTERM and SIGKILL waits, or an HTTP DELETE.
    pub fn teardown_bound(&self) -> Duration {
        (self.timeouts.exit_grace * 2).max(self.timeouts.delete)
    }

    /// Waits (up to `bound`) for every task the upstreams started; called at shutdown,
    /// after every session was closed (which ends them).
    pub async fn wait_tasks(&self, bound: Duration) -> bool {
        self.tasks.close();
        tokio::time::timeout(bound, self.tasks.wait()).await.is_ok()
    }

    /// Live stdio children started by this connector.
    pub fn stdio_children(&self) -> i64 {
        self.children.live()
    }

    /// Builds (once) what `target` needs before any session of it opens, so a bad
    /// certificate file or proxy is reported at start instead of at the first session.
    pub fn prepare(&self, target: &Target) -> Result<(), UpstreamError> {
        match target {
            Target::Http { .. } => self.endpoint(target).map(drop),
            Target::LegacySse { http, .. } => {
                self.clients.get(http, self.timeouts.connect).map(drop)
            }
            Target::Stdio { .. } => {
                self.pools.ensure(target, &self.source());
                Ok(())
            }
        }
    }

    /// The stdio commands whose children keep failing to start, each with how it stands
    /// (its backoff, the last child's status and stderr). For the admin API.
    pub fn failing_starts(&self) -> Vec<(Vec<String>, mcpgate_child::Standing)> {
        self.children.failing()
    }

    /// Ends the warm children of every stdio target not in `targets` (a reload removed
    /// or changed its server).
    pub fn keep_warm_only(&self, targets: &[&Target]) {
        self.pools.retain(targets);
    }

    fn source(&self) -> Source {
        Source {
            children: self.children.clone(),
            tasks: self.tasks.clone(),
            max: self.max_children,
        }
    }

    /// The resolved endpoint of a Streamable HTTP `target` (shared by its sessions).
    pub fn endpoint(&self, target: &Target) -> Result<Arc<Endpoint>, UpstreamError> {
        let Target::Http {
            url, headers, http, ..
        } = target
        else {
            return Err(ProtocolError::NeedsHttp("this exchange").into());
        };
        self.clients.endpoint(url, headers, http, &self.timeouts)
    }

    /// Opens a dedicated upstream session for one client session, started as `start`
    /// says; `o` names the client session, carries its token (child tokens of it stop
    /// every task this upstream starts) and the sink that receives what belongs to no
    /// request.
    pub fn open(
        &self,
        target: &Target,
        start: Start,
        o: Opening,
    ) -> Result<Upstream, UpstreamError> {
        let o = Opening {
            tasks: self.tasks.clone(),
            ..o
        };
        let credential = target.credential(o.principal.as_deref())?;
        match (target, start) {
            (Target::Http { .. }, start) => {
                let sealed = match start {
                    Start::Fresh => None,
                    Start::Sealed(r) => Some(r),
                };
                Ok(Upstream::Http(Box::new(http::HttpUpstream::new(
                    self.timeouts.clone(),
                    self.endpoint(target)?,
                    o,
                    sealed,
                    credential,
                ))))
            }
            (_, Start::Sealed(_)) => Err(ProtocolError::NeedsHttp("a sealed session").into()),
            (
                Target::LegacySse {
                    url, headers, http, ..
                },
                Start::Fresh,
            ) => Ok(Upstream::LegacySse(Box::new(
                legacy_sse::LegacyUpstream::open(
                    self.timeouts.clone(),
                    self.clients.get(http, self.timeouts.connect)?,
                    url,
                    header_map(headers)?,
                    o,
                    credential,
                )?,
            ))),
            (
                Target::Stdio {
                    command,
                    env,
                    cwd,
                    env_clear,
                    contain,
                    ..
                },
                Start::Fresh,
            ) => {
                let ready = match self.pools.take(target, &self.source()) {
                    Some(r) => r,
                    None if self.stdio_children() >= self.max_children => {
                        return Err(UpstreamError::Capacity("too many stdio children"));
                    }
                    None => {
                        let how = Spawn {
                            command,
                            env,
                            env_clear: *env_clear,
                            cwd: cwd.as_deref(),
                            contain,
                        };
                        self.children.launch(how, &self.tasks, false)?
                    }
                };
                stdio::StdioUpstream::start(ready, o, self.max_line, self.timeouts.exit_grace)
                    .map(Upstream::Stdio)
            }
        }
    }
}
