//! `rocegen`: see the crate documentation of `headroom_rocegen`, and `rocegen --help`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use headroom_rocegen::cli::{resolve_gid, resolve_server, settings, Cli, TestCommand, TestKind};
use headroom_rocegen::run::run;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (test, args) = match &cli.test {
        TestCommand::WriteBw(args) => (TestKind::WriteBw, args),
        TestCommand::WriteLat(args) => (TestKind::WriteLat, args),
    };
    let resolved = settings(test, args).and_then(|mut s| {
        resolve_gid(&mut s)?;
        resolve_server(&mut s)?;
        Ok(s)
    });
    let settings = match resolved {
        Ok(settings) => settings,
        Err(why) => {
            eprintln!("rocegen: {why}");
            return ExitCode::from(2);
        }
    };
    let outcome = run(&settings);
    let report = outcome.report;
    if settings.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("rocegen: cannot encode the report: {e}"),
        }
    } else {
        print!("{}", report.to_text(settings.report_gbits));
    }
    if let Some(error) = &report.error {
        eprintln!("rocegen: {error}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
