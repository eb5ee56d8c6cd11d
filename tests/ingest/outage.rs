//! The database cut mid-run behind a TCP proxy: 503 with Retry-After and never a 2xx while it
//! is down, 503 within two seconds when it hangs, and recovery without a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::support::{app::*, database::*, http::*, signing::*};

const UP: u8 = 0;
const CUT: u8 = 1;
const HANG: u8 = 2;

/// A TCP proxy in front of Postgres that the test can cut (close every connection and refuse
/// new ones) or hang (keep every connection open and forward nothing more).
struct Proxy {
    port: u16,
    mode: Arc<tokio::sync::watch::Sender<u8>>,
    stop: CancellationToken,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(tokio::sync::watch::Sender::new(UP));
        let stop = CancellationToken::new();
        let (m, s) = (Arc::clone(&mode), stop.clone());
        tokio::spawn(async move {
            loop {
                let (client, _) = tokio::select! {
                    _ = s.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                let mut changed = m.subscribe();
                let current = *changed.borrow_and_update();
                match current {
                    CUT => drop(client),
                    HANG => {
                        tokio::spawn(async move {
                            let _ = changed.changed().await;
                            drop(client);
                        });
                    }
                    _ => {
                        let upstream = upstream.clone();
                        tokio::spawn(async move {
                            let Ok(mut server) = TcpStream::connect(&upstream).await else {
                                return;
                            };
                            let mut client = client;
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
                                _ = changed.changed() => {}
                            }
                            // Hung: the connection stays open and carries nothing until the
                            // next change ends it.
                            if *changed.borrow_and_update() == HANG {
                                let _ = changed.changed().await;
                            }
                            drop((client, server));
                        });
                    }
                }
            }
        });
        Self { port, mode, stop }
    }

    fn set(&self, mode: u8) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test]
async fn database_cut_mid_run_answers_503_and_recovers_without_restart() {
    let real = fresh_database().await;
    let (prefix, rest) = real.split_once("@").unwrap();
    let (hostport, dbname) = rest.split_once('/').unwrap();
    let proxy = Proxy::start(hostport.to_owned()).await;
    let via_proxy = format!("{prefix}@127.0.0.1:{}/{dbname}", proxy.port);
    let app = TestApp::builder().database_url(via_proxy).start().await;
    let db = sqlx::PgPool::connect(&real).await.unwrap();

    app.post_stripe("evt_before").await.assert_status(200);

    // The database hangs with connections open (the pool's connections go silent): the
    // answer is still a 503 within two seconds.
    proxy.set(HANG);
    let started = Instant::now();
    let answer = app.post_stripe("evt_hang").await;
    answer.assert_is(503, "storage_unavailable", "");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "503 took {:?}",
        started.elapsed()
    );

    proxy.set(CUT);
    for i in 0..20 {
        let (headers, body) = signed_stripe_event(&format!("evt_during_{i}"));
        let started = Instant::now();
        let answer = app.post("stripe", &refs(&headers), body).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "503 took {:?}",
            started.elapsed()
        );
        answer.assert_is(503, "storage_unavailable", format!("request {i}"));
        assert_eq!(answer.headers["retry-after"], "5");
    }

    assert_eq!(
        app.readiness().await,
        503,
        "not ready while the database is cut"
    );

    proxy.set(UP);
    // The provider retries what was refused; it converges once the database is back.
    let mut recovered = false;
    for _ in 0..50 {
        let answer = app.post_stripe("evt_during_0").await;
        assert!(answer.status == 200 || answer.status == 503, "{answer:?}");
        if answer.status == 200 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(recovered, "the receiver recovers without a restart");
    assert_eq!(app.readiness().await, 200);
    let (headers, body) = signed_stripe_event("evt_during_0");
    assert_eq!(
        app.post("stripe", &refs(&headers), body).await.code(),
        "duplicate"
    );
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT provider_event_id FROM webhook_inbox ORDER BY 1")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(
        rows,
        ["evt_before", "evt_during_0"],
        "nothing refused was stored, nothing acknowledged lost"
    );
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_outbox")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(outbox, 2);
}
