//! The W3C `traceparent` value (Trace Context, level 1), read in one place for every
//! entry that takes one: an HTTP header, a request's `_meta` (SEP-414) and the
//! library's `TraceContext`.
//!
//! `VERSION-TRACEID-PARENTID-FLAGS`, lower-case hex; the ids not all zero; version `ff`
//! is refused; version `00` has exactly four fields, a later version may append more.

/// A valid `traceparent`'s ids and sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traceparent {
    /// The trace id (16 bytes, big-endian as written).
    pub trace_id: [u8; 16],
    /// The caller's span id (8 bytes).
    pub parent_id: [u8; 8],
    /// Whether the caller sampled the trace (flag bit 0).
    pub sampled: bool,
}

impl Traceparent {
    /// Reads `value` (surrounding whitespace ignored); `None` when it is not a valid
    /// `traceparent`.
    pub fn parse(value: &str) -> Option<Traceparent> {
        let mut fields = value.trim().split('-');
        let (version, trace, parent, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let later = fields.next().is_some();
        let well_formed = hex(version, 2)
            && version != "ff"
            && (version != "00" || !later)
            && hex(trace, 32)
            && hex(parent, 16)
            && hex(flags, 2);
        if !well_formed {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok()?;
        let parent_id = u64::from_str_radix(parent, 16).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        (trace_id != 0 && parent_id != 0).then_some(Traceparent {
            trace_id: trace_id.to_be_bytes(),
            parent_id: parent_id.to_be_bytes(),
            sampled: flags & 1 == 1,
        })
    }
}

/// Whether `s` is exactly `len` lower-case hex digits.
fn hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_only_when_valid() {
        let read = Traceparent::parse(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ")
            .unwrap();
        assert_eq!(read.trace_id[..2], [0x4b, 0xf9]);
        assert_eq!(read.trace_id[15], 0x36);
        assert_eq!(
            read.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(read.sampled);
        for bad in [
            "",
            "not a traceparent",
            "00-secret-token-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(Traceparent::parse(bad), None, "{bad}");
        }
        let later = Traceparent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x");
        assert!(later.is_some_and(|t| !t.sampled));
    }
}
