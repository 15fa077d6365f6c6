use super::*;

fn parse(src: &str) -> Script {
    match Script::parse("t.txt", src) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn texts(s: &Script, section: &str, vars: &Vars) -> Vec<String> {
    let r = render(&[s], section, vars);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    r.lines.into_iter().map(|l| l.text).collect()
}

#[test]
fn lines_heads_and_placeholders() {
    let s = parse(
        "# a comment\n\
         let where | /opt/py\n\
         == a : error engine\n\
         | plain ${where} | bars stay\n\
         @0.5 out | at ${n:,} and ${x:.2}${space}\n\
         rank3 [f.py:9] info | ranked\n\
         |\n",
    );
    let mut v = Vars::new();
    v.set("n", 1234567u64).set("x", 2.0f64 / 3.0);
    let r = render(&[&s], "a", &v);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let l = &r.lines;
    assert_eq!(l.len(), 4);
    assert_eq!(l[0].text, "plain /opt/py | bars stay");
    assert_eq!(l[0].writer, Some(Writer::Log(Who::Engine)));
    assert_eq!(l[0].level, Level::Error);
    assert_eq!((l[1].at, l[1].writer), (Some(0.5), Some(Writer::Out)));
    assert_eq!(l[1].text, "at 1,234,567 and 0.67 ");
    assert_eq!(l[2].writer, Some(Writer::Log(Who::Rank(3))));
    assert_eq!((l[2].level, l[2].source), (Level::Info, "f.py:9"));
    assert_eq!(l[3].text, "");
}

#[test]
fn conditions_loops_lets_and_includes() {
    let s = parse(
        "== a\n\
         if kind=x,y\n\
           let what | xy\n\
         else\n\
           let what | other\n\
         end\n\
         | ${what}\n\
         for rank\n\
           if rank!=0\n\
             rank | r${rank} pid ${worker_pid}\n\
           end\n\
         end\n\
         err > b\n\
         == b\n\
         | from b ${what}\n",
    );
    let mut v = Vars::new();
    v.set("kind", "y").set("tp", 3u32).set("pid", 100u32);
    assert_eq!(
        texts(&s, "a", &v),
        ["xy", "r1 pid 161", "r2 pid 162", "from b xy"]
    );
    let r = render(&[&s], "a", &v);
    assert_eq!(r.lines[1].writer, Some(Writer::Log(Who::Rank(1))));
    assert_eq!(r.lines[3].writer, Some(Writer::Err));
    v.set("kind", "z").set("tp", 20u32);
    let lines = texts(&s, "a", &v);
    assert_eq!(lines[0], "other");
    // At most 8 ranks log.
    assert_eq!(lines.len(), 1 + 7 + 1);
}

#[test]
fn a_line_head_beats_its_section_which_beats_the_include() {
    let s = parse(
        "== outer : [o.py:1]\n\
         error main > inner\n\
         == inner : engine\n\
         | from inner's section\n\
         rank0 | own writer\n",
    );
    let r = render(&[&s], "outer", &Vars::new());
    let heads: Vec<_> = r
        .lines
        .iter()
        .map(|l| (l.writer, l.level, l.source))
        .collect();
    assert_eq!(
        heads,
        [
            (Some(Writer::Log(Who::Engine)), Level::Error, "o.py:1"),
            (Some(Writer::Log(Who::Rank(0))), Level::Error, "o.py:1"),
        ]
    );
}

#[test]
fn the_first_script_in_the_chain_wins() {
    let flavor = parse("let c | flavor\n== a\n> b\n");
    let common = parse("let c | common\n== b\n| ${c}\n== a\n| common a\n");
    let r = render(&[&flavor, &common], "a", &Vars::new());
    assert_eq!(r.lines[0].text, "flavor");
}

#[test]
fn missing_things_are_problems_not_panics() {
    let s = parse("== a\n| ${nope} ${t:,}\n> gone\nrank | x\n== loop\n> loop\n");
    let mut v = Vars::new();
    v.set("t", "text");
    let r = render(&[&s], "a", &v);
    assert_eq!(r.lines[0].text, "${nope} ${t}");
    assert_eq!(r.problems.len(), 4, "{:?}", r.problems);
    let r = render(&[&s], "loop", &v);
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    let r = render(&[&s], "absent", &v);
    assert_eq!(r.problems, ["no section `absent`"]);
}

#[test]
fn parse_errors_name_their_line() {
    for (src, line, what) in [
        ("| text before any section", 1, "only `let`"),
        ("== a\nif x=1\n| y", 2, "not closed"),
        ("== a\nend", 2, "without its"),
        ("== a\nelse", 2, "without its"),
        ("== a\nif x=1\nelse\nelse\nend", 4, "without its"),
        ("== a\n\n# c\nbogus | x", 4, "not a head word"),
        ("== a\n@2 | x", 2, "fraction"),
        ("== a\nout err | x", 2, "two writers"),
        ("== a\n| ${x", 2, "without its"),
        ("== a\n| ${x:3}", 2, "format"),
        ("== a\n| ${X}", 2, "placeholder"),
        ("== a\nwhatever", 2, "expected"),
        ("== a\n== a", 2, "twice"),
        ("== A", 1, "section name"),
        ("let c | ${x}", 1, "constant"),
        ("== a\nlet | x", 2, "let NAME"),
        ("== a\nif x", 2, "NAME=VALUE"),
        ("== a\nfor rank\n== b", 2, "not closed"),
    ] {
        match Script::parse("t.txt", src) {
            Ok(_) => panic!("{src:?} parsed"),
            Err(e) => {
                assert_eq!(e.line, line, "{src:?}: {e}");
                assert!(e.problem.to_string().contains(what), "{src:?}: {e}");
                assert!(e.to_string().starts_with(&format!("t.txt:{line}: ")));
            }
        }
    }
}

/// Every problem a script can have, word for word as it was said when the
/// problems were plain strings.
#[test]
fn every_parse_error_says_what_it_said_as_text() {
    for (src, said) in [
        ("== a\n| ${x", "t.txt:2: `${` without its `}` in `${x`"),
        ("== a\n| ${x:3}", "t.txt:2: `${x:3}`: a format is `:.N` (N decimals, at most 9) or `:,` (thousands separators)"),
        ("== a\n| ${X}", "t.txt:2: `${X}`: a placeholder names a value in a-z, 0-9 and _"),
        ("== a\nout err | x", "t.txt:2: two writers in `out err `"),
        ("== a\ninfo error | x", "t.txt:2: two levels in `info error `"),
        ("== a\n@2 | x", "t.txt:2: `@2`: @ takes a fraction from 0 to 1"),
        ("== a\n@0.1 @0.2 | x", "t.txt:2: two times in `@0.1 @0.2 `"),
        ("== a\n[a] [b] | x", "t.txt:2: `[b]`: one non-empty [source] per head"),
        ("== a\nbogus | x", "t.txt:2: `bogus` is not a head word (@AT, out, err, main, engine, rank, rankN, info, error, [source])"),
        ("== A", "t.txt:1: `A`: a section name is in a-z, 0-9, _, - and ."),
        ("== a\nlet | x", "t.txt:2: `let NAME | TEXT` names one value in a-z, 0-9 and _"),
        ("== a\nif x", "t.txt:2: `if x`: expected NAME=VALUE or NAME!=VALUE"),
        ("== a\nif x=", "t.txt:2: `if x=`: expected NAME=V1,V2,..."),
        ("== a\nwhatever", "t.txt:2: `whatever`: expected `HEAD | TEXT`, `HEAD > SECTION`, `let NAME | TEXT`, `if NAME=VALUES`, `else`, `end`, `for rank` or `== SECTION`"),
        ("== a\nfor rank\n== b", "t.txt:2: block not closed with `end`"),
        ("== a\n== a", "t.txt:2: section `a` defined twice"),
        ("let c | ${x}", "t.txt:1: a constant (a `let` before any section) has no placeholders"),
        ("| x", "t.txt:1: only `let` lines come before the first section"),
        ("== a\nelse", "t.txt:2: `else` without its `if`"),
        ("== a\nend", "t.txt:2: `end` without its `if` or `for`"),
    ] {
        let e = Script::parse("t.txt", src).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(said), "{src:?}");
    }
}

#[test]
fn thousands() {
    assert_eq!(group_thousands(0), "0");
    assert_eq!(group_thousands(999), "999");
    assert_eq!(group_thousands(32768), "32,768");
    assert_eq!(group_thousands(1_234_567), "1,234,567");
}
