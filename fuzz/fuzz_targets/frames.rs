//! Any bytes a stdio server might write, through the frame guard: only decodable JSON
//! lines come out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokio::io::AsyncReadExt;

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let mut guard = airlock_host::transport::guard::FrameGuard::new(data, 4096);
        let mut out = Vec::new();
        guard.read_to_end(&mut out).await.unwrap();
        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            serde_json::from_slice::<serde_json::Value>(line).expect("only decodable lines pass");
        }
    });
});
