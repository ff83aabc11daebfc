//! The repository's documents stand alone and stay true: every relative link and every
//! `docs/...` path they mention exists, and none points outside the repository.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, the crates' READMEs and every markdown file under docs/ except the raw results
/// directories (generated reports keep the links they were written with).
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut out = vec![root.join("README.md")];
    for c in ["matrixkv", "matrixkv-pmem", "matrixkv-cli"] {
        out.push(root.join("crates").join(c).join("README.md"));
    }
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read docs") {
            let p = e.expect("entry").path();
            let raw_results = p.parent().is_some_and(|d| d.ends_with("docs/results"));
            if p.is_dir() && !raw_results {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out
}

/// The targets of `[text](target)` links that are neither URLs nor anchors.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_owned());
        }
    }
    out
}

/// Paths like `docs/format/wal.md` or `docs/decisions/0005-...md` named in the text.
fn docs_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("docs/") {
        if i > 0 && text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '/' || c == '.') {
            continue;
        }
        let tail = &text[i..];
        let end = tail
            .find(|c: char| !(c.is_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(tail.len());
        let p = tail[..end].trim_end_matches(['.', ',']);
        if p.ends_with(".md") {
            out.push(p.to_owned());
        }
    }
    out
}

#[test]
fn every_relative_link_and_docs_path_in_the_documents_exists() {
    let root = repo();
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let dir = doc.parent().unwrap();
        for link in relative_links(&text) {
            if !dir.join(&link).exists() {
                broken.push(format!("{}: link {link}", doc.display()));
            }
        }
        // docs/style.md describes other projects' repositories, with their own docs/ paths.
        let own_paths = !doc.ends_with("docs/style.md");
        for p in docs_paths(&text).into_iter().filter(|_| own_paths) {
            if !root.join(&p).exists() {
                broken.push(format!("{}: path {p}", doc.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken references:\n{}",
        broken.join("\n")
    );
}

#[test]
fn no_document_points_outside_the_repository() {
    let mut outside = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for needle in [
            "shared/DESIGN",
            "shared/BENCHMARKS",
            "shared/RELIABILITY",
            "shared/STYLE",
            "/work/shared",
            "../shared",
        ] {
            if text.contains(needle) {
                outside.push(format!("{}: {needle}", doc.display()));
            }
        }
    }
    assert!(outside.is_empty(), "{}", outside.join("\n"));
}
