//! Test support for the golden tests: every persistent format has a document under
//! docs/format/ whose ```` ```hex ```` blocks hold exact bytes the code must write.

/// The ```` ```hex ```` blocks of a markdown document, in order. In a block, `#` starts a
/// comment, an `NNNN:` offset prefix is ignored, and the rest are two-digit hex bytes.
pub(crate) fn hex_blocks(doc: &str) -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    for line in doc.lines() {
        match (&mut cur, line.trim()) {
            (None, "```hex") => cur = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(cur.take()),
            (Some(b), l) => {
                let data = l.split('#').next().unwrap_or("");
                let data = data.split_once(':').map_or(data, |(_, rest)| rest);
                b.extend(
                    data.split_whitespace()
                        .map(|h| u8::from_str_radix(h, 16).expect("hex byte")),
                );
            }
            (None, _) => {}
        }
    }
    assert!(cur.is_none(), "a hex block is not closed");
    blocks
}

/// The first ```` ```hex ```` block of a markdown document (see [`hex_blocks`]).
pub(crate) fn hex_block(doc: &str) -> Vec<u8> {
    hex_blocks(doc)
        .into_iter()
        .next()
        .expect("doc has a hex block")
}

/// Every document under docs/format/ is read by a golden test: some source file of the
/// workspace's crates `include_str!`s it (the test asserts at least one expectation against its bytes or names).
#[test]
fn every_format_document_has_a_golden_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = root.join("../../docs/format");
    let mut sources = String::new();
    // Every crate of the workspace (the server's key layout is tested there).
    let mut stack = vec![root.join("..")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() && !p.ends_with("target") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                sources.push_str(&std::fs::read_to_string(&p).expect("read source"));
            }
        }
    }
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&docs).expect("read docs/format") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !sources.contains(&format!("docs/format/{name}\")")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "format documents without a golden test: {missing:?}"
    );
}

/// `bytes` as lines of 8 hex bytes with their offsets (`0008: 01 02 ...`), the way the format
/// documents show them: what a golden test prints when the writer and the document disagree.
pub(crate) fn hex_lines(bytes: &[u8]) -> String {
    bytes
        .chunks(8)
        .enumerate()
        .map(|(i, c)| {
            let hex: Vec<String> = c.iter().map(|b| format!("{b:02x}")).collect();
            format!("{:04x}: {}", i * 8, hex.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
