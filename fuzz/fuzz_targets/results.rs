//! Any JSON a server might answer `tools/call` with: converted to the contract's types
//! and back, dropping no block.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let parsed = airlock_host::plugin::convert::result_from_mcp(&value);
        let n = value["content"].as_array().map_or(0, Vec::len);
        assert_eq!(parsed.content.len(), n);
        let _ = airlock_host::plugin::convert::result_to_mcp(&parsed);
    }
});
