//! A component exporting `airlock:adapter/plugin@0.3.0`, a contract version this host
//! does not support: loading it must fail with a message naming both versions.

wit_bindgen::generate!({
    inline: r#"
        package airlock:adapter@0.3.0;

        interface plugin {
            describe: func() -> string;
        }

        world next-version {
            export plugin;
        }
    "#,
});

struct Future;

impl exports::airlock::adapter::plugin::Guest for Future {
    fn describe() -> String {
        "from the future".into()
    }
}

export!(Future);
