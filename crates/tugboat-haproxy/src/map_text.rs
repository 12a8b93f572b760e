//! Route map files as text, edited in place: one `key value` line per key, in the
//! order the map needs, a line found by binary search. A route change at ten thousand
//! routes edits a line instead of rendering every route again.

use std::cmp::Ordering;
use std::ops::Range;

/// The order of a map file's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapOrder {
    /// By key (`map_str`: exact lookups, the order does not matter to haproxy).
    Key,
    /// Longest key first, then by key: `map_beg` takes the first match in file order.
    LongestFirst,
}

impl MapOrder {
    pub fn cmp(self, a: &str, b: &str) -> Ordering {
        match self {
            MapOrder::Key => a.cmp(b),
            MapOrder::LongestFirst => b.len().cmp(&a.len()).then_with(|| a.cmp(b)),
        }
    }
}

/// Where the line of `key` is in `text` (its bytes, newline included), or where it
/// would go. The lines must be in `order`, each `key value`.
fn locate(text: &str, order: MapOrder, key: &str) -> Result<Range<usize>, usize> {
    // `low` and `high` are always at line starts (or the end).
    let (mut low, mut high) = (0, text.len());
    while low < high {
        let middle = low + (high - low) / 2;
        let start = text[low..middle].rfind('\n').map_or(low, |at| low + at + 1);
        let end = text[start..high]
            .find('\n')
            .map_or(high, |at| start + at + 1);
        let line = &text[start..end];
        let line_key = line.split([' ', '\n']).next().unwrap_or(line);
        match order.cmp(line_key, key) {
            Ordering::Equal => return Ok(start..end),
            Ordering::Less => low = end,
            Ordering::Greater => high = start,
        }
    }
    Err(low)
}

/// Sets the line of `key` to `value`, adds it in its place, or removes it (`None`).
pub fn set_line(text: &mut String, order: MapOrder, key: &str, value: Option<&str>) {
    let line = value.map(|value| format!("{key} {value}\n"));
    match (locate(text, order, key), line) {
        (Ok(range), Some(line)) => splice(text, range, &line),
        (Ok(range), None) => splice(text, range, ""),
        (Err(at), Some(line)) => splice(text, at..at, &line),
        (Err(_), None) => {}
    }
}

/// Replaces `range` of a large text (a map, a backends file) with `with`: in place when
/// the lengths match, else into a new text of the exact size, each part copied once
/// forward. Shifting the tail in place would copy it backward when the text grows,
/// which musl's `memmove` does a byte at a time: about a millisecond for a map of ten
/// thousand routes.
pub fn splice(text: &mut String, range: Range<usize>, with: &str) {
    if range.len() == with.len() {
        text.replace_range(range, with);
        return;
    }
    let mut spliced = String::with_capacity(text.len() - range.len() + with.len());
    spliced.push_str(&text[..range.start]);
    spliced.push_str(with);
    spliced.push_str(&text[range.end..]);
    *text = spliced;
}

/// The lines of `entries` in `order`, as a map file.
pub fn lines<'a>(order: MapOrder, entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut entries: Vec<(&str, &str)> = entries.into_iter().collect();
    entries.sort_by(|(a, _), (b, _)| order.cmp(a, b));
    entries.dedup_by(|(a, _), (b, _)| a == b);
    let mut text = String::with_capacity(entries.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (key, value) in entries {
        text.push_str(key);
        text.push(' ');
        text.push_str(value);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_splice_gives_what_replace_range_gives() {
        for (range, with) in [
            (2..4, "xy"),
            (2..4, "wxyz"),
            (2..4, ""),
            (6..6, "!"),
            (0..0, ""),
        ] {
            let mut spliced = String::from("abcdef");
            splice(&mut spliced, range.clone(), with);
            let mut replaced = String::from("abcdef");
            replaced.replace_range(range.clone(), with);
            assert_eq!(spliced, replaced);
            let in_place = range.len() == with.len();
            let expected = if in_place { 6 } else { spliced.len() };
            assert_eq!(
                spliced.capacity(),
                expected,
                "in place, or of the exact size"
            );
        }
    }

    proptest! {
        /// Setting lines one by one gives the file written from the entries at once.
        #[test]
        fn edits_give_the_file_of_the_final_entries(
            start in proptest::collection::btree_map("[a-c/]{1,4}", "[xy]{1,2}", 0..12),
            edits in proptest::collection::vec(("[a-c/]{1,4}", proptest::option::of("[xy]{1,2}")), 0..12),
            longest_first in any::<bool>(),
        ) {
            let order = if longest_first { MapOrder::LongestFirst } else { MapOrder::Key };
            let mut text = lines(order, start.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let mut entries = start.clone();
            for (key, value) in &edits {
                set_line(&mut text, order, key, value.as_deref());
                match value {
                    Some(value) => entries.insert(key.clone(), value.clone()),
                    None => entries.remove(key),
                };
            }
            let expected = lines(order, entries.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            prop_assert_eq!(text, expected);
        }
    }
}
