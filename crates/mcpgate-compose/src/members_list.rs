//! The fan-out of a virtual session's requests that every member answers: `initialize`
//! (answers merged), the lists (pages merged, names and URIs exposed, routes learned),
//! `logging/setLevel`; and what a name the client calls resolves to.

use futures::StreamExt;
use futures::future::join_all;
use mcpgate_jsonrpc::error::{INVALID_PARAMS, UPSTREAM_ERROR};
use mcpgate_jsonrpc::{Id, Message};
use mcpgate_upstream::{ProtocolError, Replies, UpstreamError};
use mcpgate_virtual::catalogue::{self, List};
use mcpgate_virtual::rewrite::{self, param_str};
use mcpgate_virtual::{Cursor, Failure, Item, Naming};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::members::Members;
use crate::members_shared::{answer, refuse};

type Answer = Result<Value, Value>;

impl Members {
    /// Sends one request to member `i` and reads its answer; what the member relates to
    /// the request before it goes to the session.
    pub(crate) async fn ask(&self, i: usize, msg: Message) -> Result<Answer, UpstreamError> {
        let up = self.live(i).ok_or(UpstreamError::Closed)?;
        let mut replies = up.request(msg).await?;
        while let Some(item) = replies.next().await {
            let item = item?;
            if item.is_response() {
                let v: Value = serde_json::from_slice(item.raw())?;
                return Ok(match v.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => Err(v.get("error").cloned().unwrap_or(Value::Null)),
                });
            }
            self.shared.deliver(i, item);
        }
        Err(ProtocolError::NoResponse.into())
    }

    /// Asks every `(member, request)` at once. A member that fails is dropped
    /// (`fail_open`) or fails the whole request (`fail_closed`, or its upstream session
    /// is gone: then the client must re-initialise).
    pub(crate) async fn fan_out(
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
    pub(crate) fn propagates(&self, e: &UpstreamError) -> bool {
        e.is_fatal() && self.shared.ends_session(e)
    }

    pub(crate) async fn initialize(
        &self,
        msg: &Message,
        id: &Id,
    ) -> Result<Replies, UpstreamError> {
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
            self.shared.drop_member(i, &"did not answer initialize");
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
                    self.shared
                        .drop_member(i, &format_args!("refused initialize: {e}"));
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

    pub(crate) async fn list(
        &self,
        list: List,
        msg: &Message,
        id: &Id,
    ) -> Result<Replies, UpstreamError> {
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
            let m = rewrite::with_params(msg, &params).map_err(UpstreamError::translate)?;
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
    pub(crate) async fn resolve(
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
        // An id no client request of this session can have in flight at a member.
        let n = self
            .probes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = json!({"jsonrpc": "2.0", "id": format!("mcpgate-probe-{n}"),
            "method": list.method().as_str(), "params": {}});
        let probe = Message::parse(bytes::Bytes::from(probe.to_string()))?;
        self.list_whole(list, &probe).await?;
        Ok(known(self))
    }
}
