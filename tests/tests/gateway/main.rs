//! Integration tests: the real `mcpgate` binary over real sockets.
//! Build the binaries first: `cargo build --workspace --bins`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod auth;
mod bad_input;
mod bridge_clients;
mod bridge_reverse;
mod bridge_state;
mod bridge_storm;
mod check_config;
mod crosstalk;
mod dashboard;
mod death;
mod desync;
/// Fault injection, one kind a file: in every case the gateway stays up, its memory stays
/// bounded, and another session keeps working.
mod faults {
    mod dying;
    mod floods;
    mod garbage;
    mod hangs;
    mod stalls;
}
mod field;
/// `mcpgate inspector`, driven with the MCP Inspector UI's own query shapes and headers.
mod inspector {
    mod config;
    mod refusals;
    mod remote;
    mod sessions;
    mod stdio;
}
/// `mcpgate inspector` speaking the Inspector 2.x protocol: its UI, API and relay.
mod inspector2 {
    mod api;
    mod fetch;
    mod relay;
}
mod inspector_ui;
mod inspector_v2_ui;
mod lifecycle;
mod limits;
mod matrix;
mod modern_clients;
mod modern_headers;
mod modern_streams;
/// Upstream OAuth: the gateway's tokens toward protected servers, per principal.
mod oauth {
    mod config;
    mod gateway_grants;
    mod shared_vault;
    mod user_consent;
}
/// Replicas behind a real nginx running the shipped configs.
mod replicas {
    mod bridged;
    mod ids;
    mod kubernetes;
    mod sealed;
    mod shipped_nginx;
}
mod reload;
mod resume;
mod rmcp_client;
mod sdk_clients;
mod slow_clients;
/// stdio servers at scale: no orphans, start backoff, the sandbox, per-child bounds.
mod stdio_scale {
    mod backoff;
    mod bounds;
    mod cgroups;
    mod check;
    mod crowd;
    mod orphans;
    mod sandbox;
    mod warm;
}
mod storm;
mod tls_listener;
mod tls_upstream;
mod tracing;
mod upstream_conns;
mod versions;
/// Virtual servers: several servers behind one endpoint, one upstream session per member.
mod virtuals {
    mod access;
    mod apps;
    mod crosstalk;
    mod eras;
    mod failures;
    mod naming;
    mod sdk;
    mod teardown;
}
