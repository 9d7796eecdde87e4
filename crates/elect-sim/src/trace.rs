//! Traces of delivered messages, and their drawing as the textbooks draw
//! an election: one lane per process, one arrow per message.
//!
//! ```text
//!           1     2     3
//! t=1       ●────▶│     │     Election(1)
//! t=2       │     ●────▶│     Election(2)
//! t=3       ◀─────┼─────●     Election(3)
//! ```

use serde::Serialize;

/// One delivered message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// When it arrived, in time units.
    pub at: u64,
    /// The sender's id.
    pub from: u64,
    /// The receiver's id.
    pub to: u64,
    /// The message, as its `Debug` prints it.
    pub message: String,
}

/// Lanes are drawn up to this many processes; beyond, one line per message.
pub const MAX_LANES: usize = 32;

/// The chart of `deliveries` among processes `ids` (in lane order), one
/// line per message under a header naming the lanes.
pub fn draw(deliveries: &[Delivery], ids: &[u64]) -> Vec<String> {
    if ids.len() > MAX_LANES {
        return deliveries
            .iter()
            .map(|d| format!("t={:<6} {} -> {}: {}", d.at, d.from, d.to, d.message))
            .collect();
    }
    let width = ids.iter().map(|id| id.to_string().len()).max().unwrap_or(1) + 4;
    let lane = |id: u64| ids.iter().position(|&i| i == id);
    let prefix = 8;
    let mut header = " ".repeat(prefix);
    for id in ids {
        header.push_str(&format!("{id:<width$}"));
    }
    let mut lines = vec![header.trim_end().to_owned()];
    for d in deliveries {
        let (Some(from), Some(to)) = (lane(d.from), lane(d.to)) else {
            continue;
        };
        let (lo, hi) = (from.min(to), from.max(to));
        let mut row = format!("{:<prefix$}", format!("t={}", d.at));
        for i in 0..ids.len() {
            let glyph = match i {
                _ if i == from => '●',
                _ if i == to && to > from => '▶',
                _ if i == to => '◀',
                _ if i > lo && i < hi => '┼',
                _ => '│',
            };
            row.push(glyph);
            let fill = if i >= lo && i < hi { '─' } else { ' ' };
            row.extend(std::iter::repeat_n(fill, width - 1));
        }
        row.push_str(&d.message);
        lines.push(row);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(at: u64, from: u64, to: u64, message: &str) -> Delivery {
        Delivery {
            at,
            from,
            to,
            message: message.to_owned(),
        }
    }

    #[test]
    fn arrows_run_between_the_lanes_either_way() {
        let lines = draw(
            &[msg(1, 1, 2, "Election(1)"), msg(3, 3, 1, "Elected(3)")],
            &[1, 2, 3],
        );
        assert_eq!(lines[0], "        1    2    3");
        assert_eq!(lines[1], "t=1     ●────▶    │    Election(1)");
        assert_eq!(lines[2], "t=3     ◀────┼────●    Elected(3)");
    }

    #[test]
    fn many_processes_get_a_line_per_message() {
        let ids: Vec<u64> = (1..=40).collect();
        let lines = draw(&[msg(2, 40, 1, "Elected(40)")], &ids);
        assert_eq!(lines, ["t=2      40 -> 1: Elected(40)"]);
    }
}
