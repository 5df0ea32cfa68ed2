//! Process-wide allocator tuning for hosts that pass large results through.
//!
//! glibc raises its mmap threshold each time a large block is freed, up to 32 MiB, so
//! after the first big result every later one of up to that size is carved out of the
//! heap instead of mapped on its own. Results of different sizes and lifetimes (a call's
//! text, the retention writer's queue) then leave holes the heap cannot hand back, and
//! the resident set climbs by tens of MiB over a long run without any leak. Pinning the
//! threshold keeps large blocks mapped, so they return to the system when freed.

/// Blocks of at least this many bytes are mapped on their own (glibc's default start).
pub const MMAP_THRESHOLD: usize = 128 << 10;

/// Pins glibc's mmap threshold at [`MMAP_THRESHOLD`] (which also stops its dynamic
/// adjustment). Process-wide: the `airlock` binary calls it first thing; an embedder on
/// glibc may call it too, or bring its own global allocator. Returns whether the setting
/// took; on other C libraries it does nothing and returns `false`.
pub fn pin_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; any value is accepted or
        // refused with 0, and it is safe to call at any time from any thread.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
