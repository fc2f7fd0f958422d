//! MCP method names, parsed once per message into a [`Method`] and matched from then on.

use std::fmt;

/// Declares [`Method`] and its names in one table, so a name is written exactly once.
macro_rules! methods {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// The method of a request or notification. Every method the gateway treats in a
        /// way of its own has a variant; any other is [`Method::Other`] and is forwarded
        /// as it came.
        #[derive(Clone, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $(#[$doc])* $variant, )*
            /// A method the gateway only forwards.
            Other(Box<str>),
        }

        impl Method {
            /// The method called `name`.
            pub fn parse(name: &str) -> Method {
                match name {
                    $( $name => Method::$variant, )*
                    other => Method::Other(other.into()),
                }
            }

            /// The method's name on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Method::$variant => $name, )*
                    Method::Other(name) => name,
                }
            }

            /// The name of a method the gateway knows (`None` for [`Method::Other`]).
            pub fn static_name(&self) -> Option<&'static str> {
                match self {
                    $( Method::$variant => Some($name), )*
                    Method::Other(_) => None,
                }
            }
        }
    };
}

methods! {
    /// `initialize` (session era).
    Initialize = "initialize",
    /// `ping`.
    Ping = "ping",
    /// `tools/list`.
    ToolsList = "tools/list",
    /// `tools/call`.
    ToolsCall = "tools/call",
    /// `prompts/list`.
    PromptsList = "prompts/list",
    /// `prompts/get`.
    PromptsGet = "prompts/get",
    /// `resources/list`.
    ResourcesList = "resources/list",
    /// `resources/templates/list`.
    ResourceTemplatesList = "resources/templates/list",
    /// `resources/read`.
    ResourcesRead = "resources/read",
    /// `resources/subscribe` (session era).
    ResourcesSubscribe = "resources/subscribe",
    /// `resources/unsubscribe` (session era).
    ResourcesUnsubscribe = "resources/unsubscribe",
    /// `completion/complete`.
    Complete = "completion/complete",
    /// `logging/setLevel` (session era).
    SetLevel = "logging/setLevel",
    /// `server/discover` (2026-07-28).
    Discover = "server/discover",
    /// `subscriptions/listen` (2026-07-28).
    Listen = "subscriptions/listen",
    /// `sampling/createMessage` (server to client).
    CreateMessage = "sampling/createMessage",
    /// `elicitation/create` (server to client).
    Elicit = "elicitation/create",
    /// `roots/list` (server to client).
    RootsList = "roots/list",
    /// `notifications/initialized`.
    Initialized = "notifications/initialized",
    /// `notifications/cancelled`.
    Cancelled = "notifications/cancelled",
    /// `notifications/progress`.
    Progress = "notifications/progress",
    /// `notifications/message` (a log line).
    LogMessage = "notifications/message",
    /// `notifications/tools/list_changed`.
    ToolsListChanged = "notifications/tools/list_changed",
    /// `notifications/prompts/list_changed`.
    PromptsListChanged = "notifications/prompts/list_changed",
    /// `notifications/resources/list_changed`.
    ResourcesListChanged = "notifications/resources/list_changed",
    /// `notifications/resources/updated`.
    ResourceUpdated = "notifications/resources/updated",
    /// `notifications/roots/list_changed`.
    RootsListChanged = "notifications/roots/list_changed",
    /// `notifications/subscriptions/acknowledged` (2026-07-28).
    Acknowledged = "notifications/subscriptions/acknowledged",
    /// `notifications/elicitation/complete`.
    ElicitationComplete = "notifications/elicitation/complete",
    /// `tasks/get`.
    TasksGet = "tasks/get",
    /// `tasks/update`.
    TasksUpdate = "tasks/update",
    /// `tasks/cancel`.
    TasksCancel = "tasks/cancel",
}

impl Method {
    /// Whether the server asks the client something with this method (a server request
    /// the client must answer).
    pub fn asks_client(&self) -> bool {
        matches!(
            self,
            Method::CreateMessage | Method::Elicit | Method::RootsList
        )
    }

    /// The `params` field whose value `Mcp-Name` mirrors (2026-07-28), if it has one:
    /// what the request is about.
    pub fn name_field(&self) -> Option<&'static str> {
        match self {
            Method::ToolsCall | Method::PromptsGet => Some("name"),
            Method::ResourcesRead => Some("uri"),
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Some("taskId"),
            _ => None,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::Method;

    #[test]
    fn names_round_trip() {
        for name in ["initialize", "tools/call", "notifications/cancelled", "x/y"] {
            assert_eq!(Method::parse(name).as_str(), name);
        }
        assert_eq!(Method::parse("tools/call"), Method::ToolsCall);
        assert!(matches!(Method::parse("vendor/thing"), Method::Other(_)));
        assert!(Method::Elicit.asks_client());
        assert!(!Method::ToolsCall.asks_client());
    }
}
