//! One flag style for the whole CLI: every subcommand takes its long flags spelled with hyphens
//! or with underscores (`--fast-dir` and `--fast_dir` are one flag). `bench` defines db_bench's
//! underscore names and the other subcommands hyphenated ones; [`normalize`] rewrites each flag
//! word of the command line into the spelling the subcommand it belongs to defines, before clap
//! parses it, so `--help` keeps one name per flag. Pure data, no I/O.

use std::ffi::OsString;

use clap::{Arg, Command};

/// The sentence every help page that lists flags in one style ends with.
pub const SPELLING_NOTE: &str = "Flags may be spelled with hyphens or with underscores: \
    --fast-dir and --fast_dir are the same flag.";

/// Rewrites each `--flag` word of `words` (program name first) that `cmd` or the subcommand
/// it belongs to does not define, but defines with `-` and `_` swapped, into the defined
/// spelling. Values (after an `=`, or the word after a flag that takes one), positional
/// words, and everything after `--` are left alone; a flag no spelling matches is left for
/// clap to report.
pub fn normalize(cmd: &Command, words: Vec<OsString>) -> Vec<OsString> {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut current = &cmd;
    // The previous word was a flag whose value this word is (`Some(true)`: even if it starts
    // with `-`, as clap reads it for a flag that allows hyphen values).
    let mut value_next: Option<bool> = None;
    let mut rest_verbatim = false;
    let mut out = Vec::with_capacity(words.len());
    for (i, word) in words.into_iter().enumerate() {
        let is_value = value_next
            .take()
            .is_some_and(|hyphens| hyphens || !word.to_string_lossy().starts_with('-'));
        if i == 0 || rest_verbatim || is_value {
            out.push(word);
            continue;
        }
        let Some(s) = word.to_str() else {
            out.push(word);
            continue;
        };
        if s == "--" {
            rest_verbatim = true;
        } else if let Some(flag) = s.strip_prefix("--") {
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (flag, None),
            };
            if let Some((defined, arg)) = find_long(current, name) {
                value_next = value.is_none().then(|| value_kind(arg)).flatten();
                if defined != name {
                    let fixed = match value {
                        Some(v) => format!("--{defined}={v}"),
                        None => format!("--{defined}"),
                    };
                    out.push(OsString::from(fixed));
                    continue;
                }
            }
        } else if let Some(short) = s.strip_prefix('-').filter(|f| f.chars().count() == 1) {
            // `-n 5`: the next word is the value of a short flag that takes one.
            value_next = short.chars().next().and_then(|c| {
                current
                    .get_arguments()
                    .find(|a| a.get_short() == Some(c))
                    .and_then(value_kind)
            });
        } else if !s.starts_with('-')
            && let Some(sub) = current.find_subcommand(s)
        {
            current = sub;
        }
        out.push(word);
    }
    out
}

/// Whether the word after flag `a` is its value: `None` if it takes none, else whether that
/// value may start with `-`.
fn value_kind(a: &Arg) -> Option<bool> {
    a.get_action()
        .takes_values()
        .then(|| a.is_allow_hyphen_values_set())
}

/// The long name `cmd` defines for `name` (as written, or with `-` and `_` swapped; aliases
/// count), and its flag.
fn find_long<'a>(cmd: &'a Command, name: &str) -> Option<(&'a str, &'a Arg)> {
    let spellings = [
        name.to_owned(),
        name.replace('_', "-"),
        name.replace('-', "_"),
    ];
    for spelling in &spellings {
        for a in cmd.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let aliases = a.get_all_aliases().unwrap_or_default();
            if long == spelling || aliases.contains(&spelling.as_str()) {
                // The alias as written is accepted as it is.
                let defined = if long == spelling {
                    long
                } else {
                    name_of(&aliases, spelling)
                };
                return Some((defined, a));
            }
        }
    }
    None
}

/// The alias of `aliases` equal to `spelling`.
fn name_of<'a>(aliases: &[&'a str], spelling: &str) -> &'a str {
    aliases
        .iter()
        .find(|a| **a == spelling)
        .copied()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ArgAction;

    fn cli() -> Command {
        Command::new("matrixkv")
            .subcommand(
                Command::new("bench")
                    .arg(Arg::new("fast_dir").long("fast_dir"))
                    .arg(Arg::new("engines").long("engines").alias("engine"))
                    .arg(
                        Arg::new("use_existing_db")
                            .long("use_existing_db")
                            .action(ArgAction::SetTrue),
                    )
                    .subcommand(Command::new("report").arg(Arg::new("out").long("out"))),
            )
            .subcommand(
                Command::new("get")
                    .arg(Arg::new("fast-dir").long("fast-dir"))
                    .arg(Arg::new("db").long("db"))
                    .arg(Arg::new("extra").long("extra").allow_hyphen_values(true))
                    .arg(Arg::new("n").short('n'))
                    .arg(Arg::new("key")),
            )
    }

    fn run(words: &[&str]) -> Vec<String> {
        let words = words.iter().map(OsString::from).collect();
        normalize(&cli(), words)
            .into_iter()
            .map(|w| w.into_string().unwrap())
            .collect()
    }

    #[test]
    fn each_subcommand_gets_its_own_spelling() {
        assert_eq!(
            run(&["m", "bench", "--fast-dir", "/f", "--use-existing-db"]),
            ["m", "bench", "--fast_dir", "/f", "--use_existing_db"]
        );
        assert_eq!(
            run(&["m", "get", "--fast_dir=/f", "--db", "x", "k"]),
            ["m", "get", "--fast-dir=/f", "--db", "x", "k"]
        );
        assert_eq!(
            run(&["m", "bench", "--engine=a"]),
            ["m", "bench", "--engine=a"]
        );
    }

    #[test]
    fn values_positionals_and_words_after_the_terminator_are_kept() {
        // The values of --db and -n look like flags' spellings; the key after `--` too.
        assert_eq!(
            run(&[
                "m",
                "get",
                "--db",
                "fast_dir",
                "-n",
                "x_y",
                "--",
                "--fast_dir"
            ]),
            [
                "m",
                "get",
                "--db",
                "fast_dir",
                "-n",
                "x_y",
                "--",
                "--fast_dir"
            ]
        );
        assert_eq!(
            run(&["m", "get", "--db=a_b-c", "my_key-1"]),
            ["m", "get", "--db=a_b-c", "my_key-1"]
        );
        // A flag without its value: the next flag is a flag (clap says the value is missing);
        // one that takes hyphen values keeps it.
        assert_eq!(
            run(&["m", "get", "--db", "--fast_dir", "f"]),
            ["m", "get", "--db", "--fast-dir", "f"]
        );
        assert_eq!(
            run(&["m", "get", "--extra", "--fast_dir", "--fast_dir", "f"]),
            ["m", "get", "--extra", "--fast_dir", "--fast-dir", "f"]
        );
        // Unknown flags are left for clap's error.
        assert_eq!(run(&["m", "get", "--no_such"]), ["m", "get", "--no_such"]);
    }

    #[test]
    fn nested_subcommands_are_followed() {
        assert_eq!(
            run(&["m", "bench", "report", "--out", "o", "d1"]),
            ["m", "bench", "report", "--out", "o", "d1"]
        );
        // A flag of the parent is not a flag of the subcommand.
        assert_eq!(
            run(&["m", "bench", "report", "--fast-dir"]),
            ["m", "bench", "report", "--fast-dir"]
        );
    }
}
