//! Requests to the server under test and what it answers, down to raw TCP.

/// The value of the `/metrics` line whose name and labels are exactly `series`, 0 when absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

/// Asserts each `series value` line of `expected` against the `/metrics` text (absent counts
/// as 0).
#[track_caller]
pub fn assert_metrics(metrics: &str, expected: &str) {
    for line in expected.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let value: f64 = value.parse().expect("a number");
        assert_eq!(metric(metrics, series), value, "{series}\n{metrics}");
    }
}

/// An HTTP answer, read whole: what every request helper of the kit returns.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    /// The `Content-Type` header, when there is one.
    pub content_type: Option<String>,
    /// The body as text (lossy where it is not UTF-8).
    pub body: String,
    /// The body as JSON, `Null` when it is not JSON.
    pub json: serde_json::Value,
}

impl Answer {
    /// Reads `response` whole.
    pub async fn read(response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body");
        Answer::from_parts(status, headers, &bytes)
    }

    /// An answer from its parts (a status line and head read off a raw stream).
    pub fn from_parts(status: u16, headers: reqwest::header::HeaderMap, body: &[u8]) -> Answer {
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Answer {
            status,
            headers,
            content_type,
            body: String::from_utf8_lossy(body).into_owned(),
            json: serde_json::from_slice(body).unwrap_or(serde_json::Value::Null),
        }
    }

    /// The answer's `error` code, else its `status`, else empty.
    pub fn code(&self) -> &str {
        self.json["error"]
            .as_str()
            .or(self.json["status"].as_str())
            .unwrap_or("")
    }

    /// The value of header `name`, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Asserts `(status, code)`, showing `context` and the whole answer when it differs.
    #[track_caller]
    pub fn assert_is(&self, status: u16, code: &str, context: impl std::fmt::Display) {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "{context}: {self:?}"
        );
    }

    /// Asserts the status alone, showing the whole answer when it differs.
    #[track_caller]
    pub fn assert_status(&self, status: u16) {
        assert_eq!(self.status, status, "{self:?}");
    }

    /// Asserts `200 accepted`.
    #[track_caller]
    pub fn assert_accepted(&self, context: impl std::fmt::Display) {
        self.assert_is(200, "accepted", context);
    }
}

/// POSTs `body` to `/webhooks/{endpoint}` and reads the answer whole.
pub async fn post(
    client: &reqwest::Client,
    base: &str,
    endpoint: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> Answer {
    let mut request = client
        .post(format!("{base}/webhooks/{endpoint}"))
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    Answer::read(request.send().await.expect("request sent")).await
}

/// GETs `url` and reads the answer whole.
pub async fn get_url(client: &reqwest::Client, url: &str) -> Answer {
    Answer::read(client.get(url).send().await.expect("request sent")).await
}

pub async fn get_text(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.expect("request sent");
    response.text().await.expect("body")
}

/// Owned header pairs borrowed as the `&[(&str, &str)]` that [`post`] takes.
pub fn refs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Reads what the server sends until it closes the connection (or `within` passes):
/// `(bytes, closed)`.
pub async fn read_until_closed(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> (String, bool) {
    read_until(stream, within, |_| false).await
}

/// Reads one JSON answer (head and a body ending in `}`), or what arrived within `within`.
pub async fn read_answer(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> String {
    let complete = |read: &[u8]| read.windows(4).any(|w| w == b"\r\n\r\n") && read.ends_with(b"}");
    read_until(stream, within, complete).await.0
}

/// Reads until `done` holds for what was read, the server closes, or `within` passes:
/// `(bytes, whether it ended before within)`.
async fn read_until(
    stream: &mut tokio::net::TcpStream,
    within: std::time::Duration,
    done: impl Fn(&[u8]) -> bool,
) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let ended = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        while !done(&answer) {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&answer).into_owned(), ended)
}
