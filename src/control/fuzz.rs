//! Property tests of the control protocol: whatever bytes a client writes, in
//! whatever pieces, the engine receives exactly the well-formed command lines,
//! in order; an over-long line ends that client's connection; a command's
//! typed and JSON forms read back as the same command; and a retry or exclude
//! naming anything the plan lacks is refused. Run with `PROPTEST_CASES=N` for
//! a longer search.

use std::path::Path;

use proptest::prelude::*;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::{read_commands, ClientMsg, MAX_COMMAND};
use crate::engine::{target_problem, Request};
use crate::model::Command;

fn command() -> impl Strategy<Value = Command> {
    let target = prop_oneof![
        "[a-z0-9/_.-]{1,20}",
        "\\PC{1,20}",
        Just("../../etc/passwd".to_string()),
        Just("x".repeat(5000)),
    ];
    prop_oneof![
        Just(Command::Pause),
        Just(Command::Resume),
        Just(Command::TogglePause),
        Just(Command::SkipConfig { config: None }),
        Just(Command::SkipCell { config: None }),
        "[a-z0-9-]{1,12}".prop_map(|c| Command::SkipConfig { config: Some(c) }),
        Just(Command::Quit),
        target.clone().prop_map(|target| Command::Retry { target }),
        target
            .clone()
            .prop_map(|config| Command::Exclude { config }),
        target.prop_map(|config| Command::Include { config }),
    ]
}

/// One line a client may write (without its newline), and the command the
/// engine must receive for it, if any.
fn client_line() -> impl Strategy<Value = (Vec<u8>, Option<Command>)> {
    prop_oneof![
        4 => command().prop_map(|c| {
            let line = serde_json::to_vec(&ClientMsg::Command { command: c.clone(), from: None }).unwrap();
            (line, Some(c))
        }),
        1 => prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..200)
            .prop_map(|b| {
                let c = serde_json::from_slice::<ClientMsg>(&b).ok().map(|ClientMsg::Command { command, .. }| command);
                (b, c)
            }),
        1 => prop_oneof![
            Just(br#"{"command":"launch_missiles"}"#.to_vec()),
            Just(br#"{"command":{"command":"pause"}}"#.to_vec()),
            Just(br#"{"command":{"command":"retry"}}"#.to_vec()),
            Just(br#"{"command":{"command":"retry","target":7}}"#.to_vec()),
            Just(br#"[{"command":{"command":"quit"}}]"#.to_vec()),
            Just(b"\xff\xfe{".to_vec()),
        ].prop_map(|b| (b, None)),
    ]
}

/// What the engine receives when `bytes` arrive in pieces cut at `cuts`.
fn received(bytes: Vec<u8>, cuts: Vec<usize>) -> Vec<Command> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (client, server) = UnixStream::pair().unwrap();
        let (read, _write) = server.into_split();
        let (tx, mut rx) = mpsc::channel::<Request>(1024);
        let reader = tokio::spawn(read_commands(read, tx));
        let writer = tokio::spawn(async move {
            let mut client = client;
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut at = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                // The reader may hang up first (an over-long line): not an error here.
                if client.write_all(&bytes[at..cut]).await.is_err() {
                    return;
                }
                at = cut;
            }
            let _ = client.shutdown().await;
        });
        let mut got = Vec::new();
        while let Some(r) = rx.recv().await {
            assert_eq!(r.source, "attach");
            got.push(r.command);
        }
        let _ = reader.await;
        let _ = writer.await;
        got
    })
}

proptest! {
    #![proptest_config(crate::model::fuzz_config())]

    #[test]
    fn the_engine_receives_exactly_the_well_formed_lines(
        lines in prop::collection::vec(client_line(), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..10),
        last_newline in any::<bool>(),
    ) {
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for (i, (line, cmd)) in lines.iter().enumerate() {
            bytes.extend_from_slice(line);
            // A last line without its newline still counts when the client closes.
            if i + 1 < lines.len() || last_newline {
                bytes.push(b'\n');
            }
            want.extend(cmd.clone());
        }
        prop_assert_eq!(received(bytes, cuts), want);
    }

    #[test]
    fn an_over_long_line_ends_the_connection_and_nothing_after_it_counts(
        before in prop::collection::vec(command(), 0..4),
        pad in 0usize..4096,
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut bytes = Vec::new();
        for c in &before {
            bytes.extend(serde_json::to_vec(&ClientMsg::Command { command: c.clone(), from: None }).unwrap());
            bytes.push(b'\n');
        }
        bytes.extend(std::iter::repeat_n(b' ', MAX_COMMAND as usize + pad));
        bytes.extend(br#"{"command":{"command":"quit"}}"#);
        bytes.push(b'\n');
        bytes.extend(br#"{"command":{"command":"quit"}}"#);
        bytes.push(b'\n');
        prop_assert_eq!(received(bytes, cuts), before);
    }

    #[test]
    fn typed_and_json_forms_read_back_as_the_same_command(c in command(), text in "\\PC{0,100}") {
        let json = crate::model::text::to_json_line(&ClientMsg::Command { command: c.clone(), from: None }).unwrap();
        let back: ClientMsg = serde_json::from_slice(&json).unwrap();
        prop_assert_eq!(back, ClientMsg::Command { command: c.clone(), from: None });
        let typed = match &c {
            Command::Retry { target } => format!("retry={target}"),
            Command::Exclude { config } => format!("exclude={config}"),
            Command::Include { config } => format!("include={config}"),
            Command::SkipConfig { config: Some(c) } => format!("skip-config={c}"),
            Command::SkipCell { config: Some(c) } => format!("skip-cell={c}"),
            other => other.name().replace('_', "-"),
        };
        prop_assert_eq!(typed.parse::<Command>(), Ok(c));
        // Any text is a command or an error of bounded size.
        if let Err(e) = text.parse::<Command>() {
            prop_assert!(e.to_string().chars().count() < 300);
        }
    }

    #[test]
    fn a_target_the_plan_lacks_is_refused(c in command()) {
        let plan = crate::plan::Plan::parse(
            Path::new("demo.toml"),
            include_str!("../../sample_runs/demo.toml"),
        )
        .unwrap();
        let named = c.target();
        let known = named.as_ref().is_some_and(|t| {
            plan.config(t).is_some()
                || matches!(c, Command::Retry { .. }) && plan.cells.iter().any(|cell| &cell.id == t)
        });
        let problem = target_problem(&plan, &c);
        prop_assert_eq!(problem.is_some(), named.is_some() && !known);
        if let Some(p) = problem {
            let p = p.to_string();
            prop_assert!(p.chars().count() < 600, "{}", p.len());
        }
    }
}
