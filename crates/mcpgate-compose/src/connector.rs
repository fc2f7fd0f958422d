//! Opening a client session's upstream: one [`Connector::open`] for every backend and
//! mode (a transport's session, a sealed one, the era bridge's, a virtual server's
//! members).

use std::sync::Arc;

use mcpgate_upstream::{ProtocolError, Resume, Start, Target, UpstreamError};
use mcpgate_virtual::{Failure, View, Who};
use tracing::warn;

use crate::backend::{Backend, VirtualTarget};
use crate::members::{Member, MemberEvents, MemberSink, Members, Shared};
use crate::reverse::Reverse;
use crate::reverse_wire::Wire;
use crate::server::ServerUpstream;
use crate::upstream::SessionUpstream;

/// How a session's upstream is opened.
#[derive(Debug, Clone, Default)]
pub enum Mode {
    /// A new upstream session of the server's own.
    #[default]
    Fresh,
    /// A sealed Streamable HTTP session: new, or resumed from a sealed id.
    Sealed(Resume),
    /// For a session-era client of a 2026-07-28-only server: the gateway holds the
    /// session (the era bridge, toward the server).
    Reverse,
}

/// What a session's upstream is opened with: the transports' opening (its name, token
/// and sink), and whom it is for.
#[derive(Debug, Clone)]
pub struct Opening {
    /// Name, token and sink, as every transport takes them.
    pub session: mcpgate_upstream::Opening,
    /// Who opened the session, as a virtual server's access rules see them.
    pub who: Who,
    /// What a virtual session's members' lives count in (`None`: nothing).
    pub events: Option<Arc<dyn MemberEvents>>,
}

/// Opens client sessions' upstreams over the transports of a
/// [`mcpgate_upstream::Connector`].
#[derive(Debug, Clone)]
pub struct Connector {
    transports: mcpgate_upstream::Connector,
}

/// What counts nothing.
#[derive(Debug)]
struct Uncounted;

impl MemberEvents for Uncounted {
    fn up(&self, _: &str, _: bool) {}
    fn denied(&self, _: &'static str) {}
    fn failed(&self, _: &str) {}
}

impl Connector {
    /// A connector over `transports`.
    pub fn new(transports: mcpgate_upstream::Connector) -> Self {
        Connector { transports }
    }

    /// The transports.
    pub fn transports(&self) -> &mcpgate_upstream::Connector {
        &self.transports
    }

    /// Builds (once) what `backend` needs before any session of it opens, so a bad
    /// certificate file or proxy is reported at start instead of at the first session.
    pub fn prepare(&self, backend: &Backend) -> Result<(), UpstreamError> {
        match backend {
            Backend::Server(t) => self.transports.prepare(t),
            Backend::Virtual(v) => v
                .members
                .iter()
                .try_for_each(|m| self.transports.prepare(&m.target)),
        }
    }

    /// Ends the warm children of every stdio target none of `backends` uses.
    pub fn keep_warm_only(&self, backends: &[&Backend]) {
        let targets: Vec<&mcpgate_upstream::Target> = backends
            .iter()
            .flat_map(|b| match b {
                Backend::Server(t) => vec![t],
                Backend::Virtual(v) => v.members.iter().map(|m| &m.target).collect(),
            })
            .collect();
        self.transports.keep_warm_only(&targets);
    }

    /// Opens the upstream of one client session of `backend`, as `mode` says.
    pub fn open(
        &self,
        backend: &Backend,
        mode: Mode,
        o: Opening,
    ) -> Result<SessionUpstream, UpstreamError> {
        match backend {
            Backend::Server(t) => self.server(t, mode, o.session).map(SessionUpstream::Server),
            Backend::Virtual(_) if !matches!(mode, Mode::Fresh) => {
                Err(ProtocolError::NeedsHttp("a sealed or bridged session").into())
            }
            Backend::Virtual(v) => self.members(v, o).map(SessionUpstream::Virtual),
        }
    }

    /// One server's upstream.
    fn server(
        &self,
        target: &Target,
        mode: Mode,
        o: mcpgate_upstream::Opening,
    ) -> Result<ServerUpstream, UpstreamError> {
        let start = match mode {
            Mode::Reverse => {
                let wire = Wire {
                    endpoint: self.transports.endpoint(target)?,
                    timeout: self.transports.timeouts().request,
                    credential: target.credential(o.principal.as_deref())?,
                };
                let tasks = self.transports.tasks().clone();
                let reverse = Reverse::new(wire, o, tasks);
                return Ok(ServerUpstream::Reverse(Box::new(reverse)));
            }
            Mode::Fresh => Start::Fresh,
            Mode::Sealed(r) => Start::Sealed(r),
        };
        self.transports
            .open(target, start, o)
            .map(ServerUpstream::Direct)
    }

    /// A virtual server's upstream: one upstream session per member (a child per stdio
    /// member), each opened with its own sink in front of the session's and under a child
    /// token of the session's. A member that cannot be opened fails the whole opening
    /// (`fail_closed`: what was opened is closed, by a task of the connector) or is left
    /// out with a log line (`fail_open`).
    fn members(&self, v: &VirtualTarget, o: Opening) -> Result<Box<Members>, UpstreamError> {
        let view = View::new(v.plan.clone(), &o.who);
        let events = o.events.unwrap_or_else(|| Arc::new(Uncounted));
        let label = o.session.label.clone();
        let principal = o.who.principal.as_deref().map(Arc::from);
        let shared = Arc::new(Shared::new(
            v.plan.clone(),
            label.clone(),
            principal,
            o.session.sink.clone(),
            events,
        ));
        let mut opened: Vec<Member> = Vec::with_capacity(v.members.len());
        for (i, (m, plan)) in v.members.iter().zip(&v.plan.members).enumerate() {
            let sink = Arc::new(MemberSink {
                member: i,
                shared: shared.clone(),
            });
            let mo = mcpgate_upstream::Opening::new(
                &format!("{label}/{}", plan.prefix),
                o.session.cancel.child_token(),
                sink,
            )
            .for_principal(o.session.principal.clone());
            let mode = if m.modern { Mode::Reverse } else { Mode::Fresh };
            match self.server(&m.target, mode, mo) {
                Ok(u) => {
                    shared.set_up(i);
                    opened.push(Member::up(u));
                }
                // Out of stdio children: the table may evict an idle session and try again.
                Err(e)
                    if v.plan.failure == Failure::Open
                        && !matches!(e, UpstreamError::Capacity(_)) =>
                {
                    warn!(session = %label, virtual_server = %v.plan.name, member = %plan.server, error = %e, "member cannot start; the session goes on without it (fail_open)");
                    shared.events.failed(&plan.server);
                    opened.push(Member::absent());
                }
                Err(e) => {
                    self.abandon(&shared, opened);
                    return Err(e);
                }
            }
        }
        Ok(Box::new(Members::new(
            view,
            opened.into_boxed_slice(),
            shared,
        )))
    }

    /// Closes the members opened before one failed (`fail_closed`), in the background.
    fn abandon(&self, shared: &Shared, opened: Vec<Member>) {
        for j in 0..opened.len() {
            shared.set_down(j);
        }
        let started: Vec<ServerUpstream> = opened.into_iter().filter_map(Member::take).collect();
        self.transports.tasks().spawn(async move {
            for u in started {
                u.close().await;
            }
        });
    }
}
