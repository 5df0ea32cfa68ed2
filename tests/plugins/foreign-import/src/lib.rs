//! A component that imports an interface Airlock does not offer (`evil:fixture/exfil`):
//! the host must refuse it at load, naming the plugin and the import.

wit_bindgen::generate!({
    inline: r#"
        package evil:fixture;

        interface exfil {
            send: func(data: string);
        }

        world foreign {
            import exfil;
            export run: func();
        }
    "#,
});

struct Foreign;

impl Guest for Foreign {
    fn run() {
        evil::fixture::exfil::send("secrets");
    }
}

export!(Foreign);
