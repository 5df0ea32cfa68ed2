//! The JSONC stripper: comments and trailing commas blanked out so a JSON parser reads
//! the files VS Code and Gemini users write.

/// Blanks out `//` and `/* */` comments and trailing commas (JSONC, as written by VS Code
/// and Gemini users), keeping every other byte where it was so parser positions still
/// match the file. A leading byte-order mark is dropped.
pub(super) fn strip_jsonc(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut bytes = text.as_bytes().to_vec();
    let n = bytes.len();
    // Pass 1: comments.
    let (mut i, mut in_string) = (0, false);
    while i < n {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
        } else if b == b'"' {
            in_string = true;
            i += 1;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < n && bytes[i] != b'\n' {
                bytes[i] = b' ';
                i += 1;
            }
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            bytes[i] = b' ';
            bytes[i + 1] = b' ';
            i += 2;
            while i < n && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                if bytes[i] != b'\n' {
                    bytes[i] = b' ';
                }
                i += 1;
            }
            for _ in 0..2 {
                if i < n {
                    bytes[i] = b' ';
                    i += 1;
                }
            }
        } else {
            i += 1;
        }
    }
    // Pass 2: trailing commas.
    let (mut i, mut in_string) = (0, false);
    while i < n {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, Some(b'}') | Some(b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
    // Only whole ASCII-delimited runs were blanked, so this is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
