//! A virtual server's upstream: one dedicated upstream session per member, all owned by
//! one client session. Requests are answered by fan-out and merge (`initialize`, the
//! lists: `members_list.rs`) or routed to the member that owns the name or URI, with the
//! member's own name restored; what members send the client comes back through
//! [`MemberSink`]s with ids and URIs made the client's. What that means for each message
//! is `mcpgate-virtual`'s; this file does the I/O.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use mcpgate_jsonrpc::error::{
    INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, UPSTREAM_ERROR,
};
use mcpgate_jsonrpc::{Id, Message, Method};
use mcpgate_upstream::{Replies, Teardown, UpstreamError};
use mcpgate_virtual::catalogue::List;
use mcpgate_virtual::rewrite::{self, Params, from_member};
use mcpgate_virtual::{Access, Item, Plan, View, apps};
use serde_json::{Value, json};
use tracing::{debug, warn};

pub use crate::members_shared::{FORBIDDEN, MemberEvents, MemberState};
use crate::members_shared::{Inflight, answer, refuse};
pub(crate) use crate::members_shared::{Member, MemberSink, Shared};
use crate::server::ServerUpstream;

/// What a routed request's response becomes toward the client.
type PostFn = fn(&Plan, usize, Message) -> Message;

/// The upstream of a virtual server's client session.
#[derive(Debug)]
pub struct Members {
    pub(crate) view: View,
    pub(crate) members: Box<[Member]>,
    pub(crate) shared: Arc<Shared>,
    /// The client's requests in flight by id → the member that has them (cancellation).
    inflight: Arc<Mutex<HashMap<Id, usize>>>,
    /// Numbers the gateway's own listings (their request ids).
    pub(crate) probes: std::sync::atomic::AtomicU64,
}

impl Members {
    pub(crate) fn new(view: View, members: Box<[Member]>, shared: Arc<Shared>) -> Self {
        Members {
            view,
            members,
            shared,
            inflight: Arc::default(),
            probes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn plan(&self) -> &Plan {
        self.view.plan()
    }

    /// Member `i`'s upstream while it is part of the session.
    pub(crate) fn live(&self, i: usize) -> Option<&ServerUpstream> {
        if !self.shared.is_up(i) {
            return None;
        }
        self.members.get(i)?.upstream.as_ref()
    }

    pub(crate) fn live_members(&self) -> impl Iterator<Item = (usize, &ServerUpstream)> {
        (0..self.members.len()).filter_map(|i| self.live(i).map(|u| (i, u)))
    }

    pub(crate) fn states(&self) -> Vec<MemberState> {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberState {
                server: self.shared.names[i].clone(),
                up: self.shared.is_up(i),
                kind: m.upstream.as_ref().map_or("none", |u| u.kind()),
                pid: m.upstream.as_ref().and_then(|u| u.pid()),
            })
            .collect()
    }

    pub(crate) async fn request(&self, msg: Message) -> Result<Replies, UpstreamError> {
        let (Some(method), Some(id)) = (msg.method(), msg.id().cloned()) else {
            return Err(mcpgate_upstream::ProtocolError::NotARequest.into());
        };
        if let Some(list) = List::of(method) {
            return self.list(list, &msg, &id).await;
        }
        match method {
            Method::Initialize => self.initialize(&msg, &id).await,
            Method::Ping => answer(&id, &json!({})),
            Method::ToolsCall => self.by_name(Item::Tool, msg, id).await,
            Method::PromptsGet => self.by_name(Item::Prompt, msg, id).await,
            Method::ResourcesRead | Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                self.by_uri(msg, id).await
            }
            Method::Complete => self.completion(msg, id).await,
            Method::SetLevel => {
                let all: Vec<(usize, Message)> =
                    self.live_members().map(|(i, _)| (i, msg.clone())).collect();
                self.fan_out(all).await?;
                answer(&id, &json!({}))
            }
            other => refuse(
                &id,
                METHOD_NOT_FOUND,
                &format!("Method not found: {other} (virtual server)"),
            ),
        }
    }

    async fn by_name(&self, item: Item, msg: Message, id: Id) -> Result<Replies, UpstreamError> {
        let unknown = |name: &str| {
            let what = if item == Item::Tool {
                "Unknown tool"
            } else {
                "Unknown prompt"
            };
            refuse(&id, INVALID_PARAMS, &format!("{what}: {name}"))
        };
        let params = Params::parse(&msg).map_err(UpstreamError::translate)?;
        let Some(exposed) = params.str("name") else {
            return refuse(&id, INVALID_PARAMS, "Invalid params: name is required");
        };
        let route = match self.resolve(item, &exposed).await? {
            Some((i, own)) => Some((i, own, exposed.clone())),
            None if item == Item::Tool => match self.app_route(&exposed) {
                Ok(route) => route,
                Err(names) => {
                    let msg = format!(
                        "Ambiguous tool {exposed}: the apps of several members have it; call one of {}",
                        names.join(", ")
                    );
                    return refuse(&id, INVALID_PARAMS, &msg);
                }
            },
            None => None,
        };
        let Some((i, own, listed)) = route else {
            return unknown(&exposed);
        };
        if let Some(refusal) = self.admit(item, (i, &own), &listed, &id, || unknown(&exposed)) {
            return refusal;
        }
        let out = params
            .with("name", &Value::String(own))
            .map_err(UpstreamError::translate)?;
        let post = (item == Item::Tool).then_some(apps::call_result as PostFn);
        self.forward(i, out, id, post).await
    }

    /// An MCP App's call by its own server's bare tool name `own`: the one member whose
    /// app the client read and that lists `own` (its exposed name and own name); `Err`
    /// with the exposed names when several do.
    fn app_route(&self, own: &str) -> Result<Option<(usize, String, String)>, Vec<String>> {
        let Ok(routes) = self.shared.routes.lock() else {
            return Ok(None);
        };
        let mut found = routes.by_own(Item::Tool, own, |m| self.shared.served_app(m));
        drop(routes);
        match found.len() {
            0 => Ok(None),
            1 => Ok(found.pop().map(|(e, m)| (m, own.to_owned(), e))),
            _ => Err(found.into_iter().map(|(e, _)| e).collect()),
        }
    }

    /// `None` when this session may use member `i`'s entry `own` (exposed as `exposed`);
    /// otherwise the answer: `missing()` (what an unknown entry gets) when the member is
    /// gone or its filter hides the entry, a counted and logged refusal when the rules
    /// forbid it.
    fn admit(
        &self,
        item: Item,
        (i, own): (usize, &str),
        exposed: &str,
        id: &Id,
        missing: impl FnOnce() -> Result<Replies, UpstreamError>,
    ) -> Option<Result<Replies, UpstreamError>> {
        if self.live(i).is_none() {
            return Some(missing());
        }
        match self.view.check(item, i, own, exposed) {
            Access::Visible => None,
            Access::Hidden => Some(missing()),
            Access::Forbidden => Some(self.forbidden(item, exposed, id)),
        }
    }

    fn forbidden(&self, item: Item, exposed: &str, id: &Id) -> Result<Replies, UpstreamError> {
        self.shared.events.denied(item.as_str());
        warn!(session = %self.shared.label, virtual_server = %self.plan().name, principal = self.shared.principal.as_deref().unwrap_or("-"), kind = item.as_str(), name = %exposed, "refused by the access rules");
        refuse(
            id,
            FORBIDDEN,
            &format!("Forbidden: {exposed} is not allowed for this principal"),
        )
    }

    async fn by_uri(&self, msg: Message, id: Id) -> Result<Replies, UpstreamError> {
        let params = Params::parse(&msg).map_err(UpstreamError::translate)?;
        let Some(exposed) = params.str("uri") else {
            return refuse(&id, INVALID_PARAMS, "Invalid params: uri is required");
        };
        let not_found = || {
            refuse(
                &id,
                RESOURCE_NOT_FOUND,
                &format!("Resource not found: {exposed}"),
            )
        };
        let Some((i, own)) = self.plan().route_uri(&exposed) else {
            return not_found();
        };
        if let Some(refusal) = self.admit(Item::Resource, (i, &own), &exposed, &id, not_found) {
            return refusal;
        }
        let read = msg.is(&Method::ResourcesRead);
        if read && apps::is_app(&own) {
            self.shared.set_app(i);
        }
        let out = params
            .with("uri", &Value::String(own.into_owned()))
            .map_err(UpstreamError::translate)?;
        self.forward(i, out, id, read.then_some(rewrite::read_result as PostFn))
            .await
    }

    async fn completion(&self, msg: Message, id: Id) -> Result<Replies, UpstreamError> {
        let Some(mut params) = rewrite::params(&msg) else {
            return refuse(&id, INVALID_PARAMS, "Invalid params: ref is required");
        };
        let r = &params["ref"];
        let (item, field) = match r.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => (Item::Prompt, "name"),
            Some("ref/resource") => (Item::Resource, "uri"),
            _ => return refuse(&id, INVALID_PARAMS, "Invalid params: unknown ref type"),
        };
        let Some(exposed) = r.get(field).and_then(Value::as_str).map(str::to_owned) else {
            return refuse(
                &id,
                INVALID_PARAMS,
                "Invalid params: ref has no name or uri",
            );
        };
        let route = if item == Item::Prompt {
            self.resolve(item, &exposed).await?
        } else {
            self.plan()
                .route_uri(&exposed)
                .map(|(i, o)| (i, o.into_owned()))
        };
        let unknown = || {
            refuse(
                &id,
                INVALID_PARAMS,
                &format!("Invalid params: unknown {exposed}"),
            )
        };
        let Some((i, own)) = route else {
            return unknown();
        };
        if let Some(refusal) = self.admit(item, (i, &own), &exposed, &id, unknown) {
            return refusal;
        }
        params["ref"][field] = Value::String(own);
        let out = rewrite::with_params(&msg, &params).map_err(UpstreamError::translate)?;
        self.forward(i, out, id, None).await
    }

    /// Sends a request to member `i`; its replies come back with the member's requests
    /// and notifications made the client's, the response through `post`, and (with
    /// `fail_open`) the member's death as an error answer instead of the session's end.
    async fn forward(
        &self,
        i: usize,
        msg: Message,
        id: Id,
        post: Option<PostFn>,
    ) -> Result<Replies, UpstreamError> {
        let Some(up) = self.live(i) else {
            return refuse(&id, UPSTREAM_ERROR, "member is not available");
        };
        // Registered before the request goes: a cancellation that overtakes the answer's
        // first bytes still finds the member.
        let guard = Inflight::new(&self.inflight, id.clone(), i);
        let replies = match up.request(msg).await {
            Ok(r) => r,
            Err(e) if e.is_fatal() && !self.propagates(&e) => {
                self.shared.drop_member(i, &e);
                return refuse(&id, UPSTREAM_ERROR, &self.shared.failed_text(i, &e));
            }
            Err(e) => return Err(e),
        };
        let shared = self.shared.clone();
        Ok(replies.map(move |item| {
            let _registered = &guard;
            match item {
                Ok(m) if m.is_response() => Ok(match post {
                    Some(f) => f(&shared.plan, i, m),
                    None => m,
                }),
                Ok(m) => Ok(from_member(&shared.plan, i, m)),
                Err(e) if e.is_fatal() && !shared.ends_session(&e) => {
                    shared.drop_member(i, &e);
                    rewrite::error(&id, UPSTREAM_ERROR, &shared.failed_text(i, &e))
                        .map_err(UpstreamError::translate)
                }
                Err(e) => Err(e),
            }
        }))
    }

    pub(crate) async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        if msg.is_response() {
            let Some((i, own)) = rewrite::to_member(&msg) else {
                debug!(session = %self.shared.label, "an answer to no member's request; dropped");
                return Ok(());
            };
            return match self.live(i) {
                Some(up) => up.send(own).await,
                None => Ok(()),
            };
        }
        if msg.is(&Method::Cancelled) {
            let member = msg
                .cancelled_request_id()
                .and_then(|rid| self.inflight.lock().ok().and_then(|g| g.get(&rid).copied()));
            return match member.and_then(|i| self.live(i)) {
                Some(up) => up.send(msg).await,
                None => Ok(()),
            };
        }
        // Everything else (initialized, roots/list_changed, …) is for every member.
        let sent = join_all(self.live_members().map(|(i, up)| {
            let m = msg.clone();
            async move { (i, up.send(m).await) }
        }))
        .await;
        for (i, r) in sent {
            if let Err(e) = r {
                if self.propagates(&e) {
                    return Err(e);
                }
                if e.is_fatal() {
                    self.shared.drop_member(i, &e);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn listen(&self) {
        for (_, up) in self.live_members() {
            up.listen();
        }
    }

    pub(crate) async fn settled(&self) {
        join_all(self.live_members().map(|(_, up)| up.settled())).await;
    }

    /// Ends every member's session (those that failed too), at once; the worst outcome
    /// is reported, each is logged.
    pub(crate) async fn close(&self) -> Teardown {
        let ends = join_all(
            self.members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.upstream.as_ref().map(|u| (i, u)))
                .map(|(i, u)| async move { (i, u.close().await) }),
        )
        .await;
        let mut worst = Teardown::AlreadyEnded;
        for (i, t) in ends {
            debug!(session = %self.shared.label, member = %self.shared.names[i], outcome = %t, "member session ended");
            self.shared.set_down(i);
            if t.is_abnormal() || worst == Teardown::AlreadyEnded {
                worst = t;
            }
        }
        worst
    }
}
