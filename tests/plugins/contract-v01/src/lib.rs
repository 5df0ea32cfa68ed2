//! A content plugin built against the frozen contract `airlock:adapter@0.1.0`
//! (`wit/since_v0.1.0/adapter.wit`), with wit-bindgen directly, as a third party's plugin
//! from before 0.2 would be. It upper-cases text blocks and marks the result's `_meta`
//! with `{"v01": true}`, so tests can see it ran.

wit_bindgen::generate!({
    world: "content-plugin",
    path: "../../../wit/since_v0.1.0",
});

use airlock::adapter::types::{ContentBlock, Stage, ToolResult};
use exports::airlock::adapter::content::Guest as Content;
use exports::airlock::adapter::plugin::{Guest as Plugin, PluginInfo};

struct Shout;

impl Plugin for Shout {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "shout-v01".into(),
            version: "0.1.0".into(),
            stages: vec![Stage::Content],
        }
    }

    fn init(stage: Stage, config: String) -> Result<(), String> {
        if stage != Stage::Content {
            return Err("shout-v01 implements only the content stage".into());
        }
        if config.trim() != "{}" {
            return Err(format!("shout-v01 takes no options, got {config}"));
        }
        Ok(())
    }
}

impl Content for Shout {
    fn convert(mut input: ToolResult) -> Result<ToolResult, String> {
        for block in &mut input.content {
            if let ContentBlock::Text(t) = block {
                t.text = t.text.to_uppercase();
            }
        }
        input.meta = Some(r#"{"v01":true}"#.into());
        Ok(input)
    }
}

export!(Shout);
