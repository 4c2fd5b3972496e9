//! `headroom config import-sonic` / `export-sonic` as a user runs them: the reference's worked
//! examples import, `headroom check` shows the reference's XOFF/XON/drop points, export then
//! import gives the same configuration, and bad input is a clear message with exit 2.
//! (The mapping itself is tested in crates/config/tests/sonic.rs.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/tests/data/sonic/");

fn data(name: &str) -> PathBuf {
    Path::new(DATA).join(name)
}

fn headroom(args: &[&str]) -> Output {
    Command::new(HEADROOM).args(args).output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The row of PG `pg` of `port` in `headroom check`'s output, split in columns.
fn pg_row(check: &str, port: &str, pg: u8) -> Vec<String> {
    let mut in_port = false;
    for line in check.lines() {
        if line.starts_with(&format!("{port}:")) {
            in_port = true;
            continue;
        }
        if in_port && line.trim_start().starts_with(&format!("{pg} ")) {
            return line.split_whitespace().map(str::to_owned).collect();
        }
    }
    panic!("no PG {pg} of {port} in:\n{check}");
}

#[test]
fn td3_import_then_check_shows_the_references_points() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("td3.toml");
    let o = headroom(&[
        "config",
        "import-sonic",
        data("td3_t1.json").to_str().unwrap(),
        "--map",
        "Ethernet0=eth1",
        "--map",
        "Ethernet4=eth2",
        "-o",
        toml.to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("warning:"),
        "unmodelled tables are warned: {err}"
    );
    assert!(err.contains("2 ports imported"), "{err}");
    let o = headroom(&["check", "-c", toml.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // PG 3: reserved 4608 (18 cells), headroom 160000 (625 cells), XOFF at 4608 + ½ shared,
    // XON 4608 (18 cells) below it, drop 160000 above it (reference §1.10, §2.2).
    let shared = 32_712_448u64 - 4 * 4608 - 1_622_016;
    let xoff = 4608 + shared / 2;
    let row = pg_row(&out, "Ethernet0", 3);
    // PG Profile Pool Reserved (cells) Shared (cells) Headroom (cells) XOFF (cells) XON (cells) Drop (cells)
    assert_eq!(row[1], "pg_lossless_100000_300m_profile", "{row:?}");
    assert_eq!(&row[3..5], ["4608", "(18)"], "{row:?}");
    assert_eq!(&row[7..9], ["160000", "(625)"], "{row:?}");
    assert_eq!(row[9], xoff.to_string(), "{row:?}");
    assert_eq!(row[11], (xoff - 4608).to_string(), "{row:?}");
    assert_eq!(row[13], (xoff + 160_000).to_string(), "{row:?}");
}

#[test]
fn sn2700_traditional_import_uses_the_lookup_table_given() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("ports.map");
    std::fs::write(
        &map,
        "# SONiC port  device\nEthernet0 eth1\nEthernet4 eth2\nEthernet8=eth3\nEthernet12 eth4\n",
    )
    .unwrap();
    let toml = dir.path().join("sn2700.toml");
    let o = headroom(&[
        "config",
        "import-sonic",
        data("sn2700_t1_traditional.json").to_str().unwrap(),
        "--map-file",
        map.to_str().unwrap(),
        "--pg-profile-lookup",
        data("pg_profile_lookup_msn2700.ini").to_str().unwrap(),
        "-o",
        toml.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let (out, err) = text(&headroom(&["check", "-c", toml.to_str().unwrap()]));
    let row = pg_row(&out, "Ethernet8", 4);
    // 100000 5m: size 50176, xon 19456, xoff 30720 (cells of 96 bytes: Spectrum-1).
    assert_eq!(&row[3..5], ["50176", "(523)"], "{row:?} {err}");
    assert_eq!(&row[7..9], ["30720", "(320)"], "{row:?}");
    assert_eq!(row[11], "19456", "{row:?}");
}

#[test]
fn export_then_import_gives_the_same_check() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.toml");
    let json = dir.path().join("exported.json");
    let second = dir.path().join("second.toml");
    let maps = [
        "--map",
        "Ethernet0=eth1",
        "--map",
        "Ethernet4=eth2",
        "--map",
        "Ethernet8=eth3",
        "--map",
        "Ethernet12=eth4",
    ];
    let import = |from: &Path, to: &Path| {
        let mut args = vec!["config", "import-sonic", from.to_str().unwrap()];
        args.extend(maps);
        args.extend(["-o", to.to_str().unwrap()]);
        let o = headroom(&args);
        assert!(o.status.success(), "{}", text(&o).1);
    };
    import(&data("sn2700_t1_dynamic.json"), &first);
    let o = headroom(&[
        "config",
        "export-sonic",
        "-c",
        first.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    import(&json, &second);
    let check = |p: &Path| {
        let (out, _) = text(&headroom(&["check", "-c", p.to_str().unwrap()]));
        // The first line names the file.
        out.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(check(&first), check(&second));
    assert!(
        check(&first).contains("44032 (459)"),
        "Spectrum-1 100G 5m xoff"
    );
}

#[test]
fn bad_input_is_a_clear_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let td3 = std::fs::read_to_string(data("td3_t1.json")).unwrap();
    let two = ["--map", "Ethernet0=eth1", "--map", "Ethernet4=eth2"];
    let run = |file: &Path, extra: &[&str]| {
        let mut args = vec!["config", "import-sonic", file.to_str().unwrap()];
        args.extend(extra);
        let o = headroom(&args);
        (o.status.code(), text(&o).1)
    };
    // Malformed JSON: the line.
    let bad = write(
        "malformed.json",
        "{\n \"PORT\": {\n  \"Ethernet0\": {\"speed\": }\n}\n",
    );
    let (code, err) = run(&bad, &two);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("malformed.json:3: malformed JSON (column 26): expected value"),
        "{err}"
    );
    // An unknown table: a warning, the import goes on.
    let unknown = write(
        "unknown.json",
        &td3.replace(
            "\"VLAN\":",
            "\"SNMP_COMMUNITY\": {\"public\": {\"TYPE\": \"RO\"}}, \"VLAN\":",
        ),
    );
    let (code, err) = run(&unknown, &two);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "warning: {}:51: .SNMP_COMMUNITY: table SNMP_COMMUNITY (1 entry) is not modelled by \
             headroom: left out",
            unknown.display()
        )),
        "{err}"
    );
    // A bad field: the JSON path.
    let field = write(
        "field.json",
        &td3.replace("\"ecn\": \"ecn_all\"", "\"ecn\": \"ecn_blue\""),
    );
    let (code, err) = run(&field, &two);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(".WRED_PROFILE.AZURE_LOSSLESS.ecn: unknown variant `ecn_blue`"),
        "{err}"
    );
    // A missing port mapping.
    let (code, err) = run(&data("td3_t1.json"), &["--map", "Ethernet0=eth1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            ".PORT.Ethernet4: no device for port Ethernet4: give --map Ethernet4=<interface>"
        ),
        "{err}"
    );
    // A bad --map and a bad map file line.
    let (code, err) = run(&data("td3_t1.json"), &["--map", "Ethernet0"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--map \"Ethernet0\": write PORT=DEVICE"),
        "{err}"
    );
    let map = write("m.map", "Ethernet0 eth1\nEthernet4\n");
    let (code, err) = run(&data("td3_t1.json"), &["--map-file", map.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("m.map:2: \"Ethernet4\" is not `PORT DEVICE`"),
        "{err}"
    );
    // No such file.
    let (code, err) = run(&dir.path().join("none.json"), &two);
    assert_eq!(code, Some(2));
    assert!(err.contains("none.json: No such file"), "{err}");
}
