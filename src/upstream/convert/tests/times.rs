//! Times: every time of the result is a timestamp beside its raw text, read
//! in the upstream's offset in every written form, and none for junk.

use super::*;

#[test]
fn every_time_of_the_result_is_a_timestamp_beside_its_raw_text() {
    let r = result(FULL_JOURNEY).unwrap();
    let a = r.document_analysis.unwrap();
    assert_eq!(a.raw_ticket_create_time, "2026-11-21 10:16:00");
    assert_eq!(a.ticket_create_time.unwrap().seconds, 1_795_266_900 + 60);
    assert_eq!(a.raw_processing_status_time, "2026-11-21 10:17:00");
    assert_eq!(
        a.processing_status_time.unwrap().seconds,
        1_795_266_900 + 120
    );
    assert_eq!(a.ticket_return_time.unwrap().seconds, 1_795_266_900 + 125);
    let rg = a.ocr.unwrap().rg.unwrap();
    assert_eq!(rg.raw_create_time, "2026-11-21 10:16:30");
    assert_eq!(rg.create_time.unwrap().seconds, 1_795_266_900 + 90);
}

#[test]
fn wire_times_read_every_written_form_in_the_upstream_offset_and_none_for_junk() {
    let brasilia = WireTimes::new(-180);
    let at = |raw: &str| brasilia.parse(raw).map(|t| (t.seconds, t.nanos));
    assert_eq!(at("2026-11-21 10:15:00"), Some((1_795_266_900, 0)));
    assert_eq!(at(" 2026-11-21T10:15:00 "), Some((1_795_266_900, 0)));
    assert_eq!(
        at("2026-11-21 10:15:00.250"),
        Some((1_795_266_900, 250_000_000))
    );
    assert_eq!(at("21/11/2026 10:15:00"), Some((1_795_266_900, 0)));
    assert_eq!(
        at("2026-11-21T13:15:00Z"),
        Some((1_795_266_900, 0)),
        "an explicit offset wins"
    );
    assert_eq!(
        WireTimes::new(0)
            .parse("2026-11-21 13:15:00")
            .unwrap()
            .seconds,
        1_795_266_900
    );
    for junk in ["", "  ", "ontem", "2026-13-40 99:00:00", "21/11/2026"] {
        assert_eq!(at(junk), None, "{junk:?}");
    }
}
