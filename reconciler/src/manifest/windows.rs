//! Freeze windows: cron-scheduled spans during which a staged rollout may or
//! may not start a step.
//!
//! A window opens at each occurrence of a standard 5-field cron schedule,
//! read as wall-clock time in the window's time zone, and stays active on
//! `[start, start + duration)`. No step may start while a Deny window is
//! active, nor outside every Allow window when at least one exists. A step
//! already in progress is not this module's concern.
//!
//! Everything is a pure function of the instant the caller passes in: the
//! system clock is never read, so verdicts are reproducible in tests and in
//! status messages.
//!
//! jiff-cron is used to parse schedules and to walk their wall-clock
//! occurrences, but only in UTC, where it is reliable. Its quirks are worked
//! around here rather than leaked to manifest authors:
//!
//! - it numbers days of the week 1 (Sunday) to 7 (Saturday) and rejects 0,
//!   so the day-of-week field is translated from the standard numbering
//!   (0-7, both 0 and 7 meaning Sunday);
//! - it ANDs day-of-month with day-of-week, where standard cron matches
//!   either when both are restricted, so such schedules are split in two;
//! - its search in a zone with DST depends on where it starts (a daily 02:30
//!   can be skipped or doubled around a transition), so wall-clock
//!   occurrences are mapped to instants by this module instead;
//! - asked for occurrences after a time with a fraction of a second, it can
//!   return one on an excluded day of the week, so searches start from whole
//!   seconds.

use std::fmt;
use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, Zoned};
use jiff_cron::Schedule;

pub(crate) use crate::api::WindowKind;

/// How far ahead [`judge`] looks for an opening: a little over a year, so a
/// yearly Allow window is still found.
const HORIZON: SignedDuration = SignedDuration::from_hours(400 * 24);

/// Bound on the jumps [`judge`] makes between windows before giving up.
const MAX_JUMPS: usize = 1_000;

/// Bound on the occurrences [`Window::active_at`] examines, which matters only
/// for a frequent schedule with a long duration (say every minute for a
/// week). Past it, the reported span may end early; [`judge`] checks again at
/// that end, so its verdict stays correct.
const MAX_SCAN: usize = 1_000;

/// A compiled freeze window.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    kind: WindowKind,
    /// The schedule as written, for messages.
    source: String,
    /// One schedule, or two when day-of-month and day-of-week are both
    /// restricted: standard cron fires when either matches.
    schedules: Vec<Schedule>,
    duration: SignedDuration,
    tz: TimeZone,
    /// The zone as written, or `UTC`, for messages.
    tz_name: String,
}

/// Why a window could not be compiled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WindowError {
    #[error("schedule `{schedule}` must have 5 fields: minute hour day-of-month month day-of-week")]
    FieldCount { schedule: String },
    #[error("invalid schedule `{schedule}`: {reason}")]
    Schedule { schedule: String, reason: String },
    #[error("unknown time zone `{name}`")]
    UnknownTimeZone {
        name: String,
        #[source]
        source: jiff::Error,
    },
    #[error("window `{schedule}` must have a duration greater than zero")]
    ZeroDuration { schedule: String },
    #[error("window `{schedule}` has a duration too long to handle: {duration:?}")]
    DurationTooLong {
        schedule: String,
        duration: Duration,
    },
}

impl WindowError {
    /// The field of the manifest's window the error is about.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            WindowError::FieldCount { .. } | WindowError::Schedule { .. } => "schedule",
            WindowError::UnknownTimeZone { .. } => "timeZone",
            WindowError::ZeroDuration { .. } | WindowError::DurationTooLong { .. } => "duration",
        }
    }
}

/// A manifest's window compiled, or why it does not compile (`None` for the
/// error: its duration is no duration, which validation reports by itself).
pub(crate) fn compile(window: &crate::api::Window) -> Result<Window, Option<WindowError>> {
    let duration = crate::api::parse_duration(&window.duration).ok_or(None)?;
    Window::new(window.kind, &window.schedule, duration, &window.time_zone).map_err(Some)
}

/// The manifest's windows that compile (validation refuses a manifest with
/// one that does not, so a revision acted on has them all).
pub(crate) fn compile_all(windows: &[crate::api::Window]) -> Vec<Window> {
    windows.iter().filter_map(|w| compile(w).ok()).collect()
}

impl Window {
    /// Compiles a window; `time_zone` is an IANA name, empty meaning UTC.
    pub(crate) fn new(
        kind: WindowKind,
        schedule: &str,
        duration: Duration,
        time_zone: &str,
    ) -> Result<Window, WindowError> {
        let schedules = compile_schedule(schedule)?;
        if duration.is_zero() {
            return Err(WindowError::ZeroDuration {
                schedule: schedule.to_string(),
            });
        }
        let duration =
            SignedDuration::try_from(duration).map_err(|_| WindowError::DurationTooLong {
                schedule: schedule.to_string(),
                duration,
            })?;
        let (tz, tz_name) = if time_zone.is_empty() {
            (TimeZone::UTC, "UTC".to_string())
        } else {
            let tz = TimeZone::get(time_zone).map_err(|source| WindowError::UnknownTimeZone {
                name: time_zone.to_string(),
                source,
            })?;
            (tz, time_zone.to_string())
        };
        Ok(Window {
            kind,
            source: schedule.to_string(),
            schedules,
            duration,
            tz,
            tz_name,
        })
    }

    /// The occurrence active at `at`, if any, as `(start, end)` with `end`
    /// exclusive.
    ///
    /// When occurrences overlap (a schedule firing more often than the
    /// duration), this is the covering occurrence that started last, hence
    /// ends last. Chains of overlapping occurrences are not merged here:
    /// [`judge`] follows them by checking again at each end.
    pub(crate) fn active_at(&self, at: Timestamp) -> Option<(Timestamp, Timestamp)> {
        // An occurrence starting at `s` covers `at` iff `at - duration < s <= at`.
        let earliest = at.checked_sub(self.duration).unwrap_or(Timestamp::MIN);
        let start = self
            .starts_after(earliest)
            .take(MAX_SCAN)
            .take_while(|start| *start <= at)
            .last()?;
        Some((start, self.end_of(start)))
    }

    /// The first occurrence starting strictly after `after`.
    fn next_start_after(&self, after: Timestamp) -> Option<Timestamp> {
        self.starts_after(after).next()
    }

    fn end_of(&self, start: Timestamp) -> Timestamp {
        start.checked_add(self.duration).unwrap_or(Timestamp::MAX)
    }

    /// Occurrence instants strictly after `after`, in non-decreasing order.
    fn starts_after(&self, after: Timestamp) -> impl Iterator<Item = Timestamp> + '_ {
        // Wall-clock occurrences after the wall-clock time of `after` include
        // every occurrence after `after`, because `instant_of` is monotonic
        // and maps that wall-clock time to `after` or earlier. Those mapped to
        // `after` or earlier (the second pass through a DST fold) are skipped.
        let mut civil = whole_seconds(after.to_zoned(self.tz.clone()).datetime());
        std::iter::from_fn(move || {
            let next = self.civil_after(civil?)?;
            civil = Some(next);
            Some(self.instant_of(next))
        })
        .flatten()
        .filter(move |start| *start > after)
    }

    /// The first wall-clock occurrence strictly after `civil`.
    ///
    /// The schedule is walked in UTC, used as a zone without transitions so
    /// the walk cannot skip or repeat a wall-clock time; `civil` must be a
    /// whole second, as jiff-cron may otherwise return a time on a day of
    /// the week that the schedule excludes.
    fn civil_after(&self, civil: DateTime) -> Option<DateTime> {
        let from = civil.to_zoned(TimeZone::UTC).ok()?;
        self.schedules
            .iter()
            .filter_map(|schedule| schedule.after(from.clone()).next())
            .map(|zoned| zoned.datetime())
            .min()
    }

    /// Maps a wall-clock occurrence to the instant it fires.
    ///
    /// A time skipped by a forward DST jump fires at the jump itself (02:30
    /// on a spring-forward night in Europe/Berlin fires at 03:00); a time
    /// repeated by a backward jump fires once, at its first pass. Both keep
    /// the mapping monotonic, which `starts_after` relies on.
    fn instant_of(&self, civil: DateTime) -> Option<Timestamp> {
        let ambiguous = self.tz.to_ambiguous_timestamp(civil);
        match ambiguous.offset() {
            AmbiguousOffset::Gap { after, .. } => {
                // With the offset from after the jump, the time lands just
                // before the jump, so the next transition is the jump.
                let before_jump = after.to_timestamp(civil).ok()?;
                let jump = self.tz.following(before_jump).next()?;
                Some(jump.timestamp())
            }
            AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => {
                ambiguous.earlier().ok()
            }
        }
    }

    /// `at` as local time in the window's zone, for messages.
    fn local(&self, at: Timestamp) -> Zoned {
        at.to_zoned(self.tz.clone())
    }
}

impl fmt::Display for Window {
    /// E.g. "deny window `0 22 * * 1-5` (8h, Europe/Berlin)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            WindowKind::Deny => "deny",
            WindowKind::Allow => "allow",
        };
        write!(
            f,
            "{kind} window `{}` ({:#}, {})",
            self.source, self.duration, self.tz_name
        )
    }
}

/// Whether a step may start at a given instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    Open,
    Closed {
        /// Readable reason, naming the window and local times in its zone.
        why: String,
        /// The earliest instant at which a step may start, or `None` when
        /// none was found within about 400 days.
        opens_at: Option<Timestamp>,
    },
}

/// Whether a rollout step may start at `now`.
pub(crate) fn judge(windows: &[Window], now: Timestamp) -> Gate {
    let why = match blocker(windows, now) {
        None => return Gate::Open,
        Some(Blocker::Deny { window, until }) => {
            format!("{window} is active until {}", window.local(until))
        }
        Some(Blocker::OutsideAllow {
            next: Some((window, start)),
        }) => format!(
            "outside every allow window; the next opens at {} ({window})",
            window.local(start)
        ),
        Some(Blocker::OutsideAllow { next: None }) => {
            "outside every allow window, and none opens again".to_string()
        }
    };
    Gate::Closed {
        why,
        opens_at: opens_at(windows, now),
    }
}

/// What keeps a step from starting at some instant.
enum Blocker<'a> {
    /// Active deny window; `until` is the latest end among those active.
    Deny {
        window: &'a Window,
        until: Timestamp,
    },
    /// Allow windows exist, none is active; `next` is the earliest opening.
    OutsideAllow {
        next: Option<(&'a Window, Timestamp)>,
    },
}

fn blocker(windows: &[Window], at: Timestamp) -> Option<Blocker<'_>> {
    let deny = windows
        .iter()
        .filter(|window| window.kind == WindowKind::Deny)
        .filter_map(|window| Some((window, window.active_at(at)?.1)))
        .max_by_key(|(_, until)| *until);
    if let Some((window, until)) = deny {
        return Some(Blocker::Deny { window, until });
    }
    let allows: Vec<&Window> = windows
        .iter()
        .filter(|window| window.kind == WindowKind::Allow)
        .collect();
    if allows.is_empty() || allows.iter().any(|window| window.active_at(at).is_some()) {
        return None;
    }
    let next = allows
        .into_iter()
        .filter_map(|window| Some((window, window.next_start_after(at)?)))
        .min_by_key(|(_, start)| *start);
    Some(Blocker::OutsideAllow { next })
}

/// The earliest instant at or after `now` at which nothing blocks a step:
/// jump past whatever blocks, until nothing does or the search is out of
/// bounds (e.g. deny windows that always cover each other).
fn opens_at(windows: &[Window], now: Timestamp) -> Option<Timestamp> {
    let horizon = now.checked_add(HORIZON).unwrap_or(Timestamp::MAX);
    let mut at = now;
    for _ in 0..MAX_JUMPS {
        at = match blocker(windows, at) {
            None => return Some(at),
            Some(Blocker::Deny { until, .. }) => until,
            Some(Blocker::OutsideAllow { next }) => next?.1,
        };
        if at > horizon {
            return None;
        }
    }
    None
}

/// Parses a standard 5-field cron schedule into jiff-cron schedules (which
/// take seconds first), one per alternative.
fn compile_schedule(source: &str) -> Result<Vec<Schedule>, WindowError> {
    let invalid = |reason: String| WindowError::Schedule {
        schedule: source.to_string(),
        reason,
    };
    let fields: Vec<&str> = source.split_whitespace().collect();
    let [minute, hour, day_of_month, month, day_of_week] = fields[..] else {
        return Err(WindowError::FieldCount {
            schedule: source.to_string(),
        });
    };
    let weekdays = translate_day_of_week(day_of_week).map_err(invalid)?;
    // Standard cron: a day field starting with `*` does not restrict; when
    // both restrict, a day matching either one fires.
    let unrestricted = |field: &str| field.starts_with('*') || field == "?";
    let expressions = if unrestricted(day_of_month) || unrestricted(day_of_week) {
        vec![format!(
            "0 {minute} {hour} {day_of_month} {month} {weekdays}"
        )]
    } else {
        vec![
            format!("0 {minute} {hour} {day_of_month} {month} *"),
            format!("0 {minute} {hour} * {month} {weekdays}"),
        ]
    };
    expressions
        .iter()
        .map(|expression| {
            expression
                .parse::<Schedule>()
                .map_err(|error| invalid(cron_error_message(&error.to_string())))
        })
        .collect()
}

/// jiff-cron's message for a parse error. Its text echoes the 6-field
/// expression it was given, with a caret under the fault, before the
/// message; that expression is not what the user wrote, so keep only the
/// message line.
fn cron_error_message(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty() && *line != "^")
        .unwrap_or(text)
        .to_string()
}

/// Translates a standard day-of-week field (0-7 with 0 and 7 both Sunday, or
/// `sun`..`sat`; lists, ranges and steps) to jiff-cron's numbering, 1
/// (Sunday) to 7 (Saturday), as an explicit list.
fn translate_day_of_week(field: &str) -> Result<String, String> {
    if field == "*" || field == "?" {
        return Ok("*".to_string());
    }
    let mut days = [false; 7];
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => match step.parse::<usize>() {
                Ok(step) if step > 0 => (range, step),
                _ => {
                    return Err(format!(
                        "day-of-week step in `{item}` must be a positive number"
                    ));
                }
            },
            None => (item, 1),
        };
        let (first, last) = match range.split_once('-') {
            _ if range == "*" => (0, 6),
            Some((first, last)) => (day_number(first)?, day_number(last)?),
            None if step > 1 => {
                return Err(format!("day-of-week step in `{item}` needs `*` or a range"));
            }
            None => (day_number(range)?, day_number(range)?),
        };
        if first > last {
            return Err(format!("day-of-week range `{range}` must not wrap around"));
        }
        for day in (first..=last).step_by(step) {
            days[day % 7] = true;
        }
    }
    let ordinals: Vec<String> = (0..7)
        .filter(|day| days[*day])
        .map(|day| (day + 1).to_string())
        .collect();
    Ok(ordinals.join(","))
}

/// A standard day-of-week value: 0-7 (0 and 7 are Sunday) or a name.
fn day_number(text: &str) -> Result<usize, String> {
    const NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    if let Some(number) = text.parse::<usize>().ok().filter(|number| *number <= 7) {
        return Ok(number);
    }
    NAMES
        .iter()
        .position(|name| name.eq_ignore_ascii_case(text))
        .ok_or_else(|| format!("`{text}` is not a day of the week (0-7 or sun-sat)"))
}

/// Drops sub-second precision: jiff-cron skips its day-of-week check when
/// asked for occurrences after a time with a fraction of a second.
fn whole_seconds(civil: DateTime) -> Option<DateTime> {
    civil.with().subsec_nanosecond(0).build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3600;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn window(kind: WindowKind, schedule: &str, hours: u64, tz: &str) -> Window {
        Window::new(kind, schedule, Duration::from_secs(hours * HOUR), tz).unwrap()
    }

    fn deny(schedule: &str, hours: u64, tz: &str) -> Window {
        window(WindowKind::Deny, schedule, hours, tz)
    }

    fn allow(schedule: &str, hours: u64, tz: &str) -> Window {
        window(WindowKind::Allow, schedule, hours, tz)
    }

    fn opens_at_of(gate: &Gate) -> Option<Timestamp> {
        match gate {
            Gate::Open => panic!("expected closed gate"),
            Gate::Closed { opens_at, .. } => *opens_at,
        }
    }

    fn why_of(gate: &Gate) -> &str {
        match gate {
            Gate::Open => panic!("expected closed gate"),
            Gate::Closed { why, .. } => why,
        }
    }

    // 2026-12-07 is a Monday; Europe/Berlin is UTC+1 in December.
    fn weeknight_freeze() -> Window {
        deny("0 22 * * 1-5", 8, "Europe/Berlin")
    }

    #[test]
    fn open_without_windows() {
        assert_eq!(judge(&[], ts("2026-12-07T21:30:00Z")), Gate::Open);
    }

    #[test]
    fn closed_inside_deny_until_its_end() {
        let gate = judge(&[weeknight_freeze()], ts("2026-12-07T23:30:00Z"));
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-08T05:00:00Z")));
        assert_eq!(
            why_of(&gate),
            "deny window `0 22 * * 1-5` (8h, Europe/Berlin) is active until \
             2026-12-08T06:00:00+01:00[Europe/Berlin]"
        );
    }

    #[test]
    fn open_just_before_deny_occurrence() {
        let gate = judge(&[weeknight_freeze()], ts("2026-12-07T20:59:59Z"));
        assert_eq!(gate, Gate::Open);
        let gate = judge(&[weeknight_freeze()], ts("2026-12-07T20:59:59.999Z"));
        assert_eq!(gate, Gate::Open);
    }

    #[test]
    fn sub_second_instants_respect_day_of_week() {
        // The search starts from Saturday 21:59:59.5 Berlin, a fraction
        // before a 22:00 that the schedule excludes on Saturdays.
        let window = weeknight_freeze();
        assert_eq!(window.active_at(ts("2026-12-13T04:59:59.5Z")), None);
        assert_eq!(
            window.next_start_after(ts("2026-12-12T20:59:59.5Z")),
            Some(ts("2026-12-14T21:00:00Z"))
        );
    }

    #[test]
    fn closed_exactly_at_occurrence_start() {
        let window = weeknight_freeze();
        let start = ts("2026-12-07T21:00:00Z");
        assert_eq!(
            window.active_at(start),
            Some((start, ts("2026-12-08T05:00:00Z")))
        );
        let gate = judge(&[window], start);
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-08T05:00:00Z")));
    }

    #[test]
    fn open_exactly_at_occurrence_end() {
        let window = weeknight_freeze();
        let end = ts("2026-12-08T05:00:00Z");
        assert_eq!(window.active_at(end), None);
        assert!(window.active_at(ts("2026-12-08T04:59:59.999Z")).is_some());
        assert_eq!(judge(&[window], end), Gate::Open);
    }

    #[test]
    fn deny_on_weekdays_only_uses_standard_day_numbers() {
        // Friday 22:00 opens a window (5 = Friday), Saturday 22:00 does not.
        let window = weeknight_freeze();
        assert!(window.active_at(ts("2026-12-11T22:00:00Z")).is_some());
        assert!(window.active_at(ts("2026-12-12T22:00:00Z")).is_none());
        // Sunday 22:00 does not either, whether written 0 or 7.
        for sunday in ["0 22 * * 0", "0 22 * * 7", "0 22 * * sun", "0 22 * * SUN"] {
            let window = deny(sunday, 1, "Europe/Berlin");
            assert!(
                window.active_at(ts("2026-12-13T21:30:00Z")).is_some(),
                "{sunday}"
            );
            assert!(
                window.active_at(ts("2026-12-07T21:30:00Z")).is_none(),
                "{sunday}"
            );
        }
    }

    #[test]
    fn allow_on_weekday_hours_closed_on_saturday_until_monday() {
        let office = allow("0 9 * * 1-5", 8, "Europe/Berlin");
        let gate = judge(&[office], ts("2026-12-12T12:00:00Z"));
        // Monday 09:00 in Berlin.
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-14T08:00:00Z")));
        assert_eq!(
            why_of(&gate),
            "outside every allow window; the next opens at \
             2026-12-14T09:00:00+01:00[Europe/Berlin] \
             (allow window `0 9 * * 1-5` (8h, Europe/Berlin))"
        );
    }

    #[test]
    fn open_inside_allow_window() {
        let office = allow("0 9 * * 1-5", 8, "Europe/Berlin");
        assert_eq!(judge(&[office], ts("2026-12-07T10:00:00Z")), Gate::Open);
    }

    #[test]
    fn deny_inside_allow_pushes_opening_past_the_deny() {
        let windows = [
            allow("0 9 * * 1-5", 8, "Europe/Berlin"),
            // Lunch freeze, 12:00-14:00 Berlin, every day.
            deny("0 12 * * *", 2, "Europe/Berlin"),
        ];
        let gate = judge(&windows, ts("2026-12-07T11:30:00Z"));
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-07T13:00:00Z")));
        // Saturday: Monday 09:00 is free, the lunch freeze comes later.
        let gate = judge(&windows, ts("2026-12-12T12:00:00Z"));
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-14T08:00:00Z")));
    }

    #[test]
    fn deny_at_allow_opening_pushes_past_both() {
        let windows = [
            allow("0 9 * * 1-5", 8, "Europe/Berlin"),
            // Monday-morning freeze covering the allow window's opening.
            deny("0 8 * * 1", 3, "Europe/Berlin"),
        ];
        let gate = judge(&windows, ts("2026-12-12T12:00:00Z"));
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-14T10:00:00Z")));
    }

    #[test]
    fn chained_deny_occurrences_are_followed() {
        // Every hour for 90 minutes: one continuous freeze from 00:00.
        let window = Window::new(
            WindowKind::Deny,
            "0 0-5 * * *",
            Duration::from_secs(90 * 60),
            "",
        )
        .unwrap();
        let gate = judge(&[window], ts("2026-12-07T00:10:00Z"));
        assert_eq!(opens_at_of(&gate), Some(ts("2026-12-07T06:30:00Z")));
    }

    #[test]
    fn time_zone_changes_the_verdict() {
        let at = ts("2026-12-07T21:30:00Z");
        assert!(judge(&[weeknight_freeze()], at) != Gate::Open);
        // 22:00 UTC has not come yet.
        assert_eq!(judge(&[deny("0 22 * * 1-5", 8, "")], at), Gate::Open);
        assert_eq!(judge(&[deny("0 22 * * 1-5", 8, "UTC")], at), Gate::Open);
    }

    #[test]
    fn skipped_wall_time_fires_at_the_dst_jump() {
        // 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST (01:00Z), so
        // 02:30 never happens; the window opens at the jump instead.
        let window = deny("30 2 * * *", 1, "Europe/Berlin");
        let jump = ts("2026-03-29T01:00:00Z");
        assert_eq!(window.active_at(ts("2026-03-29T00:59:59Z")), None);
        assert_eq!(
            window.active_at(ts("2026-03-29T01:30:00Z")),
            Some((jump, ts("2026-03-29T02:00:00Z")))
        );
        // The days around it are ordinary: 02:30 CET, then 02:30 CEST.
        assert_eq!(
            window
                .active_at(ts("2026-03-28T01:30:00Z"))
                .map(|span| span.0),
            Some(ts("2026-03-28T01:30:00Z"))
        );
        assert_eq!(
            window
                .active_at(ts("2026-03-30T00:30:00Z"))
                .map(|span| span.0),
            Some(ts("2026-03-30T00:30:00Z"))
        );
        // The same answer whichever instant the question is asked from.
        let long = deny("30 2 * * *", 8, "Europe/Berlin");
        for minutes in 0..8 * 60 {
            let at = jump + SignedDuration::from_mins(minutes);
            assert_eq!(long.active_at(at).map(|span| span.0), Some(jump), "{at}");
        }
    }

    #[test]
    fn repeated_wall_time_fires_once_at_first_pass() {
        // 2026-10-25 in Berlin: 03:00 CEST falls back to 02:00 CET, so 02:30
        // happens twice (00:30Z and 01:30Z); the window opens at the first.
        let window = deny("30 2 * * *", 1, "Europe/Berlin");
        let first = ts("2026-10-25T00:30:00Z");
        assert_eq!(
            window.active_at(ts("2026-10-25T01:00:00Z")),
            Some((first, ts("2026-10-25T01:30:00Z")))
        );
        assert_eq!(window.active_at(ts("2026-10-25T01:45:00Z")), None);
        let gate = judge(&[window], ts("2026-10-25T01:00:00Z"));
        assert_eq!(
            why_of(&gate),
            "deny window `30 2 * * *` (1h, Europe/Berlin) is active until \
             2026-10-25T02:30:00+01:00[Europe/Berlin]"
        );
    }

    #[test]
    fn either_day_field_matches_when_both_are_restricted() {
        // The 1st of the month or any Monday, as in standard cron.
        let window = deny("0 0 1 * 1", 1, "");
        // Tuesday 2026-12-01.
        assert!(window.active_at(ts("2026-12-01T00:30:00Z")).is_some());
        // Monday 2026-12-07.
        assert!(window.active_at(ts("2026-12-07T00:30:00Z")).is_some());
        // Wednesday 2026-12-02.
        assert!(window.active_at(ts("2026-12-02T00:30:00Z")).is_none());
    }

    #[test]
    fn day_of_week_lists_ranges_and_steps() {
        assert_eq!(translate_day_of_week("*").unwrap(), "*");
        assert_eq!(translate_day_of_week("1-5").unwrap(), "2,3,4,5,6");
        assert_eq!(translate_day_of_week("5-7").unwrap(), "1,6,7");
        assert_eq!(translate_day_of_week("0,6").unwrap(), "1,7");
        assert_eq!(translate_day_of_week("mon-FRI").unwrap(), "2,3,4,5,6");
        assert_eq!(translate_day_of_week("*/2").unwrap(), "1,3,5,7");
        assert_eq!(translate_day_of_week("1-7/3").unwrap(), "1,2,5");
        assert!(translate_day_of_week("8").is_err());
        assert!(translate_day_of_week("fri-mon").is_err());
        assert!(translate_day_of_week("1/2").is_err());
        assert!(translate_day_of_week("*/0").is_err());
        assert!(translate_day_of_week("1,,2").is_err());
    }

    #[test]
    fn schedule_needs_five_fields() {
        for schedule in ["0 0 22 * * 1-5", "22 * * 1-5", "", "@daily"] {
            let error =
                Window::new(WindowKind::Deny, schedule, Duration::from_secs(60), "").unwrap_err();
            assert!(
                matches!(error, WindowError::FieldCount { .. }),
                "{schedule}"
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "schedule `{schedule}` must have 5 fields: \
                     minute hour day-of-month month day-of-week"
                )
            );
        }
    }

    #[test]
    fn invalid_field_reports_jiff_cron_message() {
        let error =
            Window::new(WindowKind::Deny, "60 22 * * *", Duration::from_secs(60), "").unwrap_err();
        assert!(matches!(error, WindowError::Schedule { .. }));
        let message = error.to_string();
        assert!(
            message.starts_with("invalid schedule `60 22 * * *`: Minutes"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
        let error =
            Window::new(WindowKind::Deny, "0 22 * * 8", Duration::from_secs(60), "").unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid schedule `0 22 * * 8`: `8` is not a day of the week (0-7 or sun-sat)"
        );
    }

    #[test]
    fn unknown_time_zone_is_named() {
        let error = Window::new(
            WindowKind::Deny,
            "0 22 * * *",
            Duration::from_secs(60),
            "Mars/Olympus",
        )
        .unwrap_err();
        assert!(matches!(error, WindowError::UnknownTimeZone { .. }));
        assert_eq!(error.to_string(), "unknown time zone `Mars/Olympus`");
    }

    #[test]
    fn zero_duration_is_refused() {
        let error = Window::new(WindowKind::Allow, "0 9 * * *", Duration::ZERO, "").unwrap_err();
        assert!(matches!(error, WindowError::ZeroDuration { .. }));
    }

    #[test]
    fn never_opens_when_allow_never_fires() {
        let gate = judge(&[allow("0 0 30 2 *", 8, "")], ts("2026-12-07T21:30:00Z"));
        assert_eq!(opens_at_of(&gate), None);
        assert_eq!(
            why_of(&gate),
            "outside every allow window, and none opens again"
        );
    }

    #[test]
    fn never_opens_when_denies_cover_each_other() {
        let windows = [deny("0 0 * * *", 13, ""), deny("0 12 * * *", 13, "")];
        let gate = judge(&windows, ts("2026-12-07T21:30:00Z"));
        assert_eq!(opens_at_of(&gate), None);
        let every_minute = [Window::new(
            WindowKind::Deny,
            "* * * * *",
            Duration::from_secs(60),
            "Europe/Berlin",
        )
        .unwrap()];
        assert_eq!(
            opens_at_of(&judge(&every_minute, ts("2026-12-07T21:30:00Z"))),
            None
        );
    }

    #[test]
    fn active_at_reports_latest_of_overlapping_occurrences() {
        // Hourly for 3h: at 05:30, occurrences from 03:00, 04:00, 05:00 cover.
        let window = deny("0 * * * *", 3, "");
        assert_eq!(
            window.active_at(ts("2026-12-07T05:30:00Z")),
            Some((ts("2026-12-07T05:00:00Z"), ts("2026-12-07T08:00:00Z")))
        );
    }
}
