//! A virtual server's upstream: one dedicated upstream session per member, all owned by
//! one client session. Requests are answered by fan-out and merge (`initialize`, the
//! lists) or routed to the member that owns the name or URI, with the member's own name
//! restored; what members send the client comes back through [`MemberSink`]s with ids
//! and URIs made the client's. What that means for each message is `mcpgate-virtual`'s;
//! this file does the I/O.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::join_all;
use mcpgate_jsonrpc::error::{INVALID_PARAMS, METHOD_NOT_FOUND, UPSTREAM_ERROR};
use mcpgate_jsonrpc::{Id, Message};
use mcpgate_virtual::catalogue::{self, List};
use mcpgate_virtual::rewrite::{self, Params, from_member, param_str};
use mcpgate_virtual::{Access, Cursor, Failure, Item, Naming, Plan, View};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::error::{Teardown, UpstreamError};
use crate::members_sink::{FORBIDDEN, Inflight, Link, Member, MemberState, Shared, answer, refuse};
use crate::replies::Replies;

/// The upstream of a virtual server's client session.
#[derive(Debug)]
pub struct MembersUpstream {
    view: View,
    members: Box<[Member]>,
    shared: Arc<Shared>,
    /// The client's requests in flight by id → the member that has them (cancellation).
    inflight: Arc<Mutex<HashMap<Id, usize>>>,
    /// Numbers the gateway's own listings (their request ids).
    probes: std::sync::atomic::AtomicU64,
}

type Answer = Result<Value, Value>;

impl MembersUpstream {
    pub(crate) fn new(view: View, members: Box<[Member]>, shared: Arc<Shared>) -> Self {
        MembersUpstream {
            view,
            members,
            shared,
            inflight: Arc::default(),
            probes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn plan(&self) -> &Plan {
        self.view.plan()
    }

    /// Member `i`'s upstream while it is part of the session.
    fn live(&self, i: usize) -> Option<&dyn Link> {
        if !self.shared.is_up(i) {
            return None;
        }
        self.members.get(i)?.upstream.as_deref()
    }

    fn live_members(&self) -> impl Iterator<Item = (usize, &dyn Link)> {
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
            return Err(UpstreamError::Protocol("not a request".into()));
        };
        if let Some(list) = List::of(method) {
            return self.list(list, &msg, &id).await;
        }
        match method {
            mcpgate_jsonrpc::mcp::INITIALIZE => self.initialize(&msg, &id).await,
            "ping" => answer(&id, &json!({})),
            "tools/call" => self.by_name(Item::Tool, msg, id).await,
            "prompts/get" => self.by_name(Item::Prompt, msg, id).await,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.by_uri(msg, id).await
            }
            "completion/complete" => self.completion(msg, id).await,
            "logging/setLevel" => {
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

    /// Sends one request to member `i` and reads its answer; what the member relates to
    /// the request before it goes to the session.
    async fn ask(&self, i: usize, msg: Message) -> Result<Answer, UpstreamError> {
        let up = self.live(i).ok_or(UpstreamError::Closed)?;
        let mut replies = up.request(msg).await?;
        while let Some(item) = replies.next().await {
            let item = item?;
            if item.is_response() {
                let v: Value = serde_json::from_slice(item.raw())
                    .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
                return Ok(match v.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => Err(v.get("error").cloned().unwrap_or(Value::Null)),
                });
            }
            self.shared.deliver(i, item);
        }
        Err(UpstreamError::Protocol(
            "the member ended the request without an answer".into(),
        ))
    }

    /// Asks every `(member, request)` at once. A member that fails is dropped
    /// (`fail_open`) or fails the whole request (`fail_closed`, or its upstream session
    /// is gone: then the client must re-initialise).
    async fn fan_out(
        &self,
        asks: Vec<(usize, Message)>,
    ) -> Result<Vec<(usize, Answer)>, UpstreamError> {
        let answers = join_all(
            asks.into_iter()
                .map(|(i, m)| async move { (i, self.ask(i, m).await) }),
        )
        .await;
        let mut out = Vec::with_capacity(answers.len());
        for (i, a) in answers {
            match a {
                Ok(a) => out.push((i, a)),
                Err(e) if self.propagates(&e) => return Err(e),
                Err(e) if e.is_fatal() => self.shared.drop_member(i, &e),
                Err(e) => {
                    warn!(session = %self.shared.label, member = %self.shared.names[i], error = %e, "member did not answer; its part is missing");
                }
            }
        }
        Ok(out)
    }

    /// Whether a member's failure under a request ends the client's session (the error
    /// goes up, and the session's teardown follows).
    fn propagates(&self, e: &UpstreamError) -> bool {
        e.is_fatal() && self.shared.ends_session(e)
    }

    async fn initialize(&self, msg: &Message, id: &Id) -> Result<Replies, UpstreamError> {
        let asks: Vec<(usize, Message)> =
            self.live_members().map(|(i, _)| (i, msg.clone())).collect();
        let asked: Vec<usize> = asks.iter().map(|(i, _)| *i).collect();
        let answers = self.fan_out(asks).await?;
        // A member that did not answer (timeout, HTTP error) never finished its handshake:
        // it cannot stay in the session.
        for i in asked {
            if answers.iter().any(|(j, _)| *j == i) || !self.shared.is_up(i) {
                continue;
            }
            if self.plan().failure == Failure::Closed {
                return refuse(
                    id,
                    UPSTREAM_ERROR,
                    &format!("member {} did not answer initialize", self.shared.names[i]),
                );
            }
            let why = UpstreamError::Protocol("did not answer initialize".into());
            self.shared.drop_member(i, &why);
        }
        let mut ok = Vec::with_capacity(answers.len());
        for (i, a) in answers {
            match a {
                Ok(r) => ok.push((i, r)),
                Err(e) if self.plan().failure == Failure::Closed => {
                    let text = e.get("message").and_then(Value::as_str).unwrap_or("");
                    return refuse(
                        id,
                        UPSTREAM_ERROR,
                        &format!("member {} refused initialize: {text}", self.shared.names[i]),
                    );
                }
                Err(e) => {
                    let why = UpstreamError::Protocol(format!("refused initialize: {e}"));
                    self.shared.drop_member(i, &why);
                }
            }
        }
        if ok.is_empty() {
            return refuse(
                id,
                UPSTREAM_ERROR,
                &format!(
                    "no member of virtual server {} could start",
                    self.plan().name
                ),
            );
        }
        info!(session = %self.shared.label, members = ok.len(), of = self.members.len(), "virtual session initialized");
        self.shared
            .initialized
            .store(true, std::sync::atomic::Ordering::Release);
        answer(id, &catalogue::initialize(self.plan(), &ok))
    }

    async fn list(&self, list: List, msg: &Message, id: &Id) -> Result<Replies, UpstreamError> {
        if self.plan().naming == Naming::OnCollision && list.item() != Item::Resource {
            let entries = self.list_whole(list, msg).await?;
            return answer(id, &json!({ list.key(): entries }));
        }
        let first = param_str(msg, "cursor");
        let targets = match first.clone() {
            None => self.live_members().map(|(i, _)| (i, None)).collect(),
            Some(c) => match Cursor::decode(&c, self.members.len()) {
                Ok(c) => c.0,
                Err(e) => return refuse(id, INVALID_PARAMS, &format!("Invalid params: {e}")),
            },
        };
        let asked = targets.len();
        let (answers, answered) = self.list_round(msg, targets).await?;
        let page = catalogue::page(&self.view, list, &answers, None);
        if list.item() != Item::Resource
            && let Ok(mut r) = self.shared.routes.lock()
        {
            // Whole only when every member answered its only page.
            let whole = first.is_none() && page.more.is_empty() && answered == asked;
            r.learn(list.item(), whole, page.routes.iter().cloned());
        }
        let mut result = json!({ list.key(): page.entries });
        if !page.more.is_empty() {
            result["nextCursor"] = Value::String(Cursor(page.more).encode());
        }
        answer(id, &result)
    }

    /// One request to each `(member, cursor)`; members that answer with an error (no
    /// such capability) add nothing. Also says how many members answered at all (one
    /// that did not — a timeout, an HTTP error — leaves the list incomplete).
    async fn list_round(
        &self,
        msg: &Message,
        targets: Vec<(usize, Option<String>)>,
    ) -> Result<(Vec<(usize, Value)>, usize), UpstreamError> {
        let mut asks = Vec::with_capacity(targets.len());
        for (i, cursor) in targets {
            let params = match cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let m = rewrite::with_params(msg, &params)
                .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
            asks.push((i, m));
        }
        let answers = self.fan_out(asks).await?;
        let answered = answers.len();
        let lists = answers
            .into_iter()
            .filter_map(|(i, a)| match a {
                Ok(v) => Some((i, v)),
                Err(e) => {
                    debug!(session = %self.shared.label, member = %self.shared.names[i], error = %e, "member has no such list");
                    None
                }
            })
            .collect();
        Ok((lists, answered))
    }

    /// Every page of every member (asked with `msg`) as the entries of one merged page
    /// (names prefixed only on collision when the plan says so); the routes of its names
    /// are learned.
    async fn list_whole(&self, list: List, msg: &Message) -> Result<Vec<Value>, UpstreamError> {
        const MAX_PAGES: usize = 64;
        let mut all: Vec<(usize, Value)> = Vec::new();
        let mut targets: Vec<(usize, Option<String>)> =
            self.live_members().map(|(i, _)| (i, None)).collect();
        let mut complete = true;
        for _ in 0..MAX_PAGES {
            if targets.is_empty() {
                break;
            }
            let asked = targets.len();
            let (answers, answered) = self.list_round(msg, targets).await?;
            complete &= answered == asked;
            targets = answers
                .iter()
                .filter_map(|(i, v)| {
                    v.get("nextCursor")
                        .and_then(Value::as_str)
                        .map(|c| (*i, Some(c.to_owned())))
                })
                .collect();
            all.extend(answers.into_iter().map(|(i, mut v)| {
                if let Some(o) = v.as_object_mut() {
                    o.remove("nextCursor");
                }
                (i, v)
            }));
        }
        // Cut by the page cap, or a member did not answer: what is known is added, and a
        // miss may list again.
        complete &= targets.is_empty();
        let counts = (self.plan().naming == Naming::OnCollision)
            .then(|| catalogue::name_counts(self.plan(), list, &all));
        let page = catalogue::page(&self.view, list, &all, counts.as_ref());
        if let Ok(mut r) = self.shared.routes.lock() {
            r.learn(list.item(), complete, page.routes);
        }
        Ok(page.entries)
    }

    /// The member and own name of an exposed tool or prompt name.
    async fn resolve(
        &self,
        item: Item,
        exposed: &str,
    ) -> Result<Option<(usize, String)>, UpstreamError> {
        let known = |r: &Self| {
            r.shared
                .routes
                .lock()
                .ok()
                .and_then(|g| g.get(item, exposed))
        };
        if let Some(hit) = known(self) {
            return Ok(Some(hit));
        }
        let whole = self.shared.routes.lock().is_ok_and(|g| g.is_whole(item));
        if whole {
            return Ok(None);
        }
        // Not listed whole yet (or changed since): learn the names, then look again.
        let list = if item == Item::Tool {
            List::Tools
        } else {
            List::Prompts
        };
        let method = list.method();
        // An id no client request of this session can have in flight at a member.
        let n = self
            .probes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe_id = format!("\"mcpgate-probe-{n}\"");
        let probe =
            format!(r#"{{"jsonrpc":"2.0","id":{probe_id},"method":"{method}","params":{{}}}}"#);
        let probe = Message::parse(bytes::Bytes::from(probe))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        self.list_whole(list, &probe).await?;
        Ok(known(self))
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
        let params = Params::parse(&msg).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let Some(exposed) = params.str("name") else {
            return refuse(&id, INVALID_PARAMS, "Invalid params: name is required");
        };
        let Some((i, own)) = self.resolve(item, &exposed).await? else {
            return unknown(&exposed);
        };
        if let Some(refusal) = self.admit(item, (i, &own), &exposed, &id, || unknown(&exposed)) {
            return refusal;
        }
        let out = params
            .with("name", &Value::String(own))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        self.forward(i, out, id, None).await
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
        let params = Params::parse(&msg).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let Some(exposed) = params.str("uri") else {
            return refuse(&id, INVALID_PARAMS, "Invalid params: uri is required");
        };
        let not_found = || refuse(&id, -32002, &format!("Resource not found: {exposed}"));
        let Some((i, own)) = self.plan().route_uri(&exposed) else {
            return not_found();
        };
        if let Some(refusal) = self.admit(Item::Resource, (i, own), &exposed, &id, not_found) {
            return refusal;
        }
        let out = params
            .with("uri", &Value::String(own.to_owned()))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let read = msg.method() == Some("resources/read");
        self.forward(i, out, id, read.then_some(rewrite::read_result))
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
                .map(|(i, o)| (i, o.to_owned()))
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
        let out = rewrite::with_params(&msg, &params)
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
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
        post: Option<fn(&Plan, usize, Message) -> Message>,
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
                        .map_err(|e| UpstreamError::Protocol(e.to_string()))
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
        if msg.method() == Some(mcpgate_jsonrpc::mcp::CANCELLED) {
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
