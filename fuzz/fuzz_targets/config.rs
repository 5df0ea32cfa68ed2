//! Any bytes, read as a TOML and as a JSON config document: a config or an error, never
//! a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for name in ["f.toml", "f.json"] {
        let _ = airlock_host::config::Config::from_str(std::path::Path::new(name), &text, &|_| None);
    }
});
