//! `{placeholder}` templates, and shell word splitting and quoting for server
//! commands (by `shlex`).

/// Placeholders filled only when a server is launched (not at plan expansion).
pub const RUNTIME: &[&str] = &["port", "host", "run_dir", "sweeptop"];

/// Fill `{name}` placeholders; `{{` and `}}` are literal braces. Returns the name of
/// the first placeholder `lookup` cannot resolve.
pub fn fill(template: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
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
                return Err(tail.to_string());
            };
            let name = tail[1..end].trim();
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => return Err(name.to_string()),
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

/// Split a command line into words the way a POSIX shell does for quotes and
/// backslashes (no expansion; a word starting with `#` starts a comment).
/// Errors on an unterminated quote or a trailing backslash.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    shlex::split(s).ok_or_else(|| "unterminated quote (or a trailing backslash)".to_string())
}

/// The words as one command line a shell would split back into them.
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
        assert_eq!(fill("{nope}", &look).unwrap_err(), "nope");
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
    }
}
