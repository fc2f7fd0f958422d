//! What a virtual session's members share: which are up, the routes of the names its
//! client has seen, its client's requests in flight; what the members send that belongs to
//! no request, and their ends (one [`MemberSink`] per member, in front of the client
//! session's sink); the answers the gateway gives itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use mcpgate_jsonrpc::{Id, Message, Method};
use mcpgate_upstream::{EventSink, Replies, UpstreamError};
use mcpgate_virtual::{Failure, Item, Plan};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::server::ServerUpstream;

/// What the session layer counts of a virtual session's members.
pub trait MemberEvents: Send + Sync + std::fmt::Debug + 'static {
    /// Member `server` joined (`true`) or left (`false`) a session.
    fn up(&self, server: &str, up: bool);
    /// A call or read the access rules refused (`kind`: tool, prompt, resource).
    fn denied(&self, kind: &'static str);
    /// Member `server` failed under a live session and was dropped from it.
    fn failed(&self, server: &str);
}

/// The JSON-RPC code of a call the access rules forbid.
pub const FORBIDDEN: i64 = -32006;

/// What [`crate::SessionUpstream::members`] reports of one member.
#[derive(Debug, Clone)]
pub struct MemberState {
    /// The configured server.
    pub server: Arc<str>,
    /// Whether it is still part of the session.
    pub up: bool,
    /// Its transport.
    pub kind: &'static str,
    /// Its child's pid (stdio).
    pub pid: Option<u32>,
}

/// One member's upstream session (`None`: it could not start, `fail_open`).
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) upstream: Option<ServerUpstream>,
}

impl Member {
    pub(crate) fn up(u: ServerUpstream) -> Self {
        Member { upstream: Some(u) }
    }

    pub(crate) fn absent() -> Self {
        Member { upstream: None }
    }

    pub(crate) fn take(self) -> Option<ServerUpstream> {
        self.upstream
    }
}

/// The tools and prompts a session has seen listed: exposed name → member, own name.
/// Calls are routed by it (so an unknown or hidden name is refused by the gateway, never
/// sent to a member); a member's list-changed notification empties its kind. A miss
/// lists again only when the kind is not known whole (so unknown names cannot make the
/// gateway list the members over and over).
#[derive(Debug, Default)]
pub(crate) struct Routes {
    /// Tools (0) and prompts (1).
    names: [HashMap<String, (usize, String)>; 2],
    /// Whether each kind is known whole.
    whole: [bool; 2],
}

/// The slot of a kind in [`Routes`] (resources are routed by their URI).
fn slot(item: Item) -> usize {
    usize::from(item != Item::Tool)
}

impl Routes {
    pub(crate) fn get(&self, item: Item, exposed: &str) -> Option<(usize, String)> {
        self.names[slot(item)].get(exposed).cloned()
    }

    /// Whether the kind is known whole (a miss is then an unknown name).
    pub(crate) fn is_whole(&self, item: Item) -> bool {
        self.whole[slot(item)]
    }

    /// What a listing showed: the whole list (`whole`: replaces what was known, and a
    /// miss is then an unknown name) or one page of it (added).
    pub(crate) fn learn(
        &mut self,
        item: Item,
        whole: bool,
        routes: impl IntoIterator<Item = (String, usize, String)>,
    ) {
        let map = &mut self.names[slot(item)];
        if whole {
            map.clear();
            self.whole[slot(item)] = true;
        }
        map.extend(routes.into_iter().map(|(e, m, o)| (e, (m, o))));
    }

    /// The exposed names of the listed entries whose own name is `own`, of the members
    /// `of` picks (an MCP App calls its own server's tools by their own names).
    pub(crate) fn by_own(
        &self,
        item: Item,
        own: &str,
        of: impl Fn(usize) -> bool,
    ) -> Vec<(String, usize)> {
        self.names[slot(item)]
            .iter()
            .filter(|(_, (m, o))| o == own && of(*m))
            .map(|(e, (m, _))| (e.clone(), *m))
            .collect()
    }

    /// Forgets a kind (its list changed).
    fn forget(&mut self, item: Item) {
        self.names[slot(item)].clear();
        self.whole[slot(item)] = false;
    }
}

/// What a virtual session's members share: the plan, which members are up, the client
/// session's sink.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) plan: Arc<Plan>,
    pub(crate) names: Box<[Arc<str>]>,
    up: Box<[AtomicBool]>,
    pub(crate) label: Arc<str>,
    pub(crate) principal: Option<Arc<str>>,
    pub(crate) parent: Arc<dyn EventSink>,
    pub(crate) events: Arc<dyn MemberEvents>,
    pub(crate) routes: Mutex<Routes>,
    /// The members whose MCP App (a `ui://` resource) the client has read: the app's
    /// own calls by its server's bare tool names go to them.
    apps: Box<[AtomicBool]>,
    /// Whether the client has the merged `initialize` answer (a member dropped before
    /// that is simply not in it: no list-changed notification).
    pub(crate) initialized: AtomicBool,
}

impl Shared {
    pub(crate) fn new(
        plan: Arc<Plan>,
        label: Arc<str>,
        principal: Option<Arc<str>>,
        parent: Arc<dyn EventSink>,
        events: Arc<dyn MemberEvents>,
    ) -> Self {
        let names = plan
            .members
            .iter()
            .map(|m| Arc::from(m.server.as_str()))
            .collect();
        let flags = || {
            plan.members
                .iter()
                .map(|_| AtomicBool::new(false))
                .collect()
        };
        let (up, apps) = (flags(), flags());
        Shared {
            plan,
            names,
            up,
            label,
            principal,
            parent,
            events,
            routes: Mutex::default(),
            apps,
            initialized: AtomicBool::new(false),
        }
    }

    /// Forgets the routes of a kind whose list changed.
    fn list_changed(&self, msg: &Message) {
        let item = match msg.method() {
            Some(Method::ToolsListChanged) => Item::Tool,
            Some(Method::PromptsListChanged) => Item::Prompt,
            _ => return,
        };
        if let Ok(mut r) = self.routes.lock() {
            r.forget(item);
        }
    }

    /// Whether a member's failure ends the client's session: under `fail_closed`, and
    /// always when its upstream session is gone (the client must re-initialise; a
    /// session left half-working is never an option). Otherwise the member is dropped.
    pub(crate) fn ends_session(&self, e: &UpstreamError) -> bool {
        matches!(e, UpstreamError::SessionGone) || self.plan.failure == Failure::Closed
    }

    /// Member `i` served the client an MCP App.
    pub(crate) fn set_app(&self, i: usize) {
        if let Some(a) = self.apps.get(i) {
            a.store(true, Ordering::Release);
        }
    }

    /// Whether member `i` served the client an MCP App.
    pub(crate) fn served_app(&self, i: usize) -> bool {
        self.apps.get(i).is_some_and(|a| a.load(Ordering::Acquire))
    }

    pub(crate) fn is_up(&self, i: usize) -> bool {
        self.up.get(i).is_some_and(|u| u.load(Ordering::Acquire))
    }

    /// Member `i` joined the session.
    pub(crate) fn set_up(&self, i: usize) {
        if let Some(u) = self.up.get(i)
            && !u.swap(true, Ordering::AcqRel)
        {
            self.events.up(&self.names[i], true);
        }
    }

    /// Member `i` left the session (at its end); true if it was up.
    pub(crate) fn set_down(&self, i: usize) -> bool {
        let was = self
            .up
            .get(i)
            .is_some_and(|u| u.swap(false, Ordering::AcqRel));
        if was {
            self.events.up(&self.names[i], false);
        }
        was
    }

    /// Member `i` failed under a live session (`fail_open`): it leaves the catalogue,
    /// and the client hears that the lists changed.
    pub(crate) fn drop_member(&self, i: usize, why: &dyn std::fmt::Display) {
        if !self.set_down(i) {
            return;
        }
        self.events.failed(&self.names[i]);
        warn!(session = %self.label, virtual_server = %self.plan.name, member = %self.names[i], error = %why, "member failed; dropped from the session's catalogue (fail_open)");
        if !self.initialized.load(Ordering::Acquire) {
            return;
        }
        for changed in [
            Method::ToolsListChanged,
            Method::PromptsListChanged,
            Method::ResourcesListChanged,
        ] {
            let body = json!({"jsonrpc": "2.0", "method": changed.as_str()});
            if let Ok(m) = Message::parse(Bytes::from(body.to_string())) {
                self.parent.message(m);
            }
        }
    }

    /// The text of the error a call gets when its member failed under it.
    pub(crate) fn failed_text(&self, i: usize, why: &UpstreamError) -> String {
        format!("member {} failed: {why}", self.names[i])
    }

    /// A message of member `i` for the client, made the client's.
    pub(crate) fn deliver(&self, i: usize, msg: Message) {
        self.parent
            .message(mcpgate_virtual::rewrite::from_member(&self.plan, i, msg));
    }
}

/// The sink one member's upstream is opened with.
#[derive(Debug)]
pub(crate) struct MemberSink {
    pub(crate) member: usize,
    pub(crate) shared: Arc<Shared>,
}

impl EventSink for MemberSink {
    fn message(&self, msg: Message) {
        self.shared.list_changed(&msg);
        if self.shared.is_up(self.member) {
            self.shared.deliver(self.member, msg);
        }
    }

    fn closed(&self, why: UpstreamError) {
        let s = &self.shared;
        if !s.is_up(self.member) {
            return;
        }
        if s.ends_session(&why) {
            info!(session = %s.label, member = %s.names[self.member], error = %why, "member ended; ending the virtual session");
            s.parent.closed(why);
        } else {
            s.drop_member(self.member, &why);
        }
    }
}

/// Registers a routed request's client id while its replies are read.
pub(crate) struct Inflight {
    map: Arc<Mutex<HashMap<Id, usize>>>,
    id: Id,
}

impl Inflight {
    pub(crate) fn new(map: &Arc<Mutex<HashMap<Id, usize>>>, id: Id, member: usize) -> Self {
        if let Ok(mut g) = map.lock() {
            g.insert(id.clone(), member);
        }
        Inflight {
            map: map.clone(),
            id,
        }
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        if let Ok(mut g) = self.map.lock() {
            g.remove(&self.id);
        }
    }
}

/// The gateway's own answer `result` to the client's request `id`.
pub(crate) fn answer(id: &Id, result: &Value) -> Result<Replies, UpstreamError> {
    mcpgate_virtual::rewrite::result(id, result)
        .map(Replies::one)
        .map_err(UpstreamError::translate)
}

/// The gateway's own error answer to the client's request `id`.
pub(crate) fn refuse(id: &Id, code: i64, message: &str) -> Result<Replies, UpstreamError> {
    mcpgate_virtual::rewrite::error(id, code, message)
        .map(Replies::one)
        .map_err(UpstreamError::translate)
}
