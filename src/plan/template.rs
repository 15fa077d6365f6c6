//! `{placeholder}` templates, and shell word splitting and quoting for server
//! commands (by `shlex`).

/// Placeholders filled only when a server is launched (not at plan expansion).
pub const RUNTIME: &[&str] = &["port", "host", "run_dir", "sweeptop"];

/// Why a template could not be filled; it reads as the text at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FillError {
    /// A `{` with no `}` after it: the rest of the template from that `{`.
    #[error("{0}")]
    Unclosed(String),
    /// The name of a placeholder the lookup cannot resolve.
    #[error("{0}")]
    Unknown(String),
}

/// Fill `{name}` placeholders; `{{` and `}}` are literal braces. Fails on the
/// first placeholder `lookup` cannot resolve.
pub fn fill(template: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, FillError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("{{") {
            out.push('{');
            rest = r;
        } else if let Some(r) = tail.strip_prefix("}}") {
            out.push('}');
            rest = r;
        } else if let Some(r) = tail.strip_prefix('}') {
            out.push('}');
            rest = r;
        } else {
            let Some(end) = tail.find('}') else {
                return Err(FillError::Unclosed(tail.to_string()));
            };
            let name = tail[1..end].trim();
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => return Err(FillError::Unknown(name.to_string())),
            }
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Names of all placeholders in a template.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("{{") {
            rest = r;
            continue;
        }
        match tail.find('}') {
            Some(end) => {
                names.push(tail[1..end].trim().to_string());
                rest = &tail[end + 1..];
            }
            None => break,
        }
    }
    names
}

/// Why a command line cannot be split into words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("unterminated quote (or a trailing backslash)")]
    Unterminated,
    /// An unquoted `#` a shell would read as a comment, cutting the command short.
    #[error("a word starting with # would end the command as a comment: quote it ('#…')")]
    Comment,
}

/// Split a command line into words the way a POSIX shell does for quotes and
/// backslashes (no expansion). Any white space separates words (a multi-line
/// command in a CRLF file splits as in an LF one). A word that a shell would
/// read as a comment (`#…` unquoted) is an error rather than the silent end
/// of the command; so are an unterminated quote and a trailing backslash.
pub fn split_words(s: &str) -> Result<Vec<String>, SplitError> {
    let s: String = s
        .replace("\r\n", "\n")
        .chars()
        .map(|c| {
            if c.is_whitespace() && c != '\n' {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words = shlex::split(&s).ok_or(SplitError::Unterminated)?;
    // shlex drops a comment with its `#`: fewer `#` in the words than in the
    // line means part of the command would be lost.
    let hashes = |t: &str| t.matches('#').count();
    if words.iter().map(|w| hashes(w)).sum::<usize>() < hashes(&s) {
        return Err(SplitError::Comment);
    }
    Ok(words)
}

/// The words as one command line a shell would split back into them.
/// A server command as a person reads it: quoted words, or with `shell` the
/// script `sh -c` runs.
pub fn command_line(argv: &[String], shell: bool) -> String {
    if shell {
        argv.join(" ")
    } else {
        join_words(argv)
    }
}

pub fn join_words(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(n: &str) -> Option<String> {
        match n {
            "tp" => Some("4".into()),
            "model" => Some("/dev/shm/m".into()),
            _ => None,
        }
    }

    #[test]
    fn fills_and_escapes() {
        assert_eq!(fill("--tp {tp} {{x}}", &look).unwrap(), "--tp 4 {x}");
        assert_eq!(fill("{ model }/w", &look).unwrap(), "/dev/shm/m/w");
        assert_eq!(fill("{nope}", &look).unwrap_err().to_string(), "nope");
        assert!(fill("{tp", &look).is_err());
    }

    #[test]
    fn lists_placeholders() {
        assert_eq!(placeholders("a {x} {{y}} {z}"), vec!["x", "z"]);
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_words(r#"python -m x --a 'b c' "d \"e\"" f\ g  "#).unwrap(),
            vec!["python", "-m", "x", "--a", "b c", "d \"e\"", "f g"]
        );
        assert_eq!(split_words("a ''").unwrap(), vec!["a", ""]);
        assert!(split_words("a 'b").is_err());
        assert!(split_words("a \"b").is_err());
        let argv = split_words(r#"python -m x --a 'b c' "d \"e\"" f\ g "it's" {port}"#).unwrap();
        assert_eq!(split_words(&join_words(&argv)).unwrap(), argv);
        assert_eq!(join_words(&["--tp".into(), "4".into()]), "--tp 4");
        // A CRLF multi-line command splits as an LF one.
        assert_eq!(
            split_words("serve\r\n  --port 1\r\n  --tp 2\r\n").unwrap(),
            vec!["serve", "--port", "1", "--tp", "2"]
        );
        // A comment would silently cut the command: refused; quoted, it is a word.
        let e = split_words("serve --name #1 --method dflash")
            .unwrap_err()
            .to_string();
        assert!(e.contains("quote it"), "{e}");
        assert_eq!(
            split_words("serve --name '#1' --tag a#b").unwrap(),
            vec!["serve", "--name", "#1", "--tag", "a#b"]
        );
    }
}
