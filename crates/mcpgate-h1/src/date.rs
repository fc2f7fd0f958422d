//! The `Date` header's value (RFC 9110 §6.6.1: an origin server with a clock sends it),
//! formatted at most once per second per thread.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
const LEN: usize = 29;

struct Cached {
    second: u64,
    text: [u8; LEN],
}

thread_local! {
    static CACHE: RefCell<Cached> = const { RefCell::new(Cached { second: u64::MAX, text: [b' '; LEN] }) };
}

/// The current date as an HTTP date, given to `f`.
pub fn http_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.second != second {
            let s = httpdate::fmt_http_date(now);
            if s.len() == LEN {
                c.text.copy_from_slice(s.as_bytes());
            }
            c.second = second;
        }
        f(&c.text)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_date_parses_back() {
        let s = super::http_date(|d| String::from_utf8(d.to_vec()).unwrap_or_default());
        assert_eq!(s.len(), 29);
        assert!(httpdate::parse_http_date(&s).is_ok(), "{s}");
    }
}
