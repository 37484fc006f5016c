use super::*;

fn turn(session: u64, sent: f64, end: f64, header: Option<usize>) -> TurnSpan {
    TurnSpan {
        session,
        sent,
        end,
        header,
        prompt_tokens: 100,
        cached_tokens: None,
    }
}

fn read(sent: f64, replicas: &[(f64, f64)]) -> CounterRead {
    CounterRead {
        sent,
        t: sent + 0.01,
        replicas: replicas.iter().map(|&(q, h)| (Some(q), Some(h))).collect(),
    }
}

#[test]
fn a_header_value_names_a_replica_by_url_authority_or_number() {
    let bases = vec![
        "http://127.0.0.1:8001".to_string(),
        "http://10.0.0.2:8000".to_string(),
    ];
    assert_eq!(replica_named("http://127.0.0.1:8001", &bases), Some(0));
    assert_eq!(replica_named("10.0.0.2:8000", &bases), Some(1));
    assert_eq!(replica_named(" 2 ", &bases), Some(1));
    assert_eq!(replica_named("3", &bases), None);
    assert_eq!(replica_named("0", &bases), None);
    assert_eq!(replica_named("pod-7", &bases), None);
}

#[test]
fn a_lone_turn_between_two_reads_goes_to_the_replica_whose_counter_moved() {
    // one session, three turns 1 s apart, a read before and after each
    let turns = [
        turn(0, 1.0, 1.5, None),
        turn(0, 2.0, 2.5, None),
        turn(0, 3.0, 3.5, None),
    ];
    let reads = [
        read(0.5, &[(0.0, 0.0), (0.0, 0.0)]),
        read(1.6, &[(100.0, 0.0), (0.0, 0.0)]),
        read(2.6, &[(100.0, 0.0), (200.0, 0.0)]),
        read(3.6, &[(400.0, 100.0), (200.0, 0.0)]),
    ];
    let f = attribute(&turns, &reads);
    let reps: Vec<_> = f.iter().map(|t| t.replica).collect();
    assert_eq!(reps, vec![Some(0), Some(1), Some(0)]);
    assert!(f.iter().all(|t| t.by == FoundBy::Counters));
    assert_eq!(f[2].hits, Some((100.0, 300.0)));
    let r = summarise(&turns, &f, &[Some((100.0, 400.0)), Some((0.0, 200.0))]);
    assert_eq!(r.sessions[0].replicas, vec![Some(1), Some(2), Some(1)]);
    assert_eq!(r.sessions[0].moves, 2);
    assert_eq!((r.sessions_moved, r.affinity_failure_share), (1, Some(1.0)));
    assert_eq!(r.unattributed_share, Some(0.0));
    assert_eq!(r.attributed_by_counters, 3);
    // 100 cached of 100 + 200 + 300 looked up
    assert!((r.sessions[0].achieved_hit_rate.unwrap() - 100.0 / 600.0).abs() < 1e-12);
    assert_eq!(r.replicas[0].turns, 2);
    assert_eq!(r.replicas[1].sessions, 1);
    assert_eq!(r.replicas[0].achieved_hit_rate, Some(0.25));
    assert_eq!(r.replicas[1].achieved_hit_rate, Some(0.0));
}

#[test]
fn overlapping_turns_both_counters_moving_or_no_read_after_are_unattributed() {
    let reads = [
        read(0.5, &[(0.0, 0.0), (0.0, 0.0)]),
        read(3.0, &[(100.0, 0.0), (100.0, 0.0)]),
    ];
    // two sessions in flight at once
    let turns = [turn(0, 1.0, 2.0, None), turn(1, 1.5, 2.5, None)];
    let f = attribute(&turns, &reads);
    assert!(
        f.iter()
            .all(|t| t.by == FoundBy::Nothing && t.replica.is_none())
    );
    // one turn alone, but both counters moved (someone else's traffic)
    let f = attribute(&turns[..1], &reads);
    assert_eq!(f[0].by, FoundBy::Nothing);
    // the read after was sent before the turn ended
    let turns = [turn(0, 1.0, 3.2, None)];
    let f = attribute(&turns, &reads);
    assert_eq!(f[0].by, FoundBy::Nothing);
    let r = summarise(&turns, &f, &[None, None]);
    assert_eq!((r.unattributed, r.unattributed_share), (1, Some(1.0)));
    assert_eq!(r.affinity_failure_share, None);
}

#[test]
fn the_header_wins_even_when_sessions_overlap() {
    let mut turns = vec![
        turn(0, 1.0, 2.0, Some(1)),
        turn(1, 1.1, 2.1, Some(0)),
        turn(0, 2.2, 3.0, Some(1)),
        turn(1, 2.3, 3.1, Some(1)),
    ];
    turns[2].cached_tokens = Some(80);
    let f = attribute(&turns, &[]);
    assert!(f.iter().all(|t| t.by == FoundBy::Header));
    let r = summarise(&turns, &f, &[None, None]);
    assert_eq!(r.sessions[0].moves, 0);
    assert_eq!(r.sessions[1].moves, 1);
    assert_eq!(r.sessions_moved, 1);
    assert_eq!(r.affinity_failure_share, Some(0.5));
    assert_eq!(r.sessions[0].achieved_hit_rate, Some(0.8));
    assert_eq!(r.sessions[1].achieved_hit_rate, None);
    assert_eq!(r.attributed_by_header, 4);
}
