//! What the console's pages show and its handlers pass around: the signed-in
//! [`Operator`], the one-time [`Flash`] message, and one call as a [`CallRow`]. Pages,
//! the session store and the live feed all use these; none of them owns them.

/// A message shown once on the next page (what an action did, or why it failed).
#[derive(Debug, Clone)]
pub(crate) struct Flash {
    /// Whether it reports a failure.
    pub failed: bool,
    /// The message.
    pub text: String,
}

/// The operator behind a request: their console session and its CSRF token.
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    /// The console session's id (the cookie's value).
    pub(super) id: String,
    /// The token every form of this session carries.
    pub csrf: String,
}

impl Operator {
    /// Whether `offered` is this session's CSRF token (compared in constant time).
    pub(super) fn csrf_matches(&self, offered: &str) -> bool {
        let (a, b) = (self.csrf.as_bytes(), offered.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// One call as the console shows it.
#[derive(Debug, Clone)]
pub(crate) struct CallRow {
    /// Its number in this console (the row's id).
    pub id: u64,
    /// When it started (unix seconds).
    pub started: u64,
    pub agent: String,
    pub service: String,
    pub tool: String,
    /// `running`, `ok`, or the error code.
    pub status: String,
    pub elapsed_ms: Option<u64>,
    /// Progress so far (and its total) while it runs.
    pub progress: Option<(f64, Option<f64>)>,
    /// The latest progress message (already through the egress rule).
    pub message: Option<String>,
    pub size: Option<usize>,
    pub redacted: bool,
    pub output_id: Option<String>,
}
