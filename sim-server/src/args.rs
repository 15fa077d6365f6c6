//! Command-line flags of `sweeptop sim-server` and the fault specs they carry.

use std::fmt;
use std::str::FromStr;

/// Flags of the simulated inference server.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one; the startup log names it).
    #[arg(long)]
    pub port: u16,
    /// Which server to imitate: log style, error bodies, endpoints.
    #[arg(long, value_enum, default_value_t = Flavor::Sglang)]
    pub flavor: Flavor,
    /// Model name served (requests naming another model get 404).
    #[arg(long, default_value = "sim-model")]
    pub model: String,
    /// Context limit: prompt + max_tokens above this is rejected with 400
    /// (see --clamp-max-tokens).
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub max_model_len: u64,
    /// As vLLM 0.32 does: a prompt that fits while prompt + max_tokens does
    /// not is answered 200 with max_tokens silently lowered to what the
    /// context has left (only a prompt over the limit, or max_tokens alone
    /// over it, is a 400).
    #[arg(long)]
    pub clamp_max_tokens: bool,
    /// Count one token more in a completion's prompt than /tokenize does (a
    /// BOS the server adds), as vLLM does with some tokenizers.
    #[arg(long)]
    pub bos: bool,
    /// Tokens a chat template puts before the messages (a model's default
    /// system prompt): the same in every chat prompt, so the prefix cache
    /// finds them.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub system_prompt_tokens: u32,
    /// The HTTP front end holds each generation request this long before the
    /// engine's clock starts (a slow proxy or network): the server's own TTFT
    /// does not see it, the client's does.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub front_delay_ms: u64,
    /// Tensor-parallel size: speeds decoding up, adds NCCL lines and per-rank errors.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub tp: u32,
    /// Speculative decoding method: several tokens per chunk.
    #[arg(long, value_enum, default_value_t = Method::None)]
    pub method: Method,
    /// Draft budget of the speculative method (ddtree's accept length grows with it).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub budget: u32,
    /// Fixed time to first token in ms (replaces the prefill model).
    #[arg(long)]
    pub ttft_ms: Option<f64>,
    /// Fixed time between tokens in ms (replaces the decode model).
    #[arg(long)]
    pub itl_ms: Option<f64>,
    /// Never sleep: tokens as fast as the machine can send them.
    #[arg(long)]
    pub max_speed: bool,
    /// Write, for every streamed request, when each of its text chunks was
    /// handed to the connection, as a JSON line
    /// `{"id":…,"in_us":…,"sent_us":[…]}` (microseconds since the request's
    /// head was in; `in_us`: how long before that its bytes reached this
    /// machine, by the kernel's receive stamp, null where there is none):
    /// the server's own timing, to tell a client's error from the server's
    /// lateness (`cargo bench --bench load`).
    #[arg(long, value_name = "PATH")]
    pub send_log: Option<std::path::PathBuf>,
    /// Time from start to ready, with startup log lines meanwhile.
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub startup_ms: u64,
    /// Fault to inject (repeatable): crash:KIND@TOKENS, startup-crash:KIND,
    /// startup-hang, hang@TOKENS, flood:MBPS.
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<Fault>,
    /// Answer 404 on /tokenize, like servers without a tokenizer endpoint.
    #[arg(long)]
    pub no_tokenize: bool,
    /// Seed of the deterministic spread of speculative accept lengths.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The server being imitated.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Sglang,
    Vllm,
}

/// Speculative decoding method.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    None,
    Dflash,
    Ddtree,
}

impl Method {
    /// The flag's spelling, which the scripts test (`if method=ddtree`).
    pub fn name(self) -> &'static str {
        match self {
            Method::None => "none",
            Method::Dflash => "dflash",
            Method::Ddtree => "ddtree",
        }
    }
}

/// A fault to inject.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Die with KIND's output once this many output tokens were produced in total.
    Crash { kind: CrashKind, after_tokens: u64 },
    /// Die with KIND's output during startup.
    StartupCrash(CrashKind),
    /// Never become ready.
    StartupHang,
    /// Stop producing tokens on every stream once this many were produced in total.
    Hang { after_tokens: u64 },
    /// Write benign log lines to stderr at this many megabytes per second.
    Flood { mb_per_s: f64 },
}

/// What kind of death a crash fault imitates; the names are sweeptop's failure kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    CudaIllegalInstruction,
    CudaIllegalAddress,
    CudaOom,
    DeviceAssert,
    NcclError,
    NoKernelImage,
    TritonError,
    SignalCrash,
    OomKilled,
    ServerExited,
    EngineDead,
}

impl CrashKind {
    pub const ALL: [CrashKind; 11] = [
        CrashKind::CudaIllegalInstruction,
        CrashKind::CudaIllegalAddress,
        CrashKind::CudaOom,
        CrashKind::DeviceAssert,
        CrashKind::NcclError,
        CrashKind::NoKernelImage,
        CrashKind::TritonError,
        CrashKind::SignalCrash,
        CrashKind::OomKilled,
        CrashKind::ServerExited,
        CrashKind::EngineDead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashKind::CudaIllegalInstruction => "cuda_illegal_instruction",
            CrashKind::CudaIllegalAddress => "cuda_illegal_address",
            CrashKind::CudaOom => "cuda_oom",
            CrashKind::DeviceAssert => "device_assert",
            CrashKind::NcclError => "nccl_error",
            CrashKind::NoKernelImage => "no_kernel_image",
            CrashKind::TritonError => "triton_error",
            CrashKind::SignalCrash => "signal_crash",
            CrashKind::OomKilled => "oom_killed",
            CrashKind::ServerExited => "server_exited",
            CrashKind::EngineDead => "engine_dead",
        }
    }
}

impl fmt::Display for CrashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--fault` (or a crash kind in it) that does not parse: what clap prints
/// after `invalid value`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("unknown crash kind `{kind}` (one of: {names})", names = CrashKind::names())]
    UnknownCrashKind { kind: String },
    #[error("`{spec}`: expected crash:KIND@TOKENS")]
    NoTokens { spec: String },
    #[error("`{spec}`: `{given}` is not a token count")]
    NotATokenCount { spec: String, given: String },
    #[error("`{spec}`: `{given}` is not a number of MB/s")]
    NotARate { spec: String, given: String },
    #[error("`{spec}`: MB/s must be in (0, 1000]")]
    RateOutOfRange { spec: String },
    #[error(
        "unknown fault `{spec}` (expected crash:KIND@TOKENS, startup-crash:KIND, \
         startup-hang, hang@TOKENS or flood:MBPS)"
    )]
    Unknown { spec: String },
}

impl CrashKind {
    /// Every kind's name, comma-separated.
    fn names() -> String {
        let names: Vec<&str> = CrashKind::ALL.iter().map(|k| k.name()).collect();
        names.join(", ")
    }
}

impl FromStr for CrashKind {
    type Err = FaultError;

    fn from_str(s: &str) -> Result<Self, FaultError> {
        CrashKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| FaultError::UnknownCrashKind {
                kind: s.to_string(),
            })
    }
}

fn parse_tokens(s: &str, spec: &str) -> Result<u64, FaultError> {
    s.parse::<u64>().map_err(|_| FaultError::NotATokenCount {
        spec: spec.to_string(),
        given: s.to_string(),
    })
}

impl FromStr for Fault {
    type Err = FaultError;

    fn from_str(spec: &str) -> Result<Self, FaultError> {
        let spec = spec.trim();
        if spec == "startup-hang" {
            return Ok(Fault::StartupHang);
        }
        if let Some(rest) = spec.strip_prefix("startup-crash:") {
            return Ok(Fault::StartupCrash(rest.parse()?));
        }
        if let Some(rest) = spec.strip_prefix("crash:") {
            let (kind, tokens) = rest.split_once('@').ok_or_else(|| FaultError::NoTokens {
                spec: spec.to_string(),
            })?;
            return Ok(Fault::Crash {
                kind: kind.parse()?,
                after_tokens: parse_tokens(tokens, spec)?,
            });
        }
        if let Some(rest) = spec.strip_prefix("hang@") {
            return Ok(Fault::Hang {
                after_tokens: parse_tokens(rest, spec)?,
            });
        }
        if let Some(rest) = spec.strip_prefix("flood:") {
            let mb_per_s: f64 = rest.parse().map_err(|_| FaultError::NotARate {
                spec: spec.to_string(),
                given: rest.to_string(),
            })?;
            if !(mb_per_s.is_finite() && mb_per_s > 0.0 && mb_per_s <= 1000.0) {
                return Err(FaultError::RateOutOfRange {
                    spec: spec.to_string(),
                });
            }
            return Ok(Fault::Flood { mb_per_s });
        }
        Err(FaultError::Unknown {
            spec: spec.to_string(),
        })
    }
}

#[cfg(test)]
impl SimArgs {
    /// A server's arguments from these flags (after `--port 1`), for tests.
    pub fn for_tests(flags: &[&str]) -> SimArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: SimArgs,
        }
        let mut argv = vec!["sim", "--port", "1"];
        argv.extend_from_slice(flags);
        Cli::parse_from(argv).args
    }
}

impl SimArgs {
    /// The first token threshold at which a crash or hang fires, with what fires.
    pub fn token_fault(&self) -> Option<(u64, TokenFault)> {
        self.faults
            .iter()
            .filter_map(|f| match f {
                Fault::Crash { kind, after_tokens } => {
                    Some((*after_tokens, TokenFault::Crash(*kind)))
                }
                Fault::Hang { after_tokens } => Some((*after_tokens, TokenFault::Hang)),
                _ => None,
            })
            .min_by_key(|(t, _)| *t)
    }

    pub fn startup_crash(&self) -> Option<CrashKind> {
        self.faults.iter().find_map(|f| match f {
            Fault::StartupCrash(k) => Some(*k),
            _ => None,
        })
    }

    pub fn startup_hang(&self) -> bool {
        self.faults.contains(&Fault::StartupHang)
    }

    pub fn flood_mb_per_s(&self) -> Option<f64> {
        self.faults.iter().find_map(|f| match f {
            Fault::Flood { mb_per_s } => Some(*mb_per_s),
            _ => None,
        })
    }
}

/// What happens when the output-token threshold of a fault is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFault {
    Crash(CrashKind),
    Hang,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_fault_spec() {
        assert_eq!(
            "crash:cuda_illegal_instruction@500".parse::<Fault>(),
            Ok(Fault::Crash {
                kind: CrashKind::CudaIllegalInstruction,
                after_tokens: 500
            })
        );
        assert_eq!(
            "startup-crash:no_kernel_image".parse::<Fault>(),
            Ok(Fault::StartupCrash(CrashKind::NoKernelImage))
        );
        assert_eq!("startup-hang".parse::<Fault>(), Ok(Fault::StartupHang));
        assert_eq!(
            "hang@7".parse::<Fault>(),
            Ok(Fault::Hang { after_tokens: 7 })
        );
        assert_eq!(
            "flood:2.5".parse::<Fault>(),
            Ok(Fault::Flood { mb_per_s: 2.5 })
        );
        for kind in CrashKind::ALL {
            assert_eq!(kind.name().parse::<CrashKind>(), Ok(kind));
        }
    }

    #[test]
    fn a_bad_fault_says_what_it_said_as_text() {
        let said = |spec: &str| spec.parse::<Fault>().unwrap_err().to_string();
        assert_eq!(
            said("crash:cuda_illegal_instruction"),
            "`crash:cuda_illegal_instruction`: expected crash:KIND@TOKENS"
        );
        assert!(said("crash:nope@5")
            .starts_with("unknown crash kind `nope` (one of: cuda_illegal_instruction, "));
        assert_eq!(said("hang@x"), "`hang@x`: `x` is not a token count");
        assert_eq!(said("flood:-1"), "`flood:-1`: MB/s must be in (0, 1000]");
        assert_eq!(
            said("flood:abc"),
            "`flood:abc`: `abc` is not a number of MB/s"
        );
        assert_eq!(
            said("explode"),
            "unknown fault `explode` (expected crash:KIND@TOKENS, startup-crash:KIND, \
             startup-hang, hang@TOKENS or flood:MBPS)"
        );
    }

    #[test]
    fn rejects_bad_fault_specs() {
        for bad in [
            "crash:cuda_illegal_instruction",
            "crash:nope@5",
            "hang@x",
            "flood:-1",
            "flood:abc",
            "explode",
            "",
        ] {
            assert!(bad.parse::<Fault>().is_err(), "{bad} should not parse");
        }
    }
}
