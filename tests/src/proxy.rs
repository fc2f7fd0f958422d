//! A tiny HTTP `CONNECT` proxy on loopback, for the test of upstreams reached through
//! `HTTPS_PROXY`: it tunnels each `CONNECT host:port` to that address and records the
//! targets it was asked for.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct ConnectProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    tunnels: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConnectProxy {
    /// Starts the proxy.
    pub async fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let tunnels: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = tunnels.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = tunnel(client, seen).await;
                });
            }
        });
        ConnectProxy { url, tunnels, task }
    }

    /// The `host:port` of every `CONNECT` so far.
    pub fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().unwrap().clone()
    }
}

async fn tunnel(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await? == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    seen.lock().unwrap().push(target.to_owned());
    let Ok(mut upstream) = TcpStream::connect(target).await else {
        client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}
