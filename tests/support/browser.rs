//! A real headless Chromium driven over WebDriver: `Browser::start()` runs a chromedriver of
//! its own (port chosen by the driver) and one session on a fresh profile; helpers find by CSS,
//! click, fill, read text, cookies and screenshots. Everything is ended on `close()` or drop:
//! chromedriver runs in its own process group, and the group is killed, so no Chromium is
//! left behind even when a test panics.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`cargo xtask test` and `.ci/run` install
//! them when missing). At most [`MAX_BROWSERS`] run at once: Chromium is heavy on small
//! machines, and tests run in parallel.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::cookies::Cookie;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::files::repo_root;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Browsers alive at once, across every test of the binary.
pub const MAX_BROWSERS: usize = 2;
/// How long a page element is waited for.
const WAIT: Duration = Duration::from_secs(15);

static SLOTS: Semaphore = Semaphore::const_new(MAX_BROWSERS);

/// The flags the machine needs: without the background-networking ones Chromium tries to
/// reach Google's hosts, and the closed network refuses it.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// A chromedriver, its Chromium, one WebDriver session.
pub struct Browser {
    client: Option<Client>,
    driver: Child,
    _profile: tempfile::TempDir,
    _slot: SemaphorePermit<'static>,
}

impl Browser {
    /// Starts chromedriver and a session on headless Chromium with an empty profile.
    pub async fn start() -> Self {
        let slot = SLOTS
            .acquire()
            .await
            .expect("the semaphore is never closed");
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(program).exists(),
                "{program} is missing: install Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver; `cargo xtask test` does it as root)"
            );
        }
        let profile = tempfile::tempdir().expect("profile folder");
        let (driver, port) = start_driver();
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal")
        };
        let mut browser = Self {
            client: None,
            driver,
            _profile: profile,
            _slot: slot,
        };
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session on headless Chromium");
        browser.client = Some(client);
        browser
    }

    /// The profile folder, as it appears on Chromium's command line.
    pub fn profile_marker(&self) -> String {
        self._profile.path().display().to_string()
    }

    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("a session until closed")
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.client()
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    }

    /// The first element matching `css`, waited for (15 s at most).
    pub async fn find(&self, css: &str) -> Element {
        match self
            .client()
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(e) => panic!(
                "no `{css}` on {} ({e}):\n{}",
                self.url().await,
                self.source().await
            ),
        }
    }

    /// Every element matching `css` now (none: empty).
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client()
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("find_all `{css}`: {e}"))
    }

    /// Whether an element matches `css` now (no waiting).
    pub async fn has(&self, css: &str) -> bool {
        !self.find_all(css).await.is_empty()
    }

    /// Clicks the link or submit button matching `css` and returns once the next page has
    /// replaced this one (the old document's root gone stale: even a POST answered on the
    /// same URL counts).
    pub async fn click(&self, css: &str) {
        let old_root = self
            .client()
            .find(Locator::Css("html"))
            .await
            .expect("a document");
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("click `{css}`: {e}"));
        let deadline = tokio::time::Instant::now() + WAIT;
        // Any error reading the old root means it is detached: the next page is in.
        while old_root.tag_name().await.is_ok() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "clicking `{css}` on {} loaded no page within {WAIT:?}",
                self.url().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Replaces the value of the input matching `css` with `value`, typed.
    pub async fn fill(&self, css: &str, value: &str) {
        let input = self.find(css).await;
        input
            .clear()
            .await
            .unwrap_or_else(|e| panic!("clear `{css}`: {e}"));
        input
            .send_keys(value)
            .await
            .unwrap_or_else(|e| panic!("type into `{css}`: {e}"));
    }

    /// The rendered text of the element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css)
            .await
            .text()
            .await
            .unwrap_or_else(|e| panic!("text of `{css}`: {e}"))
    }

    /// An attribute of the element matching `css`.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.find(css)
            .await
            .attr(name)
            .await
            .unwrap_or_else(|e| panic!("attribute {name} of `{css}`: {e}"))
    }

    /// The page's current URL.
    pub async fn url(&self) -> String {
        self.client()
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("(no url: {e})"))
    }

    /// The page's current path (no query).
    pub async fn path(&self) -> String {
        self.client()
            .current_url()
            .await
            .expect("current url")
            .path()
            .to_owned()
    }

    /// The page's source as the browser holds it (the DOM, serialized).
    pub async fn source(&self) -> String {
        self.client()
            .source()
            .await
            .unwrap_or_else(|e| format!("(no source: {e})"))
    }

    /// The page's title.
    pub async fn title(&self) -> String {
        self.client().title().await.expect("title")
    }

    /// Every cookie the browser holds for the current page.
    pub async fn cookies(&self) -> Vec<Cookie<'static>> {
        self.client().get_all_cookies().await.expect("cookies")
    }

    /// The cookie named `name` for the current page, if any.
    pub async fn cookie(&self, name: &str) -> Option<Cookie<'static>> {
        self.cookies().await.into_iter().find(|c| c.name() == name)
    }

    /// Sets the cookie `name` for the current page's host and `path` (HttpOnly, SameSite=Strict,
    /// as a session cookie would be), replacing one of that name.
    pub async fn set_cookie(&self, name: &str, value: &str, path: &str) {
        let host = self
            .client()
            .current_url()
            .await
            .expect("current url")
            .host_str()
            .expect("a page with a host")
            .to_owned();
        // chromedriver refuses a cookie without a domain on an IP address host.
        let cookie = Cookie::parse(format!(
            "{name}={value}; Domain={host}; Path={path}; HttpOnly; SameSite=Strict"
        ))
        .expect("a valid cookie");
        self.client()
            .add_cookie(cookie)
            .await
            .unwrap_or_else(|e| panic!("add cookie {name}: {e}"));
    }

    /// Deletes the cookie named `name` for the current page's site.
    pub async fn delete_cookie(&self, name: &str) {
        self.client()
            .delete_cookie(name)
            .await
            .expect("delete cookie");
    }

    /// Writes the viewport as `target/console-screenshots/NAME.png`, for a human to look at.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client().screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = repo_root().join("target/console-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot folder");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    /// Ends the session (Chromium quits), then chromedriver.
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, which its Chromium processes join: one
        // signal ends them all, whether or not the session was closed.
        let group = -(self.driver.id() as i32);
        // SAFETY: kill(2) with a negative pid signals that process group and touches no memory.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = self.driver.wait();
    }
}

/// Starts chromedriver on a port it picks, in a process group of its own: (child, port).
fn start_driver() -> (Child, u16) {
    use std::os::unix::process::CommandExt as _;
    let mut driver = Command::new(CHROMEDRIVER)
        .args(["--port=0", "--log-level=WARNING"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {CHROMEDRIVER}: {e}"));
    let stdout = driver.stdout.take().expect("piped stdout");
    // "ChromeDriver was started successfully on port 36189." once it listens.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(port) = line
                .split("started successfully on port ")
                .nth(1)
                .and_then(|rest| rest.trim_end_matches('.').trim().parse::<u16>().ok())
            {
                let _ = tx.send(Ok(port));
                // Keep draining: a full pipe would block the driver.
                for _ in lines.by_ref() {}
                return;
            }
            seen.push(line);
        }
        let _ = tx.send(Err(seen.join("\n")));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Ok(port)) => (driver, port),
        Ok(Err(output)) => panic!("chromedriver exited before listening:\n{output}"),
        Err(_) => {
            let _ = driver.kill();
            panic!("chromedriver did not say it was listening within 20 s")
        }
    }
}
