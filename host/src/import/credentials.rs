//! Credentials typed where they should not be: well-known provider tokens, option and
//! variable names that name a credential, plausible secret values, and the scrubbing of
//! args and urls that replaces them with `REDACTED`.

use crate::secrets::looks_like_credential;

/// What replaces a credential typed into args or a url.
pub(super) const REDACTED: &str = "REDACTED";

/// Whether `word` is a well-known provider token: `sk-`, `ghp_`, `gho_`, `github_pat_`,
/// `xoxb-`, `xoxp-`, `glpat-` followed by at least 16 token characters including a digit,
/// or `AKIA` followed by 16 upper-case letters and digits.
fn is_provider_token(word: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "sk-",
        "ghp_",
        "gho_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "glpat-",
    ];
    if let Some(rest) = word.strip_prefix("AKIA") {
        return rest.len() == 16
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    }
    PREFIXES.iter().any(|prefix| {
        word.strip_prefix(prefix).is_some_and(|rest| {
            rest.len() >= 16
                && rest.bytes().any(|b| b.is_ascii_digit())
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
    })
}

/// Whether any word of `text` is a provider token.
pub(super) fn contains_provider_token(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .any(is_provider_token)
}

/// Whether an option or variable name in args names a credential (and not, say, a file
/// holding one, or the name of the variable to read it from).
fn credential_name(name: &str) -> bool {
    const NOT_SECRET_SUFFIXES: &[&str] = &[
        "_FILE",
        "_PATH",
        "_DIR",
        "_ENV",
        "_VAR",
        "_URL",
        "_URI",
        "_TYPE",
        "_MODE",
        "_METHOD",
        "_PROVIDER",
        "_STDIN",
        "_SERVER",
        "_HOST",
        "_PORT",
        "_ENDPOINT",
        "_SCOPE",
        "_SCOPES",
        "_NAME",
    ];
    const NOT_SECRET_PREFIXES: &[&str] = &[
        "NO_", "DISABLE_", "ENABLE_", "SKIP_", "REQUIRE_", "USE_", "MAX_", "MIN_",
    ];
    let upper = name.to_ascii_uppercase().replace('-', "_");
    looks_like_credential(name)
        && !NOT_SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        && !NOT_SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
        && (!upper.contains("AUTHOR") || upper.contains("AUTHORIZATION"))
}

/// Whether `value`, given to a credential-named option, plausibly is the credential
/// itself: not empty, not a reference, path, url, number or boolean word.
fn plausible_secret(value: &str) -> bool {
    let v = value.trim();
    if v.is_empty() || v.contains("${") || v.starts_with(['/', '.', '~']) || v.contains("://") {
        return false;
    }
    if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return false;
    }
    const WORDS: &[&str] = &["true", "false", "yes", "no", "none", "null", "on", "off"];
    if WORDS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return false;
    }
    if v.contains(char::is_whitespace) {
        let scheme = v.split_whitespace().next().unwrap_or("");
        return ["bearer", "basic", "token"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s));
    }
    true
}

/// Replaces credentials typed into `args` with `REDACTED` and returns their positions:
/// `--api-key=X` / `--token X` (options named like credentials), `NAME=X` and `Name: X`
/// (variables and headers named like credentials, as passed to `docker -e` or
/// `mcp-remote --header`), bare provider tokens, and passwords and credential query
/// parameters of urls (`https://mcp.example/sse?token=X`, `postgresql://user:X@host/db`).
/// The value of an `--option=value` gets the same treatment as a bare arg:
/// `--header=Authorization: Bearer X`, `--env=API_KEY=X`, `--url=https://…?token=X`.
pub(super) fn scrub_args(args: &mut [String]) -> Vec<usize> {
    let mut scrubbed = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].clone();
        if arg.len() > 1 && arg.starts_with('-') {
            let flag = arg.trim_start_matches('-');
            if let Some((name, value)) = flag.split_once('=') {
                let replacement = if (credential_name(name) && plausible_secret(value))
                    || (!value.contains("${") && contains_provider_token(value))
                {
                    Some(REDACTED.to_string())
                } else {
                    // The value may itself be a header, a variable or a url.
                    scrub_bare(value)
                };
                if let Some(replacement) = replacement {
                    let keep = &arg[..arg.len() - value.len()];
                    args[i] = format!("{keep}{replacement}");
                    scrubbed.push(i);
                }
            } else if credential_name(flag)
                && let Some(next) = args.get(i + 1)
                && !next.starts_with('-')
                && plausible_secret(next)
                // A plain word after a switch is more likely a subcommand than a secret.
                && !next.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
            {
                args[i + 1] = REDACTED.to_string();
                scrubbed.push(i + 1);
                i += 2;
                continue;
            }
        } else if let Some(replacement) = scrub_bare(&arg) {
            args[i] = replacement;
            scrubbed.push(i);
        }
        i += 1;
    }
    scrubbed
}

/// Whether `name` can be a variable or header name in an arg: `[A-Za-z0-9_-]+`.
fn arg_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The scrubbed form of an arg that is not an option (or of the value of an
/// `--option=value`), if it holds a credential: credentials in a url it holds (see
/// [`scrub_url`]), `NAME=X` or `Name: X` with a name like a credential, or a provider
/// token (then the whole arg is replaced).
fn scrub_bare(arg: &str) -> Option<String> {
    // Urls first: `scrub_url` leaves the parts holding references alone by itself.
    let (text, url_credentials) = scrub_url(arg);
    let changed = !url_credentials.is_empty();
    if text.contains("${") {
        return changed.then_some(text);
    }
    if let Some((name, value)) = text.split_once('=')
        && arg_name(name)
        && credential_name(name)
        && plausible_secret(value)
    {
        return Some(format!("{name}={REDACTED}"));
    }
    if let Some((name, value)) = text.split_once(':')
        && arg_name(name)
        && credential_name(name)
        && plausible_secret(value)
    {
        return Some(format!("{name}: {REDACTED}"));
    }
    if contains_provider_token(&text) {
        return Some(REDACTED.to_string());
    }
    changed.then_some(text)
}

/// Replaces credentials typed into the urls in `text` — a password in the user info, a
/// provider token as the user name, query parameters named like credentials or holding
/// provider tokens — with `REDACTED`. Any scheme is understood (`https`, `postgresql`,
/// `redis`…). A url runs from its `scheme://` to the first whitespace, and the text around
/// urls is kept as is, so `text` may be a url field or an arg holding urls
/// (`DATABASE_URL=postgres://…`). Parts holding `${…}` references are left alone. Returns
/// the text and a description of each replaced part (never its value).
pub(super) fn scrub_url(text: &str) -> (String, Vec<String>) {
    let mut found = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, after) = rest.split_at(at + 3);
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        out.push_str(head);
        out.push_str(&scrub_url_body(&after[..end], &mut found));
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, found)
}

/// One url after its `scheme://`, with its credentials replaced (see [`scrub_url`]); each
/// replaced part is described in `found`.
fn scrub_url_body(body: &str, found: &mut Vec<String>) -> String {
    let authority_end = body.find(['/', '?', '#']).unwrap_or(body.len());
    let (authority, tail) = body.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) if !userinfo.contains("${") => match userinfo.split_once(':') {
            Some((user, password)) if !password.is_empty() => {
                found.push("the password in the url".to_string());
                format!("{user}:{REDACTED}@{host}")
            }
            _ if contains_provider_token(userinfo) => {
                found.push("the user name in the url".to_string());
                format!("{REDACTED}@{host}")
            }
            _ => authority.to_string(),
        },
        _ => authority.to_string(),
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let mut out = format!("{authority}{path}");
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((key, value))
                    if !value.is_empty()
                        && !value.contains("${")
                        && (credential_name(key) || contains_provider_token(value)) =>
                {
                    found.push(format!("url query parameter {key}"));
                    format!("{key}={REDACTED}")
                }
                _ => param.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}
