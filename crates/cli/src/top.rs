//! `headroom top`: a live terminal view of a running switch.
//!
//! Every `--interval` the view asks the control socket for a [`Snapshot`] (every counter at
//! once) and shows rates computed from the difference with the previous snapshot, divided by
//! the difference of their `uptime_s` (the switch's own clock, so a slow terminal does not
//! distort rates). Views: ports, queues, PFC per priority, drops by reason, PFC watchdog.
//!
//! Drawing is a pure function of two snapshots and the view state ([`draw`]); key handling is
//! a pure function of the view state and a key ([`handle_key`]). Only [`top`] touches the
//! terminal and the socket.

use crate::client::Target;
use crate::table::thousands;
use clap::{Args, ValueEnum};
use headroom_runtime::protocol::{Request, Show, Snapshot};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Tabs};
use ratatui::Frame;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Shortest refresh period accepted: the switch serves its control socket every 20 ms.
const MIN_INTERVAL_S: f64 = 0.1;
/// Longest refresh period accepted.
const MAX_INTERVAL_S: f64 = 3600.0;
/// Rows moved by PageUp/PageDown.
const PAGE_ROWS: usize = 10;

/// `headroom top` options.
#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// Refresh period, seconds (rates are averaged over it).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    interval: f64,
    /// View shown first.
    #[arg(long, value_enum, default_value_t = View::Ports)]
    view: View,
    /// Print one screen as text after one interval and exit (no terminal needed; for logs).
    #[arg(long)]
    once: bool,
}

/// What the screen shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum View {
    /// Traffic, PFC, ECN and drops per port.
    Ports,
    /// Traffic, depth, ECN, drops and queueing delay per egress queue.
    Queues,
    /// PFC frames received and sent, paused time and PG occupancy per priority.
    Pfc,
    /// Drops by reason per port.
    Drops,
    /// PFC watchdog state per watched queue.
    Watchdog,
}

impl View {
    const ALL: [View; 5] = [
        View::Ports,
        View::Queues,
        View::Pfc,
        View::Drops,
        View::Watchdog,
    ];

    fn index(self) -> usize {
        Self::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }

    fn title(self) -> &'static str {
        match self {
            View::Ports => "1 Ports",
            View::Queues => "2 Queues",
            View::Pfc => "3 PFC",
            View::Drops => "4 Drops",
            View::Watchdog => "5 Watchdog",
        }
    }

    fn next(self) -> Self {
        Self::ALL[(self.index() + 1) % Self::ALL.len()]
    }

    fn previous(self) -> Self {
        Self::ALL[(self.index() + Self::ALL.len() - 1) % Self::ALL.len()]
    }
}

/// What the operator chose with the keyboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ViewState {
    /// Current view.
    pub(crate) view: View,
    /// First table row shown.
    pub(crate) scroll: usize,
    /// Hide queues with no traffic, no depth and no drops.
    pub(crate) hide_idle: bool,
    /// Stop refreshing (the last two snapshots stay on screen).
    pub(crate) frozen: bool,
}

impl ViewState {
    pub(crate) fn new(view: View) -> Self {
        Self {
            view,
            scroll: 0,
            hide_idle: false,
            frozen: false,
        }
    }
}

/// What a key did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyOutcome {
    /// Leave `top`.
    Quit,
    /// The state changed: redraw.
    Changed,
    /// Not a key of ours.
    Ignored,
}

/// Applies one key press to the view state.
pub(crate) fn handle_key(state: &mut ViewState, key: KeyEvent) -> KeyOutcome {
    if key.kind != KeyEventKind::Press {
        return KeyOutcome::Ignored;
    }
    let select = |state: &mut ViewState, view: View| {
        state.view = view;
        state.scroll = 0;
    };
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => return KeyOutcome::Quit,
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            return KeyOutcome::Quit
        }
        KeyCode::Tab | KeyCode::Right | KeyCode::Char('l') => select(state, state.view.next()),
        KeyCode::BackTab | KeyCode::Left | KeyCode::Char('h') => {
            select(state, state.view.previous());
        }
        KeyCode::Char(c @ '1'..='5') => {
            let i = usize::from(c as u8 - b'1');
            select(state, View::ALL[i]);
        }
        KeyCode::Down | KeyCode::Char('j') => state.scroll = state.scroll.saturating_add(1),
        KeyCode::Up | KeyCode::Char('k') => state.scroll = state.scroll.saturating_sub(1),
        KeyCode::PageDown => state.scroll = state.scroll.saturating_add(PAGE_ROWS),
        KeyCode::PageUp => state.scroll = state.scroll.saturating_sub(PAGE_ROWS),
        KeyCode::Home => state.scroll = 0,
        KeyCode::Char('z') => state.hide_idle = !state.hide_idle,
        KeyCode::Char('p') | KeyCode::Char(' ') => state.frozen = !state.frozen,
        _ => return KeyOutcome::Ignored,
    }
    KeyOutcome::Changed
}

/// Everything one screen shows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Screen<'a> {
    /// The snapshot before `current` (`None`: rates are not known yet).
    pub(crate) previous: Option<&'a Snapshot>,
    /// The newest snapshot.
    pub(crate) current: &'a Snapshot,
    /// View state.
    pub(crate) state: &'a ViewState,
    /// Refresh period, for the header.
    pub(crate) interval: Duration,
    /// An error to show instead of the key help (e.g. the switch went away).
    pub(crate) status: Option<&'a str>,
}

/// Difference of two snapshots: per-second rates of counters.
#[derive(Clone, Copy, Debug)]
struct Delta<'a> {
    previous: Option<&'a Snapshot>,
    seconds: f64,
}

impl<'a> Delta<'a> {
    fn new(previous: Option<&'a Snapshot>, current: &Snapshot) -> Self {
        let seconds = previous.map_or(0.0, |p| current.uptime_s - p.uptime_s);
        // A restarted switch (uptime went back) gives no rates rather than nonsense.
        let previous = previous.filter(|_| seconds > 0.0);
        Self { previous, seconds }
    }

    /// Per-second rate of a counter read as `read(snapshot)`; `None` without a previous
    /// snapshot or when the item is not in it. A counter that went down (cleared) counts 0.
    fn rate(&self, now: u64, read: impl FnOnce(&'a Snapshot) -> Option<u64>) -> Option<f64> {
        let before = read(self.previous?)?;
        Some(now.saturating_sub(before) as f64 / self.seconds)
    }

    /// The raw increase of a counter, as [`Delta::rate`] without dividing.
    fn increase(&self, now: u64, read: impl FnOnce(&'a Snapshot) -> Option<u64>) -> Option<u64> {
        Some(now.saturating_sub(read(self.previous?)?))
    }
}

/// `1234.5` → `1.2k`; small values keep a decimal so that 0.5 PFC frames/s does not read 0.
fn fmt_rate(v: Option<f64>) -> String {
    let Some(v) = v else {
        return "-".into();
    };
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.1}")
    } else if v < 1e3 {
        format!("{v:.0}")
    } else if v < 1e6 {
        format!("{:.1}k", v / 1e3)
    } else if v < 1e9 {
        format!("{:.1}M", v / 1e6)
    } else {
        format!("{:.1}G", v / 1e9)
    }
}

/// Bytes per second as bits per second (`Gb/s`, decimal units as link speeds are quoted).
fn fmt_bits(bytes_per_second: Option<f64>) -> String {
    let Some(v) = bytes_per_second.map(|b| b * 8.0) else {
        return "-".into();
    };
    if v < 1e3 {
        format!("{v:.0} b/s")
    } else if v < 1e6 {
        format!("{:.1} Kb/s", v / 1e3)
    } else if v < 1e9 {
        format!("{:.1} Mb/s", v / 1e6)
    } else {
        format!("{:.2} Gb/s", v / 1e9)
    }
}

/// Nanoseconds as a short duration.
fn fmt_ns(ns: Option<u64>) -> String {
    let Some(ns) = ns else {
        return "-".into();
    };
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1}ms", v / 1e6)
    } else {
        format!("{:.2}s", v / 1e9)
    }
}

fn fmt_uptime(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
}

/// The upper bound of the bucket holding quantile `q` of a log2 histogram (bucket k holds
/// delays in [2^(k-1), 2^k) ns, `headroom_core::counters::delay_bucket`).
fn histogram_quantile_ns(buckets: &[u64], q: f64) -> Option<u64> {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (k, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(if k == 0 { 0 } else { 1u64 << k.min(63) });
        }
    }
    None
}

/// A table: header cells, rows, and which rows to highlight. The first `labels` columns are
/// names (left-aligned); the others are numbers (right-aligned).
struct TableData {
    header: Vec<&'static str>,
    labels: usize,
    rows: Vec<Vec<String>>,
    /// Rows to show in red (stormed queues).
    alert: Vec<bool>,
}

impl TableData {
    fn new(header: Vec<&'static str>, labels: usize) -> Self {
        Self {
            header,
            labels,
            rows: Vec::new(),
            alert: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<String>, alert: bool) {
        self.rows.push(row);
        self.alert.push(alert);
    }

    /// Each column as wide as its widest cell (header included).
    fn widths(&self) -> Vec<Constraint> {
        (0..self.header.len())
            .map(|i| {
                let widest = self
                    .rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .chain(std::iter::once(self.header[i].chars().count()))
                    .max()
                    .unwrap_or(0);
                Constraint::Length(u16::try_from(widest).unwrap_or(u16::MAX))
            })
            .collect()
    }

    fn cell<'a>(&self, column: usize, text: &'a str) -> Cell<'a> {
        if column < self.labels {
            Cell::from(Line::from(text))
        } else {
            Cell::from(Line::from(text).right_aligned())
        }
    }
}

fn ports_table(s: &Snapshot, d: Delta<'_>) -> TableData {
    let mut t = TableData::new(
        vec![
            "Port",
            "Tx",
            "RX fr/s",
            "RX bits/s",
            "TX fr/s",
            "TX bits/s",
            "PFC rx/s",
            "PFC tx/s",
            "ECN/s",
            "Drop/s",
            "Drops",
        ],
        2,
    );
    for port in &s.ports {
        let name = port.port.as_str();
        let find = |snap: &'_ Snapshot| snap.ports.iter().find(|p| p.port == name).cloned();
        let pfc_of = |snap: &Snapshot, rx: bool| {
            snap.pfc
                .iter()
                .find(|p| p.port == name)
                .map(|p| (if rx { p.rx } else { p.tx }).iter().sum::<u64>())
        };
        let ecn_of = |snap: &Snapshot| {
            snap.queues
                .iter()
                .filter(|q| q.port == name)
                .map(|q| q.ecn_marked)
                .sum::<u64>()
        };
        let drops: u64 = port.drops.values().sum();
        t.push(
            vec![
                name.to_owned(),
                if port.tx_enabled { "on" } else { "HELD" }.into(),
                fmt_rate(d.rate(port.rx_frames, |p| find(p).map(|x| x.rx_frames))),
                fmt_bits(d.rate(port.rx_bytes, |p| find(p).map(|x| x.rx_bytes))),
                fmt_rate(d.rate(port.tx_frames, |p| find(p).map(|x| x.tx_frames))),
                fmt_bits(d.rate(port.tx_bytes, |p| find(p).map(|x| x.tx_bytes))),
                fmt_rate(d.rate(pfc_of(s, true).unwrap_or(0), |p| pfc_of(p, true))),
                fmt_rate(d.rate(pfc_of(s, false).unwrap_or(0), |p| pfc_of(p, false))),
                fmt_rate(d.rate(ecn_of(s), |p| Some(ecn_of(p)))),
                fmt_rate(d.rate(drops, |p| find(p).map(|x| x.drops.values().sum()))),
                thousands(drops),
            ],
            false,
        );
    }
    t
}

fn queues_table(s: &Snapshot, d: Delta<'_>, hide_idle: bool) -> TableData {
    let mut t = TableData::new(
        vec![
            "Port",
            "TxQ",
            "TX fr/s",
            "TX bits/s",
            "Depth B",
            "ECN/s",
            "Drop/s",
            "Delay avg",
            "Delay p99<=",
            "Drops",
        ],
        2,
    );
    for q in &s.queues {
        let find = |snap: &'_ Snapshot| {
            snap.queues
                .iter()
                .find(|x| x.port == q.port && x.queue == q.queue)
                .cloned()
        };
        let frames = d.increase(q.packets, |p| find(p).map(|x| x.packets));
        // The interval's mean delay: increase of (mean × packets) over increase of packets.
        let delay_sum = q.mean_delay_ns.saturating_mul(q.packets);
        let mean = d
            .increase(delay_sum, |p| {
                find(p).map(|x| x.mean_delay_ns.saturating_mul(x.packets))
            })
            .zip(frames)
            .and_then(|(sum, n)| sum.checked_div(n));
        let histogram = |snap: &Snapshot| {
            snap.delay_histograms
                .iter()
                .find(|h| h.port == q.port && h.queue == q.queue)
                .map(|h| h.buckets.clone())
        };
        let p99 = histogram(s)
            .zip(d.previous.and_then(histogram))
            .and_then(|(now, before)| {
                let delta: Vec<u64> = now
                    .iter()
                    .enumerate()
                    .map(|(k, n)| n.saturating_sub(before.get(k).copied().unwrap_or(0)))
                    .collect();
                histogram_quantile_ns(&delta, 0.99)
            });
        let drop_rate = d.rate(q.drop_packets, |p| find(p).map(|x| x.drop_packets));
        let ecn_rate = d.rate(q.ecn_marked, |p| find(p).map(|x| x.ecn_marked));
        let idle = frames.unwrap_or(0) == 0
            && q.depth_bytes == 0
            && drop_rate.unwrap_or(0.0) == 0.0
            && ecn_rate.unwrap_or(0.0) == 0.0;
        if hide_idle && idle {
            continue;
        }
        t.push(
            vec![
                q.port.clone(),
                format!("UC{}", q.queue),
                fmt_rate(d.rate(q.packets, |p| find(p).map(|x| x.packets))),
                fmt_bits(d.rate(q.bytes, |p| find(p).map(|x| x.bytes))),
                thousands(q.depth_bytes),
                fmt_rate(ecn_rate),
                fmt_rate(drop_rate),
                fmt_ns(mean),
                fmt_ns(p99),
                thousands(q.drop_packets),
            ],
            false,
        );
    }
    t
}

fn pfc_table(s: &Snapshot, d: Delta<'_>) -> TableData {
    let mut header = vec!["Port", ""];
    header.extend(["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"]);
    let mut t = TableData::new(header, 2);
    for pfc in &s.pfc {
        let name = pfc.port.as_str();
        let find = |snap: &'_ Snapshot| snap.pfc.iter().find(|p| p.port == name).cloned();
        let mut rx = vec![name.to_owned(), "Rx/s".into()];
        let mut tx = vec![String::new(), "Tx/s".into()];
        let mut paused = vec![String::new(), "Paused %".into()];
        for i in 0..8 {
            rx.push(fmt_rate(d.rate(pfc.rx[i], |p| find(p).map(|x| x.rx[i]))));
            tx.push(fmt_rate(d.rate(pfc.tx[i], |p| find(p).map(|x| x.tx[i]))));
            // Paused time is in µs: increase / (interval in µs) as a percentage.
            let share = d
                .rate(pfc.rx_paused_us[i], |p| find(p).map(|x| x.rx_paused_us[i]))
                .map(|us_per_s| (us_per_s / 1e4).min(100.0));
            paused.push(share.map_or_else(|| "-".into(), |v| format!("{v:.0}")));
        }
        let mut used = vec![String::new(), "PG used B".into()];
        match s.pg_used.iter().find(|r| r.port == name) {
            Some(r) => used.extend(r.bytes.iter().map(|b| thousands(*b))),
            None => used.extend(std::iter::repeat_n("-".to_owned(), 8)),
        }
        t.push(rx, false);
        t.push(tx, false);
        t.push(paused, false);
        t.push(used, false);
    }
    t
}

fn drops_table(s: &Snapshot, d: Delta<'_>) -> TableData {
    let mut t = TableData::new(vec!["Port", "Reason", "Dropped", "Drop/s"], 2);
    for port in &s.ports {
        for (reason, n) in &port.drops {
            let rate = d.rate(*n, |p| {
                // A reason absent before had not dropped anything yet.
                p.ports
                    .iter()
                    .find(|x| x.port == port.port)
                    .map(|x| x.drops.get(reason).copied().unwrap_or(0))
            });
            t.push(
                vec![
                    port.port.clone(),
                    reason.clone(),
                    thousands(*n),
                    fmt_rate(rate),
                ],
                false,
            );
        }
    }
    if t.rows.is_empty() {
        t.push(vec!["(no drops)".into()], false);
    }
    t
}

fn watchdog_table(s: &Snapshot, d: Delta<'_>) -> TableData {
    let mut t = TableData::new(
        vec![
            "Queue",
            "Status",
            "Storms D/R",
            "TX ok/s",
            "TX drop/s",
            "RX ok/s",
            "RX drop/s",
            "Last TX OK/DROP",
        ],
        2,
    );
    for w in &s.pfcwd {
        let find = |snap: &'_ Snapshot| snap.pfcwd.iter().find(|x| x.queue == w.queue).cloned();
        t.push(
            vec![
                w.queue.clone(),
                w.status.clone(),
                format!("{}/{}", w.storm_detected, w.storm_restored),
                fmt_rate(d.rate(w.tx_ok, |p| find(p).map(|x| x.tx_ok))),
                fmt_rate(d.rate(w.tx_drop, |p| find(p).map(|x| x.tx_drop))),
                fmt_rate(d.rate(w.rx_ok, |p| find(p).map(|x| x.rx_ok))),
                fmt_rate(d.rate(w.rx_drop, |p| find(p).map(|x| x.rx_drop))),
                format!("{}/{}", w.tx_last_ok, w.tx_last_drop),
            ],
            w.status == "stormed",
        );
    }
    if t.rows.is_empty() {
        t.push(vec!["(no queue is watched)".into()], false);
    }
    t
}

fn table_for(screen: &Screen<'_>) -> TableData {
    let d = Delta::new(screen.previous, screen.current);
    let s = screen.current;
    match screen.state.view {
        View::Ports => ports_table(s, d),
        View::Queues => queues_table(s, d, screen.state.hide_idle),
        View::Pfc => pfc_table(s, d),
        View::Drops => drops_table(s, d),
        View::Watchdog => watchdog_table(s, d),
    }
}

/// Lines a screen needs to show every row of its table (for `--once`).
fn lines_needed(screen: &Screen<'_>) -> u16 {
    // Header, tabs, table border and header (3), help line.
    u16::try_from(table_for(screen).rows.len() + 6).unwrap_or(u16::MAX)
}

/// Draws one screen.
pub(crate) fn draw(frame: &mut Frame<'_>, screen: &Screen<'_>) {
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let stormed = screen
        .current
        .pfcwd
        .iter()
        .filter(|w| w.status == "stormed")
        .count();
    let mut title = format!(
        "headroom top | up {} | every {:.1}s | {} ports",
        fmt_uptime(screen.current.uptime_s),
        screen.interval.as_secs_f64(),
        screen.current.ports.len()
    );
    if stormed > 0 {
        title.push_str(&format!(" | {stormed} STORMED"));
    }
    if screen.state.frozen {
        title.push_str(" | FROZEN");
    }
    frame.render_widget(
        Paragraph::new(title).style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    frame.render_widget(
        Tabs::new(View::ALL.iter().map(|v| v.title()))
            .select(screen.state.view.index())
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
        tabs,
    );

    let data = table_for(screen);
    let scroll = screen.state.scroll.min(data.rows.len().saturating_sub(1));
    let rows = data
        .rows
        .iter()
        .zip(&data.alert)
        .skip(scroll)
        .map(|(cells, alert)| {
            let row = Row::new(
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| data.cell(i, c.as_str())),
            );
            if *alert {
                row.style(Style::new().fg(Color::Red).add_modifier(Modifier::BOLD))
            } else {
                row
            }
        });
    let header = Row::new(data.header.iter().enumerate().map(|(i, h)| data.cell(i, h)))
        .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let rate_note = if screen.previous.is_some() {
        ""
    } else {
        " (rates after the next refresh)"
    };
    frame.render_widget(
        Table::new(rows, data.widths())
            .header(header)
            .column_spacing(1)
            .block(
                Block::new()
                    .borders(Borders::TOP)
                    .title(format!("{}{rate_note}", screen.state.view.title())),
            ),
        body,
    );

    let help = match screen.status {
        Some(e) => Line::styled(format!("! {e}"), Style::new().fg(Color::Red)),
        None => Line::raw(
            "q quit | tab/arrows view | 1-5 view | up/down scroll | z hide idle queues | p freeze",
        ),
    };
    frame.render_widget(Paragraph::new(help), foot);
}

fn fetch(target: &Target) -> Result<Snapshot, String> {
    let response = target.request(&Request::Show {
        what: Show::Snapshot,
    })?;
    if !response.ok {
        return Err(response
            .error
            .unwrap_or_else(|| "the switch refused the request".into()));
    }
    serde_json::from_value(response.data).map_err(|e| format!("unexpected answer: {e}"))
}

/// `headroom top`.
pub(crate) fn top(target: &Target, args: &TopArgs) -> ExitCode {
    if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&args.interval) {
        eprintln!(
            "error: --interval {} is out of range {MIN_INTERVAL_S}..={MAX_INTERVAL_S} seconds",
            args.interval
        );
        return ExitCode::FAILURE;
    }
    let interval = Duration::from_secs_f64(args.interval);
    let result = if args.once {
        once(target, interval, args.view)
    } else if !std::io::stdout().is_terminal() {
        Err("headroom top needs a terminal; use `headroom top --once` or `headroom show … --json` in scripts".into())
    } else {
        interactive(target, interval, args.view)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Two snapshots one interval apart, one screen printed as text.
fn once(target: &Target, interval: Duration, view: View) -> Result<(), String> {
    let first = fetch(target)?;
    std::thread::sleep(interval);
    let second = fetch(target)?;
    let state = ViewState::new(view);
    let screen = Screen {
        previous: Some(&first),
        current: &second,
        state: &state,
        interval,
        status: None,
    };
    let width = ratatui::crossterm::terminal::size()
        .map_or(132, |(w, _)| w)
        .max(100);
    let backend = ratatui::backend::TestBackend::new(width, lines_needed(&screen));
    let mut terminal = ratatui::Terminal::new(backend).map_err(|e| e.to_string())?;
    terminal
        .draw(|f| draw(f, &screen))
        .map_err(|e| e.to_string())?;
    for line in buffer_lines(terminal.backend().buffer()) {
        crate::client::emit(format_args!("{}\n", line.trim_end()));
    }
    Ok(())
}

/// The text of each line of a rendered buffer.
fn buffer_lines(buffer: &ratatui::buffer::Buffer) -> Vec<String> {
    let area = buffer.area;
    (area.top()..area.bottom())
        .map(|y| {
            (area.left()..area.right())
                .map(|x| buffer[(x, y)].symbol())
                .collect()
        })
        .collect()
}

fn interactive(target: &Target, interval: Duration, view: View) -> Result<(), String> {
    // Fail before taking over the terminal when the switch cannot be reached.
    let mut current = fetch(target)?;
    let mut previous: Option<Snapshot> = None;
    let mut state = ViewState::new(view);
    let mut status: Option<String> = None;
    let mut next_fetch = Instant::now() + interval;
    // Raw mode and the alternate screen; restored on return and by ratatui's panic hook.
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use the terminal: {e}"))?;
    let result = loop {
        let screen = Screen {
            previous: previous.as_ref(),
            current: &current,
            state: &state,
            interval,
            status: status.as_deref(),
        };
        if let Err(e) = terminal.draw(|f| draw(f, &screen)) {
            break Err(e.to_string());
        }
        let wait = next_fetch.saturating_duration_since(Instant::now());
        match event::poll(wait) {
            Ok(true) => match event::read() {
                Ok(Event::Key(key)) => {
                    if handle_key(&mut state, key) == KeyOutcome::Quit {
                        break Ok(());
                    }
                }
                Ok(_) => {}
                Err(e) => break Err(e.to_string()),
            },
            Ok(false) => {}
            Err(e) => break Err(e.to_string()),
        }
        if Instant::now() >= next_fetch {
            next_fetch = Instant::now() + interval;
            if !state.frozen {
                match fetch(target) {
                    Ok(s) => {
                        previous = Some(std::mem::replace(&mut current, s));
                        status = None;
                    }
                    // Keep the last data on screen; retry at the next refresh.
                    Err(e) => status = Some(e),
                }
            }
        }
    };
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_runtime::protocol::{
        DelayHistogramRow, PfcCounters, PfcwdStatsRow, PortSummary, QueueCounters, WatermarkRow,
    };
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::collections::BTreeMap;

    const PORTS: [&str; 2] = ["Ethernet0", "Ethernet4"];

    /// A snapshot at `uptime_s` where every counter of port i is `scale × base`, so that the
    /// rates between two snapshots are known exactly.
    fn snapshot(uptime_s: f64, scale: u64) -> Snapshot {
        let mut s = Snapshot {
            uptime_s,
            ..Snapshot::default()
        };
        for (i, name) in PORTS.iter().enumerate() {
            let i = i as u64;
            let mut drops = BTreeMap::new();
            if i == 1 {
                drops.insert("ingress_headroom_exhausted".to_owned(), 7 * scale);
            }
            s.ports.push(PortSummary {
                port: (*name).into(),
                device: format!("m{i}"),
                speed_mbps: 10_000,
                tx_enabled: i == 0,
                rx_frames: 1_000 * scale,
                rx_bytes: 1_250_000 * scale,
                tx_frames: 500 * scale,
                tx_bytes: 625_000 * scale,
                drops,
                ..PortSummary::default()
            });
            let mut rx = [0; 8];
            let mut tx = [0; 8];
            rx[3] = 20 * scale;
            tx[4] = 3 * scale;
            let mut paused = [0; 8];
            // 500 ms more paused per 2 s on priority 3: 25 %.
            paused[3] = 500_000 * scale;
            s.pfc.push(PfcCounters {
                port: (*name).into(),
                rx,
                tx,
                rx_paused_us: paused,
                pause_rx: 0,
            });
            for q in 0..8u8 {
                let busy = q == 3;
                s.queues.push(QueueCounters {
                    port: (*name).into(),
                    queue: q,
                    packets: if busy { 400 * scale } else { 0 },
                    bytes: if busy { 500_000 * scale } else { 0 },
                    drop_packets: if busy { 2 * scale } else { 0 },
                    drop_bytes: 0,
                    ecn_marked: if busy { 40 * scale } else { 0 },
                    depth_bytes: if busy { 12_288 } else { 0 },
                    mean_delay_ns: if busy { 2_000 } else { 0 },
                });
                let mut buckets = vec![0; 40];
                if busy {
                    // 99 % of frames in bucket 11 ([1024, 2048) ns), 1 % in bucket 14.
                    buckets[11] = 396 * scale;
                    buckets[14] = 4 * scale;
                }
                s.delay_histograms.push(DelayHistogramRow {
                    port: (*name).into(),
                    queue: q,
                    buckets,
                });
            }
            s.pg_used.push(WatermarkRow {
                port: (*name).into(),
                bytes: [0, 0, 0, 4096 * (i + 1), 0, 0, 0, 0],
            });
            s.pfcwd.push(PfcwdStatsRow {
                queue: format!("{name}:3"),
                status: if i == 1 { "stormed" } else { "operational" }.into(),
                storm_detected: i,
                tx_drop: 10 * scale * i,
                ..PfcwdStatsRow::default()
            });
        }
        s
    }

    fn render(previous: Option<&Snapshot>, current: &Snapshot, state: &ViewState) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(140, 30)).unwrap();
        let screen = Screen {
            previous,
            current,
            state,
            interval: Duration::from_secs(2),
            status: None,
        };
        terminal.draw(|f| draw(f, &screen)).unwrap();
        buffer_lines(terminal.backend().buffer())
    }

    fn line_with<'a>(lines: &'a [String], needle: &str) -> &'a str {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{}", lines.join("\n")))
    }

    fn cells(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn ports_view_shows_rates_from_two_snapshots() {
        // Two seconds apart, every counter doubled: rate = counter / 2 per second.
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let lines = render(Some(&a), &b, &ViewState::new(View::Ports));
        assert!(lines[0].starts_with("headroom top | up 0h00m12s | every 2.0s | 2 ports"));
        assert!(lines[0].contains("1 STORMED"), "{}", lines[0]);
        let row = cells(line_with(&lines, "Ethernet0"));
        // Port, Tx, RX fr/s, RX bits/s (2 tokens), TX fr/s, TX bits/s (2), PFC rx/s, PFC tx/s,
        // ECN/s, Drop/s, Drops.
        assert_eq!(
            row,
            [
                "Ethernet0",
                "on",
                "500",
                "5.0",
                "Mb/s",
                "250",
                "2.5",
                "Mb/s",
                "10",
                "1.5",
                "20",
                "0",
                "0"
            ]
        );
        let row = cells(line_with(&lines, "Ethernet4"));
        assert_eq!(row[1], "HELD");
        assert_eq!(
            &row[row.len() - 2..],
            ["3.5", "14"],
            "7 drops/2 s, total 14"
        );
        // The header names the columns.
        assert!(line_with(&lines, "RX fr/s").contains("PFC tx/s"));
    }

    #[test]
    fn first_screen_has_no_rates_yet() {
        let b = snapshot(12.0, 2);
        let lines = render(None, &b, &ViewState::new(View::Ports));
        assert!(line_with(&lines, "rates after the next refresh").contains("1 Ports"));
        let row = cells(line_with(&lines, "Ethernet0"));
        assert_eq!(row[2], "-");
        assert_eq!(row.last(), Some(&"0"));
    }

    #[test]
    fn cleared_or_restarted_counters_never_give_negative_rates() {
        let (a, b) = (snapshot(10.0, 5), snapshot(12.0, 1));
        let lines = render(Some(&a), &b, &ViewState::new(View::Ports));
        assert_eq!(cells(line_with(&lines, "Ethernet0"))[2], "0");
        // Uptime went back: the switch restarted; no rates at all.
        let (a, b) = (snapshot(50.0, 1), snapshot(1.0, 2));
        let lines = render(Some(&a), &b, &ViewState::new(View::Ports));
        assert_eq!(cells(line_with(&lines, "Ethernet0"))[2], "-");
    }

    #[test]
    fn queues_view_shows_depth_ecn_drops_and_delay() {
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let mut state = ViewState::new(View::Queues);
        let lines = render(Some(&a), &b, &state);
        let uc3: Vec<&String> = lines.iter().filter(|l| l.contains(" UC3 ")).collect();
        assert_eq!(uc3.len(), 2);
        // 400 frames/2 s, 500 kB/2 s = 2 Mb/s, depth 12,288, ECN 20/s, drops 1/s, mean 2 µs,
        // p99 in bucket 11 → ≤ 2048 ns, 4 drops in total.
        assert_eq!(
            cells(uc3[0]),
            [
                "Ethernet0",
                "UC3",
                "200",
                "2.0",
                "Mb/s",
                "12,288",
                "20",
                "1.0",
                "2.0us",
                "2.0us",
                "4"
            ]
        );
        assert_eq!(lines.iter().filter(|l| l.contains(" UC0 ")).count(), 2);
        // z hides idle queues.
        assert_eq!(
            handle_key(&mut state, key(KeyCode::Char('z'))),
            KeyOutcome::Changed
        );
        let lines = render(Some(&a), &b, &state);
        assert_eq!(lines.iter().filter(|l| l.contains(" UC0 ")).count(), 0);
        assert_eq!(lines.iter().filter(|l| l.contains(" UC3 ")).count(), 2);
    }

    #[test]
    fn pfc_view_per_priority() {
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let lines = render(Some(&a), &b, &ViewState::new(View::Pfc));
        let header = cells(line_with(&lines, "P7"));
        assert_eq!(
            header,
            ["Port", "P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"]
        );
        let i = lines.iter().position(|l| l.contains("Ethernet4")).unwrap();
        assert_eq!(
            cells(&lines[i]),
            ["Ethernet4", "Rx/s", "0", "0", "0", "10", "0", "0", "0", "0"]
        );
        assert_eq!(
            cells(&lines[i + 1]),
            ["Tx/s", "0", "0", "0", "0", "1.5", "0", "0", "0"]
        );
        assert_eq!(
            cells(&lines[i + 2]),
            ["Paused", "%", "0", "0", "0", "25", "0", "0", "0", "0"]
        );
        assert_eq!(
            cells(&lines[i + 3]),
            ["PG", "used", "B", "0", "0", "0", "8,192", "0", "0", "0", "0"]
        );
    }

    #[test]
    fn drops_and_watchdog_views() {
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let lines = render(Some(&a), &b, &ViewState::new(View::Drops));
        assert_eq!(
            cells(line_with(&lines, "ingress_headroom_exhausted")),
            ["Ethernet4", "ingress_headroom_exhausted", "14", "3.5"]
        );
        assert!(!lines.iter().any(|l| l.contains("Ethernet0 ")));
        let lines = render(Some(&a), &b, &ViewState::new(View::Watchdog));
        assert_eq!(
            cells(line_with(&lines, "Ethernet4:3")),
            ["Ethernet4:3", "stormed", "1/0", "0", "5.0", "0", "0", "0/0"]
        );
        assert!(line_with(&lines, "Ethernet0:3").contains("operational"));
    }

    #[test]
    fn stormed_rows_are_red() {
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let mut terminal = Terminal::new(TestBackend::new(140, 20)).unwrap();
        let state = ViewState::new(View::Watchdog);
        let screen = Screen {
            previous: Some(&a),
            current: &b,
            state: &state,
            interval: Duration::from_secs(1),
            status: None,
        };
        terminal.draw(|f| draw(f, &screen)).unwrap();
        let buffer = terminal.backend().buffer();
        let lines = buffer_lines(buffer);
        let y = lines
            .iter()
            .position(|l| l.contains("Ethernet4:3"))
            .unwrap() as u16;
        assert_eq!(buffer[(0, y)].fg, Color::Red);
        let y = lines
            .iter()
            .position(|l| l.contains("Ethernet0:3"))
            .unwrap() as u16;
        assert_ne!(buffer[(0, y)].fg, Color::Red);
    }

    #[test]
    fn keys_switch_views_scroll_freeze_and_quit() {
        let mut state = ViewState::new(View::Ports);
        assert_eq!(
            handle_key(&mut state, key(KeyCode::Tab)),
            KeyOutcome::Changed
        );
        assert_eq!(state.view, View::Queues);
        handle_key(&mut state, key(KeyCode::Right));
        assert_eq!(state.view, View::Pfc);
        handle_key(&mut state, key(KeyCode::Left));
        handle_key(&mut state, key(KeyCode::Left));
        assert_eq!(state.view, View::Ports);
        handle_key(&mut state, key(KeyCode::BackTab));
        assert_eq!(state.view, View::Watchdog, "wraps around");
        handle_key(&mut state, key(KeyCode::Char('3')));
        assert_eq!(state.view, View::Pfc);
        handle_key(&mut state, key(KeyCode::Down));
        handle_key(&mut state, key(KeyCode::Down));
        assert_eq!(state.scroll, 2);
        handle_key(&mut state, key(KeyCode::Up));
        handle_key(&mut state, key(KeyCode::Up));
        handle_key(&mut state, key(KeyCode::Up));
        assert_eq!(state.scroll, 0, "scrolling stops at the top");
        handle_key(&mut state, key(KeyCode::PageDown));
        assert_eq!(state.scroll, PAGE_ROWS);
        handle_key(&mut state, key(KeyCode::Char('2')));
        assert_eq!(state.scroll, 0, "a new view starts at the top");
        handle_key(&mut state, key(KeyCode::Char('p')));
        assert!(state.frozen);
        assert_eq!(
            handle_key(&mut state, key(KeyCode::Char('x'))),
            KeyOutcome::Ignored
        );
        let release = KeyEvent {
            kind: KeyEventKind::Release,
            ..key(KeyCode::Char('q'))
        };
        assert_eq!(handle_key(&mut state, release), KeyOutcome::Ignored);
        assert_eq!(
            handle_key(&mut state, key(KeyCode::Char('q'))),
            KeyOutcome::Quit
        );
        assert_eq!(handle_key(&mut state, key(KeyCode::Esc)), KeyOutcome::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(handle_key(&mut state, ctrl_c), KeyOutcome::Quit);
    }

    #[test]
    fn selected_tab_scroll_and_frozen_are_drawn() {
        let (a, b) = (snapshot(10.0, 1), snapshot(12.0, 2));
        let mut state = ViewState::new(View::Queues);
        let lines = render(Some(&a), &b, &state);
        let first_row = |lines: &[String]| {
            lines
                .iter()
                .find(|l| l.contains(" UC"))
                .map(|l| cells(l)[..2].join(" "))
                .unwrap()
        };
        assert_eq!(first_row(&lines), "Ethernet0 UC0");
        handle_key(&mut state, key(KeyCode::Down));
        handle_key(&mut state, key(KeyCode::Down));
        handle_key(&mut state, key(KeyCode::Char('p')));
        let mut terminal = Terminal::new(TestBackend::new(140, 30)).unwrap();
        let screen = Screen {
            previous: Some(&a),
            current: &b,
            state: &state,
            interval: Duration::from_secs(1),
            status: Some("cannot reach the switch"),
        };
        terminal.draw(|f| draw(f, &screen)).unwrap();
        let buffer = terminal.backend().buffer();
        let lines = buffer_lines(buffer);
        assert_eq!(first_row(&lines), "Ethernet0 UC2");
        assert!(lines[0].ends_with("| FROZEN") || lines[0].trim_end().ends_with("| FROZEN"));
        assert!(lines[29].starts_with("! cannot reach the switch"));
        // The selected tab is drawn reversed.
        let column = |needle: &str| {
            let byte = lines[1].find(needle).unwrap();
            lines[1][..byte].chars().count() as u16
        };
        assert!(buffer[(column("2 Queues"), 1)]
            .modifier
            .contains(Modifier::REVERSED));
        assert!(!buffer[(column("1 Ports"), 1)]
            .modifier
            .contains(Modifier::REVERSED));
        // Scrolling past the end still shows the last row.
        state.scroll = 1_000;
        let lines = render(Some(&a), &b, &state);
        assert_eq!(first_row(&lines), "Ethernet4 UC7");
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_rate(None), "-");
        assert_eq!(fmt_rate(Some(0.0)), "0");
        assert_eq!(fmt_rate(Some(0.5)), "0.5");
        assert_eq!(fmt_rate(Some(999.0)), "999");
        assert_eq!(fmt_rate(Some(1_234.0)), "1.2k");
        assert_eq!(fmt_rate(Some(14_880_952.0)), "14.9M");
        assert_eq!(fmt_bits(Some(1_250_000_000.0)), "10.00 Gb/s");
        assert_eq!(fmt_bits(Some(100.0)), "800 b/s");
        assert_eq!(fmt_ns(Some(850)), "850ns");
        assert_eq!(fmt_ns(Some(12_345)), "12.3us");
        assert_eq!(fmt_ns(Some(2_500_000)), "2.5ms");
        assert_eq!(fmt_uptime(3_723.9), "1h02m03s");
        // 100 frames: 98 in bucket 3, 2 in bucket 6: p50 ≤ 8 ns, p99 ≤ 64 ns.
        let mut h = vec![0; 40];
        h[3] = 98;
        h[6] = 2;
        assert_eq!(histogram_quantile_ns(&h, 0.5), Some(8));
        assert_eq!(histogram_quantile_ns(&h, 0.99), Some(64));
        assert_eq!(histogram_quantile_ns(&[0; 40], 0.99), None);
    }
}
