//! What a watched journey costs Redis and the vendor when its photos
//! weigh what real captures do: Redis carries the fact that the result is
//! final, never the result; each replica holding watchers reads the
//! result from the vendor once, for all of them, and one holding none
//! reads nothing. Bytes are Redis' own count (`INFO stats`
//! `total_net_input_bytes`), reads the sandbox's.

use idgate::testing::GatewayParts as _;

use super::EVENT_WAIT;
use crate::support::{
    fleet::{Fleet, PHOTO_BYTES, assert_complete, large_rg_images},
    gateway::{by_appkey, by_ref, drain_within, happy_person},
    wait::eventually,
};

/// The most Redis may receive for one watched journey, whatever the size
/// of its photos.
const REDIS_BYTES_PER_JOURNEY: u64 = 16 * 1024;

/// Bytes Redis received from every client since it started.
async fn redis_input_bytes(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .expect("INFO stats");
    info.lines()
        .find_map(|line| line.strip_prefix("total_net_input_bytes:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_net_input_bytes in INFO stats")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journeys_watched_on_one_replica_with_300_kib_photos_send_redis_under_16_kib_each_and_read_the_vendor_once()
 {
    const JOURNEYS: u64 = 3;
    // A 30 s grace, longer than the waits below: only the fanned-out
    // notice ends these watches. A read turn lasts a step and the
    // upstream timeout: ten minutes here, so that only its release, not
    // its expiry, removes it within the wait below.
    let mut fleet = Fleet::start_with_photos(0, 30).await;
    fleet
        .add_replicas_with(2, |c| {
            if let Some(upstream) = c.upstream.as_mut() {
                upstream.timeout_ms = 600_000;
            }
        })
        .await;
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let mut conn = fleet.redis.client().await;
    let received_before = redis_input_bytes(&mut conn).await;
    let reads_before = fleet.result_reads();

    for i in 0..JOURNEYS {
        // Created and watched on B (three watchers, by reference and by
        // appkey), before the proof: they wait for the notice.
        let created = b.create_journey_for(happy_person()).await;
        let watchers = vec![
            b.watch(by_ref(&created.journey_ref)).await,
            b.watch(by_ref(&created.journey_ref)).await,
            b.watch(by_appkey(&created.appkey)).await,
        ];
        assert!(b.pass_3d(&created.appkey).await.valid);
        b.submit_images(&created.appkey, &large_rg_images())
            .await
            .expect("documents submitted");
        fleet.finish_processing();
        // The vendor's webhook reaches A only, which watches nothing.
        assert_eq!(
            a.post_notice(
                "Completo",
                &created.appkey,
                Some(&format!("msg_photos_{i}"))
            )
            .await,
            (202, "accepted".to_owned())
        );
        for stream in watchers {
            let (items, end) = drain_within(stream, EVENT_WAIT).await;
            assert_complete(&items, &end);
            let photos = items
                .last()
                .and_then(|last| last.result.as_ref())
                .and_then(|result| result.photos.as_ref())
                .expect("the full result, photos included");
            assert_eq!(photos.liveness_frontal.len(), PHOTO_BYTES, "the selfie");
            assert!(
                photos
                    .documents
                    .iter()
                    .any(|d| d.image.len() == PHOTO_BYTES),
                "the document photo"
            );
        }
    }

    // B read each result on its turn, and gives the turn up as it
    // announces the result (a replica of the release before this one,
    // told of the result, waits for the turn).
    eventually("B gives its read turns up", EVENT_WAIT, async || {
        !fleet
            .redis
            .keys()
            .await
            .iter()
            .any(|k| k.starts_with("idgate:turn:"))
    })
    .await;
    let received = redis_input_bytes(&mut conn).await - received_before;
    assert!(
        received <= JOURNEYS * REDIS_BYTES_PER_JOURNEY,
        "Redis received {received} B for {JOURNEYS} watched journeys with two {PHOTO_BYTES} B photos each"
    );
    // B holds the watchers: one read a journey there, none on A.
    assert_eq!(fleet.result_reads() - reads_before, JOURNEYS);
    assert_eq!(b.gateway.watches().stats().result_reads, JOURNEYS);
    assert_eq!(a.gateway.watches().stats().result_reads, 0);
    assert!(
        !fleet
            .redis
            .keys()
            .await
            .iter()
            .any(|k| k.starts_with("idgate:result:")),
        "no result is kept in Redis"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_holding_watchers_reads_a_completed_journey_s_photos_once_and_the_others_none()
 {
    let fleet = Fleet::start_with_photos(3, 30).await;
    let (a, b, c) = (&fleet.replicas[0], &fleet.replicas[1], &fleet.replicas[2]);
    let created = a.create_journey_for(happy_person()).await;
    // Four watchers on B, two on C; none on A, which gets the webhook.
    let mut watchers = Vec::new();
    for _ in 0..4 {
        watchers.push(b.watch(by_ref(&created.journey_ref)).await);
    }
    for _ in 0..2 {
        watchers.push(c.watch(by_appkey(&created.appkey)).await);
    }
    assert!(a.pass_3d(&created.appkey).await.valid);
    a.submit_images(&created.appkey, &large_rg_images())
        .await
        .expect("documents submitted");
    fleet.finish_processing();
    let reads_before = fleet.result_reads();
    assert_eq!(
        a.post_notice("Completo", &created.appkey, Some("msg_two_replicas"))
            .await
            .0,
        202
    );
    for stream in watchers {
        let (items, end) = drain_within(stream, EVENT_WAIT).await;
        assert_complete(&items, &end);
    }
    assert_eq!(fleet.result_reads() - reads_before, 2, "one on B, one on C");
    let reads = |r: &crate::support::gateway::TestGateway| r.gateway.watches().stats().result_reads;
    assert_eq!((reads(a), reads(b), reads(c)), (0, 1, 1));
    fleet.stop().await;
}
