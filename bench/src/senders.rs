//! The generator's connections to the receiver, opened as the load needs them, the way a
//! provider's senders work: a request goes out on an idle connection, or on a new one when
//! every open one is busy (up to `max_connections`; past that it waits its turn, and the wait
//! is in its latency). A connection the receiver closes (`Connection: close`, a shed 503, an
//! idle close at its cap) is not reused: the next request that needs one opens another.
//!
//! Explicit rather than reqwest's pool: under overload that pool kept thousands of requests
//! waiting for a connection while over a thousand of its open connections sat idle, so the
//! numbers measured the pool, not the receiver (docs/performance.md, "The 3x collapse").

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What came back for one request.
pub enum Reply {
    Answer {
        status: u16,
        body: Bytes,
    },
    /// No answer: `connect: ...`, `request: ...` or `timeout`.
    Transport(String),
}

/// One request and what to do with its reply.
pub struct Job {
    pub signature: String,
    pub body: Bytes,
    pub done: Box<dyn FnOnce(Reply) + Send + Sync>,
}

pub struct Senders {
    addr: SocketAddr,
    host: String,
    path: String,
    timeout: Duration,
    max_connections: usize,
    /// Closed by the receiver's keep-alive timeout otherwise (10 s by default).
    idle_for: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Connections between requests, most recently used last.
    idle: Vec<mpsc::Sender<Job>>,
    /// Requests waiting for a connection (only when `max_connections` are open).
    waiting: VecDeque<Job>,
    open: usize,
    /// The most connections open at once.
    peak: usize,
}

impl Senders {
    pub fn new(
        addr: SocketAddr,
        host: String,
        path: String,
        timeout: Duration,
        max_connections: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            addr,
            host,
            path,
            timeout,
            max_connections: max_connections.max(1),
            idle_for: Duration::from_secs(5),
            state: Mutex::default(),
        })
    }

    pub fn peak_connections(&self) -> usize {
        self.lock().peak
    }

    /// Sends `job` now on an idle connection or a new one, or queues it.
    pub fn submit(self: &Arc<Self>, mut job: Job) {
        let mut state = self.lock();
        while let Some(idle) = state.idle.pop() {
            match idle.try_send(job) {
                Ok(()) => return,
                // That connection's task has just ended.
                Err(e) => job = e.into_inner(),
            }
        }
        if state.open < self.max_connections {
            state.open += 1;
            state.peak = state.peak.max(state.open);
            drop(state);
            tokio::spawn(Arc::clone(self).connection(job));
        } else {
            state.waiting.push_back(job);
        }
    }

    /// One connection's life: requests one after another until it closes or idles out.
    async fn connection(self: Arc<Self>, first: Job) {
        let (tx, mut rx) = mpsc::channel(1);
        let mut conn: Option<SendRequest<Full<Bytes>>> = None;
        let mut job = first;
        loop {
            let (reply, reusable) = self.send(&mut conn, &job).await;
            (job.done)(reply);
            if !reusable {
                conn = None;
            }
            let next = {
                let mut state = self.lock();
                match state.waiting.pop_front() {
                    Some(next) => Some(next),
                    None if conn.is_none() => {
                        state.open -= 1;
                        return;
                    }
                    None => {
                        state.idle.push(tx.clone());
                        None
                    }
                }
            };
            job = match next {
                Some(next) => next,
                None => match tokio::time::timeout(self.idle_for, rx.recv()).await {
                    Ok(Some(next)) => next,
                    _ => {
                        // Idle too long: leave, unless a request was handed over just now
                        // (then this is its last: nothing more can be handed to it).
                        rx.close();
                        match rx.try_recv() {
                            Ok(next) => next,
                            Err(_) => {
                                self.lock().open -= 1;
                                return;
                            }
                        }
                    }
                },
            };
        }
    }

    /// Sends one request, connecting first when needed; whether the connection can carry
    /// another. A kept-alive connection the receiver closed meanwhile is replaced once, as
    /// HTTP clients do for a request that never left.
    async fn send(&self, conn: &mut Option<SendRequest<Full<Bytes>>>, job: &Job) -> (Reply, bool) {
        let deadline = Instant::now() + self.timeout;
        let exchange = async {
            // A kept-alive connection the receiver closed is replaced; a new one is not.
            let stale = match conn.as_mut() {
                Some(sender) => sender.ready().await.is_err(),
                None => true,
            };
            if stale {
                let mut fresh = self.connect().await?;
                if fresh.ready().await.is_err() {
                    return Err("request: connection closed before the request".to_owned());
                }
                *conn = Some(fresh);
            }
            let sender = conn.as_mut().expect("ready");
            let request = hyper::Request::post(&self.path)
                .header(hyper::header::HOST, &self.host)
                .header("stripe-signature", &job.signature)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(job.body.clone()))
                .expect("a valid request");
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| format!("request: {}", short(&e)))?;
            let status = response.status().as_u16();
            let close = response
                .headers()
                .get(hyper::header::CONNECTION)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("request: {}", short(&e)))?
                .to_bytes();
            Ok((Reply::Answer { status, body }, !close))
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (Reply::Transport(e), false),
            Err(_) => (Reply::Transport("timeout".into()), false),
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, driver) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("connect: {}", short(&e)))?;
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(sender)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("not poisoned")
    }
}

/// The innermost cause, cut to 80 bytes: a short, stable name for an error.
fn short(e: &dyn std::error::Error) -> String {
    let mut source = e;
    while let Some(next) = source.source() {
        source = next;
    }
    let mut detail = source.to_string();
    detail.truncate(80);
    detail
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A receiver that answers every request `{}`, closing after each when `close`; counts
    /// the connections it accepted.
    async fn receiver(close: bool) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: the head, then content-length bytes.
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            if !read_more(&mut stream, &mut buf).await {
                                return;
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while buf.len() < end + 4 + len {
                            if !read_more(&mut stream, &mut buf).await {
                                return;
                            }
                        }
                        buf.drain(..end + 4 + len);
                        let connection = if close { "connection: close\r\n" } else { "" };
                        let answer =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{connection}\r\n{{}}");
                        if stream.write_all(answer.as_bytes()).await.is_err() || close {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    /// Appends what the peer sent next; false at its end.
    async fn read_more(stream: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> bool {
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    fn to(addr: SocketAddr, max_connections: usize) -> Arc<Senders> {
        let path = "/webhooks/x".to_owned();
        Senders::new(
            addr,
            addr.to_string(),
            path,
            Duration::from_secs(5),
            max_connections,
        )
    }

    /// Submits `n` requests at once and waits for every reply.
    async fn send_all(senders: &Arc<Senders>, n: usize) -> Vec<u16> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for _ in 0..n {
            let tx = tx.clone();
            senders.submit(Job {
                signature: "t=1,v1=00".into(),
                body: Bytes::from_static(b"{\"id\":\"evt\"}"),
                done: Box::new(move |reply| {
                    let status = match reply {
                        Reply::Answer { status, .. } => status,
                        Reply::Transport(e) => panic!("no answer: {e}"),
                    };
                    tx.send(status).unwrap();
                }),
            });
        }
        drop(tx);
        let mut statuses = Vec::new();
        while let Some(status) = rx.recv().await {
            statuses.push(status);
        }
        statuses
    }

    #[tokio::test]
    async fn requests_past_the_connection_bound_wait_their_turn_on_kept_alive_connections() {
        let (addr, accepted) = receiver(false).await;
        let senders = to(addr, 2);
        let statuses = send_all(&senders, 20).await;
        assert_eq!(statuses, vec![200; 20]);
        assert_eq!(senders.peak_connections(), 2);
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "connections were reused"
        );
    }

    #[tokio::test]
    async fn a_connection_the_receiver_closes_is_not_reused() {
        let (addr, accepted) = receiver(true).await;
        let senders = to(addr, 1);
        let statuses = send_all(&senders, 5).await;
        assert_eq!(statuses, vec![200; 5]);
        assert_eq!(accepted.load(Ordering::SeqCst), 5);
    }
}
