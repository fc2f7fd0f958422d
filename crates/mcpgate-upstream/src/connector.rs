//! Opening dedicated upstream sessions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::{Clients, HttpOptions, header_map};
use crate::error::UpstreamError;
use crate::http_state::Resume;
use crate::members::MembersUpstream;
use crate::members_sink::{Member, MemberEvents, MemberSink, Shared};
use crate::sink::{EventSink, Opening};
use crate::timeouts::Timeouts;
use crate::upstream::Upstream;
use crate::{bridged, http, legacy_sse, stdio};
use tracing::warn;

/// Where a server lives. Comes from configuration, never from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Streamable HTTP endpoint.
    Http {
        /// The MCP endpoint URL.
        url: String,
        /// Extra headers sent on every upstream request (e.g. upstream credentials).
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
    },
    /// A legacy HTTP+SSE server (protocol 2024-11-05): its SSE endpoint URL.
    LegacySse {
        /// The SSE endpoint URL (e.g. `http://host/sse`).
        url: String,
        /// Extra headers sent on every upstream request.
        headers: Vec<(String, String)>,
        /// TLS and proxy.
        http: HttpOptions,
    },
    /// A program speaking MCP on stdio; one process is started per client session.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<String>,
        /// Start from an empty environment (only `env`) instead of the gateway's.
        env_clear: bool,
    },
    /// A virtual server: several configured servers behind one.
    Virtual(Arc<VirtualTarget>),
}

/// A virtual server's members, as [`Connector::open_members`] opens them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualTarget {
    /// Names, filters, rules, failure policy.
    pub plan: Arc<mcpgate_virtual::Plan>,
    /// Where each member lives, in the plan's order.
    pub members: Vec<MemberTarget>,
}

/// One member of a virtual server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTarget {
    /// Where it lives.
    pub target: Target,
    /// Whether it speaks only MCP 2026-07-28 (reached through the era bridge).
    pub modern: bool,
}

/// Opens upstream sessions. One per gateway: it owns the HTTP connection pools (one per
/// distinct [`HttpOptions`]; the only thing sessions share upstream) and counts live stdio
/// children.
#[derive(Debug, Clone)]
pub struct Connector {
    pub(crate) clients: Clients,
    pub(crate) timeouts: Timeouts,
    pub(crate) max_line: usize,
    children: Arc<AtomicI64>,
    max_children: i64,
    /// Owns every task an upstream starts (stream readers, stdio pipes and supervisors).
    tasks: TaskTracker,
}

impl Connector {
    /// A connector with the given timeouts; `max_line` bounds one stdio line.
    pub fn new(timeouts: Timeouts, max_line: usize) -> Result<Self, UpstreamError> {
        Ok(Connector {
            clients: Clients::default(),
            timeouts,
            max_line,
            children: Arc::new(AtomicI64::new(0)),
            max_children: i64::MAX,
            tasks: TaskTracker::new(),
        })
    }

    /// Caps the number of live stdio children; opening one more fails with
    /// [`UpstreamError::Capacity`].
    pub fn with_max_stdio_children(mut self, max: usize) -> Self {
        self.max_children = i64::try_from(max).unwrap_or(i64::MAX);
        self
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
        self.children.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Builds (once) what `target` needs before any session of it opens, so a bad
    /// certificate file or proxy is reported at start instead of at the first session.
    pub fn prepare(&self, target: &Target) -> Result<(), UpstreamError> {
        match target {
            Target::Http { url, headers, http } => self
                .clients
                .endpoint(url, headers, http, &self.timeouts)
                .map(drop),
            Target::LegacySse { http, .. } => {
                self.clients.get(http, self.timeouts.connect).map(drop)
            }
            Target::Stdio { .. } => Ok(()),
            Target::Virtual(v) => v.members.iter().try_for_each(|m| self.prepare(&m.target)),
        }
    }

    /// Opens a dedicated upstream session for one client session. `label` names the
    /// client session in logs; `cancel` is the session's token (its child tokens stop
    /// every task this upstream starts); `sink` receives what belongs to no request.
    pub fn open(
        &self,
        target: &Target,
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
    ) -> Result<Upstream, UpstreamError> {
        let o = self.opening(label, cancel, sink);
        match target {
            Target::Http { url, headers, http } => self.http((url, headers, http), o, None),
            Target::LegacySse { url, headers, http } => Ok(Upstream::LegacySse(Box::new(
                legacy_sse::LegacyUpstream::open(
                    self.timeouts.clone(),
                    self.clients.get(http, self.timeouts.connect)?,
                    url,
                    header_map(headers)?,
                    o,
                )?,
            ))),
            Target::Virtual(_) => Err(UpstreamError::Protocol(
                "a virtual server's session is opened with open_members".into(),
            )),
            Target::Stdio { .. } if self.stdio_children() >= self.max_children => {
                Err(UpstreamError::Capacity("too many stdio children"))
            }
            Target::Stdio {
                command,
                env,
                cwd,
                env_clear,
            } => stdio::StdioUpstream::spawn(
                &self.timeouts,
                self.max_line,
                command,
                env,
                *env_clear,
                cwd.as_deref(),
                o,
                self.children.clone(),
            )
            .map(Upstream::Stdio),
        }
    }

    /// Opens the upstream of a sealed session (Streamable HTTP only): a new one, or, with
    /// `resume.session`, one the upstream already has — nothing is sent until the next
    /// request. Arguments as for [`Connector::open`].
    pub fn open_sealed(
        &self,
        target: &Target,
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
        resume: Resume,
    ) -> Result<Upstream, UpstreamError> {
        let Target::Http { url, headers, http } = target else {
            return Err(UpstreamError::Protocol(
                "only Streamable HTTP sessions can be sealed".into(),
            ));
        };
        let o = self.opening(label, cancel, sink);
        self.http((url, headers, http), o, Some(resume))
    }

    /// A Streamable HTTP upstream on the endpoint of `(url, headers, options)`; sealed
    /// when `sealed` says how it starts.
    fn http(
        &self,
        (url, headers, options): (&str, &[(String, String)], &crate::client::HttpOptions),
        o: Opening,
        sealed: Option<Resume>,
    ) -> Result<Upstream, UpstreamError> {
        Ok(Upstream::Http(Box::new(http::HttpUpstream::new(
            self.timeouts.clone(),
            self.clients
                .endpoint(url, headers, options, &self.timeouts)?,
            o,
            sealed,
        ))))
    }

    /// What an upstream it opens starts with (its tasks owned by this connector).
    fn opening(&self, label: &str, cancel: CancellationToken, sink: Arc<dyn EventSink>) -> Opening {
        Opening {
            label: Arc::from(label),
            cancel,
            sink,
            tasks: self.tasks.clone(),
        }
    }

    /// Opens a virtual server's upstream: one upstream session per member (a child per
    /// stdio member), each opened with its own sink in front of `sink` and under a child
    /// token of `cancel`. A member that cannot be opened fails the whole opening
    /// (`fail_closed`: what was opened is closed, by a task of this connector) or is left
    /// out with a log line (`fail_open`). `view` is the principal's view of the plan.
    #[allow(clippy::too_many_arguments)]
    pub fn open_members(
        &self,
        v: &VirtualTarget,
        view: mcpgate_virtual::View,
        label: &str,
        principal: Option<Arc<str>>,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
        events: Arc<dyn MemberEvents>,
    ) -> Result<Upstream, UpstreamError> {
        let shared = Arc::new(Shared::new(
            v.plan.clone(),
            Arc::from(label),
            principal,
            sink,
            events,
        ));
        let mut opened: Vec<Member> = Vec::with_capacity(v.members.len());
        for (i, (m, plan)) in v.members.iter().zip(&v.plan.members).enumerate() {
            let msink: Arc<dyn EventSink> = Arc::new(MemberSink {
                member: i,
                shared: shared.clone(),
            });
            let mlabel = format!("{label}/{}", plan.prefix);
            let token = cancel.child_token();
            let r = if m.modern {
                self.open_bridged(&m.target, &mlabel, token, msink)
            } else {
                self.open(&m.target, &mlabel, token, msink)
            };
            match r {
                Ok(u) => {
                    shared.set_up(i);
                    opened.push(Member {
                        upstream: Some(Box::new(u)),
                    });
                }
                // Out of stdio children: the table may evict an idle session and try again.
                Err(e)
                    if v.plan.failure == mcpgate_virtual::Failure::Open
                        && !matches!(e, UpstreamError::Capacity(_)) =>
                {
                    warn!(session = %label, virtual_server = %v.plan.name, member = %plan.server, error = %e, "member cannot start; the session goes on without it (fail_open)");
                    shared.events.failed(&plan.server);
                    opened.push(Member { upstream: None });
                }
                Err(e) => {
                    let started: Vec<_> = opened.into_iter().filter_map(|m| m.upstream).collect();
                    for j in 0..i {
                        shared.set_down(j);
                    }
                    self.tasks.spawn(async move {
                        for u in started {
                            u.close().await;
                        }
                    });
                    return Err(e);
                }
            }
        }
        Ok(Upstream::Members(Box::new(MembersUpstream::new(
            view,
            opened.into_boxed_slice(),
            shared,
        ))))
    }

    /// Opens the era bridge's upstream for a session-era client of the 2026-07-28-only
    /// HTTP server `target` (see `bridged.rs`); arguments as for [`Connector::open`].
    pub fn open_bridged(
        &self,
        target: &Target,
        label: &str,
        cancel: CancellationToken,
        sink: Arc<dyn EventSink>,
    ) -> Result<Upstream, UpstreamError> {
        let Target::Http { url, headers, http } = target else {
            return Err(UpstreamError::Protocol(
                "the era bridge reaches 2026-07-28-only servers over Streamable HTTP".into(),
            ));
        };
        let o = self.opening(label, cancel, sink);
        Ok(Upstream::Bridged(Box::new(bridged::BridgedUpstream::new(
            self.clients.endpoint(url, headers, http, &self.timeouts)?,
            self.timeouts.request,
            o,
        ))))
    }
}
