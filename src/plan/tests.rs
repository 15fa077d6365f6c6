use super::*;

fn parse(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(Path::new("t.toml"), text)
}

const BASE: &str = r#"
name = "t"
config_id = "tp{tp}-{method}-b{budget}"
[vars]
model = "/dev/shm/m"
spec = ""
[server]
command = "python -m sglang.launch_server --model-path {model} --tp {tp} --port {port} {spec}"
port = 30000
env = { CUDA_VISIBLE_DEVICES = "{gpus}" }
requires = ["{model}"]
[[workloads]]
id = "code"
contexts = [1024, 8192]
concurrency = [1, 4]
[[phases]]
id = "p1"
vars = { gpus = "0" }
  [[phases.include]]
  tp = 1
  method = ["baseline", "dflash"]
  [[phases.include]]
  tp = 1
  method = "ddtree"
  budget = [4, 8, 12]
  [[phases.set]]
  when = { method = "ddtree" }
  vars = { spec = "--speculative-algorithm DDTREE --budget {budget}" }
"#;

#[test]
fn expands_configs_cells_and_ids() {
    let plan = parse(BASE).unwrap();
    let ids: Vec<&str> = plan.configs.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "tp1-baseline",
            "tp1-dflash",
            "tp1-ddtree-b4",
            "tp1-ddtree-b8",
            "tp1-ddtree-b12"
        ]
    );
    assert_eq!(plan.cells.len(), 5 * 4);
    assert_eq!(plan.cells[0].id, "tp1-baseline/code-ctx1024-c1");
    let b8 = plan.config("tp1-ddtree-b8").unwrap();
    assert_eq!(
        b8.argv,
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/dev/shm/m",
            "--tp",
            "1",
            "--port",
            "{port}",
            "--speculative-algorithm",
            "DDTREE",
            "--budget",
            "8"
        ]
    );
    // An empty optional placeholder vanishes instead of passing "".
    assert_eq!(plan.config("tp1-baseline").unwrap().argv.len(), 9);
    assert_eq!(b8.requires, ["/dev/shm/m"]);
    assert_eq!(b8.gpus, Some(vec![0]));
    assert!(plan.config("tp1-baseline").unwrap().baseline);
    assert!(!b8.baseline);
}

#[test]
fn ids_are_stable_when_the_plan_is_reordered() {
    let a = parse(BASE).unwrap();
    let reordered = BASE.replace(
        "method = [\"baseline\", \"dflash\"]",
        "method = [\"dflash\", \"baseline\"]",
    );
    let b = parse(&reordered).unwrap();
    let mut ia: Vec<_> = a.cells.iter().map(|c| c.id.clone()).collect();
    let mut ib: Vec<_> = b.cells.iter().map(|c| c.id.clone()).collect();
    assert_ne!(ia, ib);
    ia.sort();
    ib.sort();
    assert_eq!(ia, ib);
}

#[test]
fn exclude_drops_configs() {
    let text = format!("{BASE}\n  [[phases.exclude]]\n  method = \"ddtree\"\n  budget = [8, 12]\n");
    let plan = parse(&text).unwrap();
    let ids: Vec<&str> = plan.configs.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["tp1-baseline", "tp1-dflash", "tp1-ddtree-b4"]);
}

fn err(text: &str) -> PlanError {
    parse(text).unwrap_err()
}

#[test]
fn misspelled_key_names_line_and_column() {
    let text = BASE.replace("concurrency = [1, 4]", "concurrancy = [1, 4]");
    let e = err(&text);
    assert_eq!((e.line, e.col), (15, 1), "{e}");
    assert!(e.message.contains("concurrancy"), "{e}");
    assert!(e.to_string().starts_with("t.toml:15:1: "), "{e}");
    assert!(e.message.ends_with("did you mean `concurrency`?"), "{e}");
    // Nothing near: no guess.
    let e = err(&BASE.replace("concurrency = [1, 4]", "parallelism = [1, 4]"));
    assert!(!e.message.contains("did you mean"), "{e}");
}

#[test]
fn a_duplicate_key_is_named_and_seconds_as_text_are_explained() {
    let e = err(&BASE.replace("name = \"t\"", "name = \"t\"\nname = \"u\""));
    assert!(e.message.contains("duplicate key `name`"), "{e}");
    assert_eq!(e.line, 3, "{e}");
    let e = err(&format!("{BASE}\n[limits]\ncell_timeout_s = \"5s\"\n"));
    assert!(
        e.message
            .contains("expected a number of seconds for `cell_timeout_s`, not the text \"5s\": write cell_timeout_s = 5"),
        "{e}"
    );
}

#[test]
fn a_misspelt_placeholder_gets_the_name_it_was_near() {
    let e = err(&BASE.replace("--tp {tp}", "--tp {tpp}"));
    assert!(e.message.contains("did you mean `{tp}`?"), "{e}");
    let e = err(&BASE.replace("--model-path {model}", "--model-path {modle}"));
    assert!(e.message.contains("did you mean `{model}`?"), "{e}");
}

/// A misspelt name inside a `set` rule's var is pointed at where it is
/// written, not at the command that takes the var in.
#[test]
fn a_placeholder_typo_in_a_var_points_at_the_var() {
    let text = BASE.replace("--budget {budget}\"", "--budget {budgt}\"");
    let e = err(&text);
    assert_eq!(e.line, 28, "{e}");
    assert!(
        e.message
            .contains("`{budgt}` (a value the text at line 8 takes in)")
            && e.message.contains("did you mean `{budget}`?"),
        "{e}"
    );
}

#[test]
fn unresolved_placeholder_is_located() {
    let text = BASE.replace("--tp {tp}", "--tp {tp} --dtype {dtype}");
    let e = err(&text);
    assert_eq!(e.line, 8, "{e}");
    assert!(
        e.message.contains("`{dtype}`") && e.message.contains("tp1-baseline"),
        "{e}"
    );
}

#[test]
fn empty_axis_is_located() {
    let text = BASE.replace("budget = [4, 8, 12]", "budget = []");
    let e = err(&text);
    assert_eq!((e.line, e.col), (25, 12), "{e}");
    assert!(e.message.contains("axis `budget` is empty"), "{e}");
}

#[test]
fn duplicate_config_ids_are_errors() {
    let text = BASE.replace(
        "config_id = \"tp{tp}-{method}-b{budget}\"",
        "config_id = \"tp{tp}-{method}\"",
    );
    let e = err(&text);
    assert!(
        e.message.contains("duplicate config id `tp1-ddtree`"),
        "{e}"
    );
    assert_eq!(e.line, 22, "{e}");
}

#[test]
fn other_errors() {
    assert!(
        err(&BASE.replace("contexts = [1024, 8192]", "contexts = []"))
            .message
            .contains("`contexts` is empty")
    );
    assert!(err(&BASE.replace("port = 30000", "port = 0"))
        .message
        .contains("port"));
    assert!(
        err(&BASE.replace("id = \"code\"", "id = \"code\"\nprompt = \"builtin:nope\""))
            .message
            .contains("builtin:NAME")
    );
    let e = err(&format!("{BASE}\n  [[phases.exclude]]\n  methd = \"x\"\n"));
    assert!(e.message.contains("methd"), "{e}");
    let e = err(&BASE.replace("command = \"python", "command = \"'python"));
    assert!(e.message.contains("unterminated"), "{e}");
    let e = err("name = \"x\"\n[server]\ncommand = \"a\"\nport = 1\n[[workloads]]\nid = \"w\"\ncontexts = [1]\nconcurrency = [1]\n[[phases]]\nid = \"a\"\n[[phases]]\nid = \"a\"\n");
    assert!(e.message.contains("duplicate phase id"), "{e}");
    assert_eq!(e.line, 12);
}

#[test]
fn the_bundled_plans_are_valid() {
    let demo = Plan::parse(
        Path::new("sample_runs/demo.toml"),
        include_str!("../../sample_runs/demo.toml"),
    )
    .unwrap();
    assert_eq!(demo.configs.len(), 8);
    assert!(demo
        .config("tp1-ddtree-b8")
        .unwrap()
        .argv
        .iter()
        .any(|a| a.contains("cuda_illegal_instruction")));
    assert!(!demo
        .config("tp1-ddtree-b4")
        .unwrap()
        .argv
        .iter()
        .any(|a| a.contains("fault")));
}

#[test]
fn a_shell_command_reaches_the_shell_as_written() {
    // Quotes, pipes and `;` are the shell's; only placeholders are filled.
    let plan = parse(
        r#"
name = "sh"
[server]
shell = true
command = "printf '%s  %s\n' 'a b' \"{tp}\" | tr a x; exec srv --port {port} --tp {tp}"
port = "auto"
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
[[phases]]
id = "p"
[phases.matrix]
tp = [2]
"#,
    )
    .unwrap();
    assert_eq!(
        plan.configs[0].argv,
        ["printf '%s  %s\n' 'a b' \"2\" | tr a x; exec srv --port {port} --tp 2"]
    );
    let line = super::template::command_line(&plan.configs[0].argv, true);
    assert!(line.starts_with("printf '%s  %s\n' 'a b'"), "{line}");
}

#[test]
fn server_gpus_and_pack() {
    let auto = BASE
        .replace("port = 30000", "port = \"auto\"\ngpus = \"auto:{tp}\"")
        .replace("env = { CUDA_VISIBLE_DEVICES = \"{gpus}\" }\n", "")
        .replace("vars = { gpus = \"0\" }", "pack = true");
    let plan = parse(&auto).unwrap();
    assert!(plan.phases[0].pack);
    let c = &plan.configs[0];
    assert_eq!((c.gpus.clone(), c.gpu_count), (None, Some(1)));
    // The server learns its GPUs from the variable, filled at launch.
    assert_eq!(c.env["CUDA_VISIBLE_DEVICES"], "{gpus}");
    assert_eq!(c.gpus_wanted(), Some(1));

    let list = auto.replace("auto:{tp}", "2,3");
    let c = &parse(&list).unwrap().configs[0];
    assert_eq!((c.gpus.clone(), c.gpu_count), (Some(vec![2, 3]), None));

    // A fixed port cannot be shared by configs side by side.
    let e = err(&auto.replace("port = \"auto\"", "port = 30000"));
    assert!(e.message.contains("set port = \"auto\""), "{e}");
    for bad in ["auto:0", "auto:x", "GPU-3f2a"] {
        let e = err(&auto.replace("auto:{tp}", bad));
        assert!(e.message.contains("server.gpus"), "{bad}: {e}");
        assert!(e.line > 0, "{e}");
    }
    // Without server.gpus, `{gpus}` is the plan's to define, as any placeholder.
    let undefined = BASE.replace("vars = { gpus = \"0\" }", "");
    assert!(err(&undefined)
        .message
        .contains("unresolved placeholder `{gpus}`"));
    // Both ways of naming GPUs at once is a contradiction.
    let both = auto.replace(
        "gpus = \"auto:{tp}\"",
        "gpus = \"auto:1\"\nenv = { CUDA_VISIBLE_DEVICES = \"0\" }",
    );
    assert!(err(&both).message.contains("CUDA_VISIBLE_DEVICES"));
}

#[test]
fn prepare_steps_are_filled_per_config_linked_and_shared() {
    // Linked by `requires`: every config needs the one model, filled once.
    let text = format!(
        "{BASE}[[prepare]]\nid = \"model\"\ncommand = \"rsync -a /data/m/ {{model}}/\"\ncreates = [\"{{model}}\"]\nexpect_from = \"/data/m\"\n"
    );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.prepare.len(), 1);
    assert_eq!(plan.prepare[0].key, "model");
    assert_eq!(plan.prepare[0].creates, ["/dev/shm/m"]);
    assert_eq!(plan.prepare[0].expect, Expect::From("/data/m".into()));
    assert!(plan.configs.iter().all(|c| c.prepare == ["model"]));
    // A model per method: each config its own filling, told apart by target.
    let per_method = text
        .replace("model = \"/dev/shm/m\"", "model = \"/dev/shm/{method}\"")
        .replace("/data/m", "/data/{method}");
    let plan = parse(&per_method).unwrap();
    let keys: Vec<&str> = plan.prepare.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "model@/dev/shm/baseline",
            "model@/dev/shm/dflash",
            "model@/dev/shm/ddtree"
        ]
    );
    let b8 = plan.config("tp1-ddtree-b8").unwrap();
    assert_eq!(b8.prepare, ["model@/dev/shm/ddtree"]);
    // Linked by no config: every config's; named by a phase: that phase's.
    let unlinked = format!(
        "{BASE}[[prepare]]\nid = \"warm\"\ncommand = \"true\"\ncreates = [\"/tmp/elsewhere\"]\n"
    );
    let plan = parse(&unlinked).unwrap();
    assert!(plan.configs.iter().all(|c| c.prepare == ["warm"]));
    // Two fillings writing one place: refused, at the step's `creates`.
    let clash = text.replace("rsync -a /data/m/", "rsync -a /data/{method}/");
    let err = parse(&clash).unwrap_err();
    assert!(
        err.message
            .contains("configs fill prepare step `model` differently but both write /dev/shm/m"),
        "{err}"
    );
    assert_eq!(
        err.line,
        text.lines().position(|l| l.starts_with("creates")).unwrap() + 1
    );
}
