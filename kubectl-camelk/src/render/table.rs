//! Aligned columns as kubectl prints them, and the ages in their cells.

/// How long ago, as kubectl prints ages: `45s`, `2m30s`, `17m`, `5h10m`,
/// `30h`, `3d4h`, `40d`, `3y`.
pub fn age(seconds: u64) -> String {
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    let pair = |big: u64, big_unit: &str, small: u64, small_unit: &str| match small {
        0 => format!("{big}{big_unit}"),
        _ => format!("{big}{big_unit}{small}{small_unit}"),
    };
    match () {
        _ if seconds < 120 => format!("{seconds}s"),
        _ if minutes < 10 => pair(minutes, "m", seconds % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => pair(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 192 => pair(days, "d", hours % 24, "h"),
        _ if days < 365 * 2 => format!("{days}d"),
        _ => format!("{}y", days / 365),
    }
}

/// One row as [`table`] would align it under `header`, without the header:
/// what a watch prints under the table it printed first.
pub fn table_row(header: &[&str], row: Vec<String>) -> String {
    let rows = table(header, &[row]);
    rows.lines()
        .nth(1)
        .map(|l| format!("{l}\n"))
        .unwrap_or_default()
}

/// Columns padded to their widest cell, three spaces apart, as kubectl prints.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A table whose first row is its header.
pub fn rows_table(rows: &[Vec<String>]) -> String {
    let header: Vec<&str> = rows[0].iter().map(String::as_str).collect();
    table(&header, &rows[1..])
}
