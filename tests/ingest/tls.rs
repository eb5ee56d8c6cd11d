//! HTTPS on the public listener, with certificates made at test time by a test CA: signed
//! requests accepted over TLS; plain HTTP bytes answered by nothing; a stalled handshake
//! bounded like a request head; certificate files replaced while a connection stays open
//! (reloaded, or refused and the old pair kept); the start refusals; and forwarded client
//! headers, believed only from trusted proxies.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use wharf::config::Config;
use wharf::{Server, ServerOptions};

use crate::support::{app::*, files::*, http::*, process::*, signing::*, wait::*};

/// A CA that exists only for one test; every client here trusts it and nothing else.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

/// A server certificate for 127.0.0.1 and its key, PEM.
struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
    not_after: i64,
}

impl TestCa {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "wharf test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
        }
    }

    /// A leaf named `name` (so two leaves differ), valid until `days` from now.
    fn leaf(&self, name: &str, days: i64) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .unwrap();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(days);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            not_after: params.not_after.unix_timestamp(),
        }
    }

    /// A client that trusts this CA only, speaking TLS itself, so the test can see which
    /// certificate the server presented.
    fn connector(&self) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        // Every connection a full handshake: a resumed session presents no certificate.
        config.resumption = rustls::client::Resumption::disabled();
        TlsConnector::from(Arc::new(config))
    }

    fn reqwest_client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(self.pem.as_bytes()).unwrap())
            .tls_built_in_root_certs(false)
            .build()
            .unwrap()
    }
}

/// Where the server reads its pair; replaced the way deploy tools should, key first.
struct PairFiles {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
}

impl PairFiles {
    fn new(leaf: &Leaf) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let files = Self {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("key.pem"),
            _dir: dir,
        };
        files.install(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes());
        files
    }

    fn install(&self, cert_pem: &[u8], key_pem: &[u8]) {
        install_atomically(&self.key, key_pem);
        install_atomically(&self.cert, cert_pem);
    }
}

async fn tls_app(files: &PairFiles) -> TestApp {
    TestApp::builder()
        .tls(&files.cert, &files.key)
        .start()
        .await
}

async fn connect(connector: &TlsConnector, addr: SocketAddr) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    connector
        .connect(ServerName::from(addr.ip()), tcp)
        .await
        .expect("TLS handshake with the test CA's certificate")
}

fn presented(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("a certificate")[0]
        .clone()
}

/// A signed Stripe request as raw HTTP/1.1 bytes, with `extra_headers` (whole lines).
fn raw_stripe_request(event_id: &str, extra_headers: &str) -> String {
    let (headers, body) = signed_stripe_event(event_id);
    let mut request = format!(
        "POST /webhooks/stripe HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\n{extra_headers}",
        body.len()
    );
    for (k, v) in &headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    request
}

/// One signed Stripe request on an open connection, kept alive, and its answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    event_id: &str,
    extra_headers: &str,
) -> Answer {
    let request = raw_stripe_request(event_id, extra_headers);
    stream.write_all(request.as_bytes()).await.unwrap();
    read_response(stream).await
}

/// Reads one answer framed by `content-length` (what the receiver always sends).
async fn read_response<S: AsyncRead + Unpin>(stream: &mut S) -> Answer {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    // Header values as sent (`head` is lowercased to find the length).
                    let headers = String::from_utf8_lossy(&buf[..end])
                        .lines()
                        .skip(1)
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().parse().unwrap(), v.trim().parse().unwrap()))
                        .collect();
                    return Answer::from_parts(status, headers, &buf[end + 4..end + 4 + length]);
                }
            }
            let n = stream
                .read(&mut chunk)
                .await
                .expect("connection still open");
            assert!(n > 0, "closed before a whole answer: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer within 10 s")
}

/// The value of the series `series` (name with labels) in `/metrics`, 0 when absent.
async fn metric(app: &TestApp, series: &str) -> i64 {
    crate::support::http::metric(&app.metrics().await, series) as i64
}

const LOADED: &str = "wharf_tls_reloads_total{outcome=\"loaded\"}";
const FAILED: &str = "wharf_tls_reloads_total{outcome=\"failed\"}";
const EXPIRY: &str = "wharf_tls_cert_expiry_timestamp_seconds";

#[tokio::test]
async fn a_signed_request_over_https_is_accepted_and_committed() {
    let ca = TestCa::new();
    let leaf = ca.leaf("first", 30);
    let files = PairFiles::new(&leaf);
    let app = tls_app(&files).await;
    assert!(app.base.starts_with("https://"), "{}", app.base);

    let (headers, body) = signed_stripe_event("evt_over_tls");
    let answer = post(
        &ca.reqwest_client(),
        &app.base,
        "stripe",
        &refs(&headers),
        body,
    )
    .await;
    answer.assert_accepted("");
    assert_eq!(app.count("webhook_inbox").await, 1);
    // The gauge operators alert on is the serving certificate's notAfter.
    assert_eq!(metric(&app, EXPIRY).await, leaf.not_after);
    app.shutdown().await;
}

#[tokio::test]
async fn plain_http_to_the_tls_listener_gets_no_http_answer_and_nothing_is_stored() {
    let ca = TestCa::new();
    let files = PairFiles::new(&ca.leaf("first", 30));
    let app = tls_app(&files).await;

    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    let request = raw_stripe_request("evt_plain", "");
    stream.write_all(request.as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(15)).await;
    assert!(closed, "the connection stays open: {answer:?}");
    assert!(
        !answer.contains("HTTP/"),
        "answered in plain HTTP: {answer:?}"
    );
    assert_eq!(app.count("webhook_inbox").await, 0);
    // The listener still serves TLS clients afterwards.
    let mut tls = connect(&ca.connector(), app.addr).await;
    assert_eq!(exchange(&mut tls, "evt_after_plain", "").await.status, 200);
    app.shutdown().await;
}

/// A silent TLS client holds its slot until the header timeout, like a slow request head;
/// meanwhile a new connection at the cap is answered 503 `overloaded` over TLS at once (not
/// left in the backlog), and once the stalled one is cut a new one is served.
#[tokio::test]
async fn a_stalled_handshake_holds_a_connection_slot_and_is_cut_after_the_header_timeout() {
    let ca = TestCa::new();
    let files = PairFiles::new(&ca.leaf("first", 30));
    let app = TestApp::builder()
        .tls(&files.cert, &files.key)
        .server_toml("header_timeout_ms = 2000\nmax_connections = 1")
        .start()
        .await;

    // Connected, and silent: no ClientHello ever comes.
    let mut stalled = TcpStream::connect(app.addr).await.unwrap();
    let started = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let connector = ca.connector();
    let mut shed = connect(&connector, app.addr).await;
    let answer = exchange(&mut shed, "evt_during_stall", "").await;
    assert_eq!(
        (answer.status, answer.json["error"].as_str()),
        (503, Some("overloaded"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(15)).await;
    assert!(closed && answer.is_empty(), "{closed} {answer:?}");
    // The one slot was the stalled handshake's until its deadline.
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    let mut served = connect(&connector, app.addr).await;
    assert_eq!(
        exchange(&mut served, "evt_after_stall", "").await.status,
        200
    );
    app.shutdown().await;
}

/// What the reload tests start from: a receiver serving a first pair ("old"), and a
/// connection open to it that has carried one event.
struct Serving {
    ca: TestCa,
    old: Leaf,
    files: PairFiles,
    app: TestApp,
    connector: TlsConnector,
    open: TlsStream<TcpStream>,
}

async fn serving_old_pair(first_event: &str) -> Serving {
    let ca = TestCa::new();
    let old = ca.leaf("old", 30);
    let files = PairFiles::new(&old);
    let app = tls_app(&files).await;
    let connector = ca.connector();
    let mut open = connect(&connector, app.addr).await;
    assert_eq!(presented(&open), old.der);
    assert_eq!(exchange(&mut open, first_event, "").await.status, 200);
    Serving {
        ca,
        old,
        files,
        app,
        connector,
        open,
    }
}

#[tokio::test]
async fn a_replaced_certificate_serves_new_connections_while_open_ones_keep_working() {
    let Serving {
        ca,
        old,
        files,
        app,
        connector,
        mut open,
    } = serving_old_pair("evt_before_swap").await;

    let new = ca.leaf("new", 60);
    files.install(new.cert_pem.as_bytes(), new.key_pem.as_bytes());
    eventually("the new pair is loaded", || async {
        metric(&app, LOADED).await == 1
    })
    .await;
    assert_eq!(metric(&app, EXPIRY).await, new.not_after);
    assert_eq!(metric(&app, FAILED).await, 0);

    // The connection made before the swap carries another request, on the same session.
    let answer = exchange(&mut open, "evt_after_swap_same_conn", "").await;
    assert_eq!(
        (answer.status, answer.json["status"].as_str()),
        (200, Some("accepted"))
    );
    assert_eq!(presented(&open), old.der);
    // A new connection gets the new certificate.
    let mut fresh = connect(&connector, app.addr).await;
    assert_eq!(presented(&fresh), new.der);
    assert_eq!(exchange(&mut fresh, "evt_new_conn", "").await.status, 200);
    assert_eq!(app.count("webhook_inbox").await, 3);
    app.shutdown().await;
}

#[tokio::test]
async fn a_broken_replacement_is_refused_and_the_old_certificate_keeps_serving() {
    let Serving {
        ca,
        old,
        files,
        app,
        connector,
        mut open,
    } = serving_old_pair("evt_before_broken").await;

    // A valid certificate with someone else's key: the key does not match.
    let (new, stranger) = (ca.leaf("new", 60), ca.leaf("stranger", 60));
    files.install(new.cert_pem.as_bytes(), stranger.key_pem.as_bytes());
    eventually("the mismatched pair is refused", || async {
        metric(&app, FAILED).await >= 1
    })
    .await;
    let refused = metric(&app, FAILED).await;
    assert_eq!(presented(&connect(&connector, app.addr).await), old.der);

    // A certificate file that is not PEM at all.
    files.install(b"not a certificate", new.key_pem.as_bytes());
    eventually("the unreadable pair is refused", || async {
        metric(&app, FAILED).await > refused
    })
    .await;
    let mut fresh = connect(&connector, app.addr).await;
    assert_eq!(presented(&fresh), old.der);
    assert_eq!(
        exchange(&mut fresh, "evt_broken_new_conn", "").await.status,
        200
    );
    assert_eq!(
        exchange(&mut open, "evt_broken_old_conn", "").await.status,
        200
    );
    assert_eq!(metric(&app, LOADED).await, 0);
    assert_eq!(metric(&app, EXPIRY).await, old.not_after);

    // Fixed: the good pair is taken.
    files.install(new.cert_pem.as_bytes(), new.key_pem.as_bytes());
    eventually("the fixed pair is loaded", || async {
        metric(&app, LOADED).await == 1
    })
    .await;
    assert_eq!(presented(&connect(&connector, app.addr).await), new.der);
    app.shutdown().await;
}

#[tokio::test]
async fn without_tls_or_plain_http_and_with_both_the_receiver_refuses_to_start() {
    let written = TestApp::builder().write_config().await;
    let text = std::fs::read_to_string(&written.config_path).unwrap();
    assert!(text.contains("plain_http = true\n"));
    std::fs::write(
        &written.config_path,
        text.replace("plain_http = true\n", ""),
    )
    .unwrap();
    written
        .assert_refused(&[
            "add [server.tls] with cert_file and key_file",
            "set plain_http = true",
        ])
        .await;

    let ca = TestCa::new();
    let files = PairFiles::new(&ca.leaf("first", 30));
    let both = TestApp::builder()
        .tls(&files.cert, &files.key)
        .server_toml("plain_http = true");
    let both = both.write_config().await;
    both.assert_refused(&["both [server.tls] and plain_http = true are set"])
        .await;
}

#[tokio::test]
async fn a_pair_that_does_not_load_at_start_fails_start_naming_the_file() {
    let ca = TestCa::new();
    let (leaf, stranger) = (ca.leaf("first", 30), ca.leaf("stranger", 30));
    let files = PairFiles::new(&leaf);
    let start = |files: &PairFiles| {
        let (cert, key) = (files.cert.clone(), files.key.clone());
        async move {
            let written = TestApp::builder().tls(&cert, &key).write_config().await;
            let config = Config::load(&written.config_path).unwrap();
            match Server::start(config, ServerOptions::default()).await {
                Ok(server) => {
                    server.shutdown().await.unwrap();
                    panic!("started on a pair that does not load")
                }
                Err(e) => e.to_string(),
            }
        }
    };

    files.install(leaf.cert_pem.as_bytes(), stranger.key_pem.as_bytes());
    let error = start(&files).await;
    let key_file = files.key.display().to_string();
    assert!(
        error.contains(&format!(
            "key_file {key_file} does not match the certificate"
        )),
        "{error}"
    );
    assert!(!error.contains("PRIVATE KEY"), "{error}");

    files.install(b"garbage", leaf.key_pem.as_bytes());
    let error = start(&files).await;
    assert!(
        error.contains(&format!("cert_file {}", files.cert.display())),
        "{error}"
    );

    std::fs::remove_file(&files.key).unwrap();
    let error = start(&files).await;
    assert!(error.contains(&format!("key_file {key_file}")), "{error}");
}

/// A raw request from a socket bound to `from`, so the receiver sees that peer address.
async fn post_from(from: [u8; 4], to: &str, event_id: &str, extra_headers: &str) -> u16 {
    let to: SocketAddr = to.trim_start_matches("http://").parse().unwrap();
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let mut stream = socket.connect(to).await.unwrap();
    exchange(&mut stream, event_id, extra_headers).await.status
}

#[tokio::test]
async fn forwarded_client_headers_are_believed_only_from_trusted_proxies() {
    // 127.0.0.2 is the proxy; 127.0.0.1 is anybody.
    let written = TestApp::builder()
        .server_toml("trusted_proxies = [\"127.0.0.2\", \"10.0.0.0/8\"]")
        .write_config()
        .await;
    let log = written.dir.path().join("wharf.log");
    let server = ServeProcess::start(&written.config_path, Some(&log)).await;
    let xff = "x-forwarded-for: 6.6.6.6, 203.0.113.9, 10.1.2.3\r\nx-forwarded-proto: https\r\n";
    let fwd = "forwarded: for=\"[2001:db8::7]:4711\";proto=https\r\n";
    // From the proxy: the right-most address that is not itself a trusted proxy. From
    // anybody else the headers are ignored. (from, event, headers, client, scheme)
    let (via_proxy, anybody) = ([127, 0, 0, 2], [127, 0, 0, 1]);
    let cases = [
        (via_proxy, "evt_via_proxy", xff, "203.0.113.9", "https"),
        (
            via_proxy,
            "evt_via_proxy_forwarded",
            fwd,
            "2001:db8::7",
            "https",
        ),
        (via_proxy, "evt_proxy_itself", "", "127.0.0.2", "http"),
        (anybody, "evt_spoofed", xff, "127.0.0.1", "http"),
        (anybody, "evt_spoofed_forwarded", fwd, "127.0.0.1", "http"),
    ];
    for (from, event, headers, _, _) in cases {
        assert_eq!(
            post_from(from, &server.base, event, headers).await,
            200,
            "{event}"
        );
    }
    assert!(server.stop().await.success());

    let lines = request_lines(&std::fs::read_to_string(&log).unwrap());
    let client_of = |event: &str| {
        let line = lines
            .iter()
            .find(|l| l["event_id"] == event)
            .unwrap_or_else(|| panic!("no request line for {event}: {lines:?}"));
        (
            line["client"].as_str().unwrap().to_owned(),
            line["scheme"].as_str().unwrap().to_owned(),
        )
    };
    for (_, event, _, client, scheme) in cases {
        assert_eq!(
            client_of(event),
            (client.to_owned(), scheme.to_owned()),
            "{event}"
        );
    }
}

#[tokio::test]
async fn the_console_is_served_over_https_on_the_admin_listener_with_a_secure_cookie() {
    let ca = TestCa::new();
    let files = PairFiles::new(&ca.leaf("admin", 30));
    let app = TestApp::builder()
        .tls(&files.cert, &files.key)
        .with_admin()
        .server_toml(&format!(
            "admin_tls = {{ cert_file = {:?}, key_file = {:?} }}\n",
            files.cert, files.key
        ))
        .start()
        .await;
    let admin = app.admin.replacen("http://", "https://", 1);
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap())
        .tls_built_in_root_certs(false)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = client
        .post(format!("{admin}/console/signin"))
        .form(&[("token", crate::support::app::TEST_ADMIN_TOKEN)])
        .send()
        .await
        .expect("HTTPS on the admin listener");
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    // Plain HTTP to it gets no HTTP answer.
    let plain = reqwest::Client::new()
        .get(format!("{}/healthz", app.admin))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    app.shutdown().await;
}
