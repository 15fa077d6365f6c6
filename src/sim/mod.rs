//! TEMPORARY stand-in.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    #[arg(long)]
    pub port: u16,
}
pub async fn serve(_args: SimArgs) -> std::io::Result<()> {
    Err(std::io::Error::other("not yet"))
}
