//! What happens to a message the upstream sends while its session serves one bridged
//! request (the session is leased to that request alone, so everything it says belongs
//! to it).

use mcpgate_jsonrpc::{Kind, Message, Method};

/// Where an upstream message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// The request's answer: translated ([`crate::to_modern_answer`]) and the last message.
    Answer,
    /// To the client on the request's stream, as it is (progress; log messages the
    /// request asked for).
    Forward,
    /// Nowhere: nothing in 2026-07-28 carries it on a request's stream (list changes and
    /// resource updates travel on `subscriptions/listen`; log messages the request did not
    /// ask for).
    Drop,
    /// A `ping`: the gateway answers it.
    Ping,
    /// A request for the client (elicitation, sampling, roots): 2026-07-28 asks for it
    /// with an `input_required` result.
    ForClient,
    /// Any other server request: refused with `-32601`.
    Refuse,
}

/// The disposition of `msg`; `wants_logs` = the request carried `_meta.logLevel`.
pub fn disposition(msg: &Message, wants_logs: bool) -> Disposition {
    match msg.kind() {
        Kind::Response { .. } => Disposition::Answer,
        Kind::Notification { method } => match method {
            Method::Progress => Disposition::Forward,
            Method::LogMessage if wants_logs => Disposition::Forward,
            _ => Disposition::Drop,
        },
        Kind::Request { method, .. } => match method {
            Method::Ping => Disposition::Ping,
            m if m.asks_client() => Disposition::ForClient,
            _ => Disposition::Refuse,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn d(s: &str, logs: bool) -> Disposition {
        disposition(&Message::parse(Bytes::from(s.to_owned())).unwrap(), logs)
    }

    #[test]
    fn each_kind_has_its_place() {
        assert_eq!(
            d(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, false),
            Disposition::Answer
        );
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        assert_eq!(d(progress, false), Disposition::Forward);
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}}"#;
        assert_eq!(d(log, true), Disposition::Forward);
        assert_eq!(d(log, false), Disposition::Drop);
        assert_eq!(
            d(
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
                true
            ),
            Disposition::Drop
        );
        assert_eq!(
            d(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#, false),
            Disposition::Ping
        );
        assert_eq!(
            d(
                r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{}}"#,
                false
            ),
            Disposition::ForClient
        );
        assert_eq!(
            d(r#"{"jsonrpc":"2.0","id":9,"method":"weird/thing"}"#, false),
            Disposition::Refuse
        );
    }
}
