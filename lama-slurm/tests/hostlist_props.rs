//! `count`, `nth` and `contains` answer what `expand` would, without expanding: on well-formed
//! hostlists of every shape (padded and unpadded ranges, suffixes, plain names) and on
//! arbitrary text over the hostlist's characters (valid or not, both must agree).

use lama_slurm::hostlist::{contains, count, expand, nth};
use proptest::prelude::*;

/// One item of a hostlist: a plain name, or `prefix[ranges]suffix`.
fn item() -> impl Strategy<Value = String> {
    let range = (0u64..120, 0u64..6, 0usize..4).prop_map(|(lo, len, width)| {
        let hi = lo + len;
        if len == 0 {
            format!("{lo:0width$}")
        } else {
            format!("{lo:0width$}-{hi}")
        }
    });
    prop_oneof![
        "[a-z]{1,4}",
        ("[a-z]{0,3}", prop::collection::vec(range, 1..4), "(-ib)?")
            .prop_map(|(prefix, ranges, suffix)| format!("{prefix}[{}]{suffix}", ranges.join(","))),
    ]
}

proptest! {
    #[test]
    fn well_formed_lists_agree_with_expand(items in prop::collection::vec(item(), 1..5)) {
        let list = items.join(",");
        let names = expand(&list).unwrap();
        prop_assert_eq!(count(&list).unwrap(), names.len() as u64);
        for (i, name) in names.iter().enumerate() {
            prop_assert_eq!(nth(&list, i as u64).unwrap(), Some(name.clone()));
            prop_assert!(contains(&list, name).unwrap());
        }
        prop_assert_eq!(nth(&list, names.len() as u64).unwrap(), None);
    }

    #[test]
    fn any_text_is_judged_alike(text in "[a-c0-9,\\[\\]-]{0,24}", probe in "[a-c0-9-]{0,6}") {
        match expand(&text) {
            Ok(names) => {
                prop_assert_eq!(count(&text).unwrap(), names.len() as u64);
                prop_assert_eq!(contains(&text, &probe).unwrap(), names.contains(&probe));
                prop_assert_eq!(nth(&text, 0).unwrap(), names.first().cloned());
            }
            Err(e) => {
                prop_assert_eq!(count(&text).unwrap_err(), e.clone());
                prop_assert_eq!(nth(&text, 0).unwrap_err(), e.clone());
                prop_assert_eq!(contains(&text, &probe).unwrap_err(), e);
            }
        }
    }
}
