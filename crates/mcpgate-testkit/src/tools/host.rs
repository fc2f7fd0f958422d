//! Host probes: unlisted tools that show what the server's process may do on its host —
//! read or write a file, open a TCP connection, hold memory, start threads. The
//! gateway's sandbox and limit tests call them (a sandboxed child must fail where a plain
//! one succeeds). They are not in `tools/list`, so listings stay what other tests expect.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::catalogue::{Done, invalid, text_result, tool_error};

/// Memory the `hold_memory` tool keeps (for the life of the process).
static HELD: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// The probe `name` called with `args`, or `None` if `name` is not one.
pub(super) async fn call(name: &str, args: &Value) -> Option<Done> {
    let str_arg = |k: &str| args.get(k).and_then(Value::as_str);
    let u64_arg = |k: &str| args.get(k).and_then(Value::as_u64);
    Some(match name {
        "read_file" => match str_arg("path") {
            Some(p) => match tokio::fs::read_to_string(p).await {
                Ok(t) => Done::Ok(text_result(t)),
                Err(e) => tool_error(format!("cannot read {p}: {e}")),
            },
            None => invalid("read_file needs a string `path`"),
        },
        "write_file" => match (str_arg("path"), str_arg("text")) {
            (Some(p), Some(t)) => match tokio::fs::write(p, t).await {
                Ok(()) => Done::Ok(text_result(format!("wrote {p}"))),
                Err(e) => tool_error(format!("cannot write {p}: {e}")),
            },
            _ => invalid("write_file needs strings `path` and `text`"),
        },
        "connect" => match str_arg("addr") {
            Some(a) => {
                let tried =
                    tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(a))
                        .await;
                match tried {
                    Ok(Ok(_)) => Done::Ok(text_result(format!("connected to {a}"))),
                    Ok(Err(e)) => tool_error(format!("cannot connect to {a}: {e}")),
                    Err(_) => tool_error(format!("cannot connect to {a}: timed out")),
                }
            }
            None => invalid("connect needs a string `addr`"),
        },
        "hold_memory" => match u64_arg("mib").and_then(|m| usize::try_from(m).ok()) {
            Some(mib) => {
                // Touched page by page, so it is resident, not just reserved.
                let block = vec![1u8; mib << 20];
                if let Ok(mut h) = HELD.lock() {
                    h.push(block);
                }
                Done::Ok(text_result(format!("holding {mib} MiB more")))
            }
            None => invalid("hold_memory needs an integer `mib`"),
        },
        "threads" => match u64_arg("count") {
            Some(n) => {
                for _ in 0..n {
                    std::thread::spawn(|| std::thread::sleep(Duration::from_secs(3600)));
                }
                Done::Ok(text_result(format!("started {n} threads")))
            }
            None => invalid("threads needs an integer `count`"),
        },
        _ => return None,
    })
}
