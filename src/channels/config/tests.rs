use super::*;

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    channels: Vec<ChannelSpec>,
    #[serde(default)]
    routing: RoutingConfig,
}

#[test]
fn a_minimal_channel_gets_the_documented_defaults() {
    let d: Doc = toml::from_str(
        "[[channels]]\nname = \"primary\"\nbase_url = \"http://a\"\n\
         [routing]\nmode = \"channel:primary\"\n",
    )
    .unwrap();
    let c = &d.channels[0];
    assert_eq!(c.session_token_path, DEFAULT_SESSION_TOKEN_PATH);
    assert_eq!(c.liveness_path, DEFAULT_LIVENESS_PATH);
    assert_eq!((c.priority, c.timeout_ms), (0, 10_000));
    assert_eq!(c.breaker, BreakerConfig::default());
    assert_eq!(d.routing.mode, RoutingMode::Channel("primary".into()));
    assert_eq!(d.routing.contingency_hold_secs, 0);
    validate(&d.channels, &d.routing).unwrap();
}

#[test]
fn unknown_keys_and_modes_are_rejected() {
    let e =
        toml::from_str::<Doc>("[[channels]]\nname = \"a\"\nbase_url = \"http://a\"\nprio = 1\n")
            .err()
            .unwrap();
    assert!(e.to_string().contains("prio"), "{e}");
    let e = toml::from_str::<Doc>("[routing]\nmode = \"sometimes\"\n")
        .err()
        .unwrap();
    assert!(e.to_string().contains("sometimes"), "{e}");
}

#[test]
fn duplicate_empty_or_odd_names_are_rejected() {
    let a = ChannelSpec::new("a", "http://a", 0);
    let err = validate_channels(&[a.clone(), a.clone()]).unwrap_err();
    assert!(err.0.contains("another channel"), "{err}");
    let err = validate_channels(&[ChannelSpec::new("", "http://a", 0)]).unwrap_err();
    assert!(err.0.contains("name must be"), "{err}");
    assert!(validate_channels(&[ChannelSpec::new("a b", "http://a", 0)]).is_err());
    assert!(validate_channels(&[ChannelSpec::new("a", "ftp://a", 0)]).is_err());
}

#[test]
fn errors_name_a_valid_channel_and_never_quote_an_invalid_name() {
    let a = ChannelSpec::new("a", "http://a", 0);
    let err = validate_channels(&[a.clone(), a]).unwrap_err();
    assert_eq!(err.0, "channels[1] (a): name is used by another channel");
    let odd = ChannelSpec::new("pass word=s3cr3t", "http://a", 0);
    let err = validate_channels(&[odd]).unwrap_err();
    assert!(err.0.starts_with("channels[0]: name must be"), "{err}");
    assert!(!err.0.contains("s3cr3t"), "{err}");
}

#[test]
fn a_mode_naming_an_absent_channel_is_rejected() {
    let routing = RoutingConfig {
        mode: RoutingMode::Channel("ghost".into()),
        ..RoutingConfig::default()
    };
    let err = validate(&[ChannelSpec::new("a", "http://a", 0)], &routing).unwrap_err();
    assert!(err.0.contains("ghost"), "{err}");
}

#[test]
fn forced_modes_need_enough_channels_at_load() {
    let one = [ChannelSpec::new("a", "http://a", 0)];
    let routing = |mode| RoutingConfig {
        mode,
        ..RoutingConfig::default()
    };
    let err = validate(&one, &routing(RoutingMode::ForceAlternative)).unwrap_err();
    assert!(err.0.contains("force_alternative"), "{err}");
    validate(&one, &routing(RoutingMode::ForcePrimary)).unwrap();
    let two = [one[0].clone(), ChannelSpec::new("b", "http://b", 1)];
    validate(&two, &routing(RoutingMode::ForceAlternative)).unwrap();
    // No `[[channels]]`: the channels come from `[upstream]` or the
    // sandbox, and the router checks the mode against them.
    validate(&[], &routing(RoutingMode::ForceAlternative)).unwrap();
    assert!(validate_set(&[], &routing(RoutingMode::ForcePrimary), true).is_err());
    assert!(validate_set(&one, &routing(RoutingMode::ForceAlternative), true).is_err());
}

#[test]
fn mode_rules_name_what_is_missing() {
    let names = ["p", "q"];
    assert_eq!(
        validate_mode(&RoutingMode::Channel("x".into()), names),
        Err(ModeError::UnknownChannel("x".into()))
    );
    assert_eq!(
        validate_mode(&RoutingMode::ForceAlternative, ["p"]),
        Err(ModeError::TooFewChannels {
            mode: "force_alternative",
            needed: 2
        })
    );
    assert!(validate_mode(&RoutingMode::ForcePrimary, []).is_err());
    assert!(validate_mode(&RoutingMode::Auto, []).is_ok());
    assert!(validate_mode(&RoutingMode::Channel("q".into()), names).is_ok());
}

#[test]
fn embedded_channel_settings_default_and_are_checked() {
    let e = EmbeddedChannelsConfig::default();
    let spec = e.spec("primary", "http://a", 0);
    assert_eq!(spec, ChannelSpec::new("primary", "http://a", 0));
    let e: EmbeddedChannelsConfig =
        toml::from_str("timeout_ms = 250\nbreaker = { failure_threshold = 2 }\n").unwrap();
    let spec = e.spec("alternative", "http://b", 1);
    assert_eq!((spec.timeout_ms, spec.breaker.failure_threshold), (250, 2));
    e.validate().unwrap();
    let zero = EmbeddedChannelsConfig {
        timeout_ms: 0,
        ..EmbeddedChannelsConfig::default()
    };
    let err = zero.validate().unwrap_err();
    assert!(err.0.contains("embedded_channels: timeout_ms"), "{err}");
}

#[test]
fn modes_round_trip_through_text() {
    for m in [
        RoutingMode::Auto,
        RoutingMode::ForcePrimary,
        RoutingMode::ForceAlternative,
        RoutingMode::Channel("alt-2".into()),
    ] {
        assert_eq!(m.to_string().parse::<RoutingMode>().unwrap(), m);
    }
    assert!("channel:".parse::<RoutingMode>().is_err());
}

#[test]
fn a_weighted_mode_is_read_from_the_configuration_and_checked_against_the_channels() {
    let d: RoutingConfig =
        toml::from_str("mode = \"weighted:primary=90,alternative=10\"\n").unwrap();
    let RoutingMode::Weighted(split) = &d.mode else {
        panic!("{:?}", d.mode);
    };
    assert_eq!(split.weight("primary"), 90);
    assert!(validate_mode(&d.mode, ["primary", "alternative"]).is_ok());
    assert_eq!(
        validate_mode(&d.mode, ["primary"]),
        Err(ModeError::UnknownChannel("alternative".into()))
    );
    for bad in [
        "weighted:",
        "weighted:primary=-1",
        "weighted:primary=0",
        "weighted:primary=4294967296",
        "weighted:primary=90;alternative=10",
    ] {
        let e = bad.parse::<RoutingMode>().unwrap_err();
        assert!(e.0.starts_with("routing mode:"), "{bad}: {e}");
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::channels::WeightedSplit;

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_.-]{1,12}"
    }

    proptest! {
        #[test]
        fn weighted_modes_round_trip_through_text(
            entries in proptest::collection::vec((name(), 0u32..=1_000_000), 1..8)
        ) {
            if let Ok(split) = WeightedSplit::new(entries) {
                let mode = RoutingMode::Weighted(split);
                prop_assert_eq!(mode.to_string().parse::<RoutingMode>().unwrap(), mode);
            }
        }

        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in "\\PC{0,80}") {
            let _ = text.parse::<RoutingMode>();
            let _ = format!("weighted:{text}").parse::<RoutingMode>();
        }
    }
}

#[test]
fn an_unknown_routing_mode_is_refused_without_echoing_it() {
    // A value with a backtick once closed the redaction's quote early.
    for value in ["`0AA0##¡", "not-a-mode-MARKER", "channel:bad name"] {
        let err = value.parse::<RoutingMode>().unwrap_err().to_string();
        assert!(err.contains("routing mode must be"), "{err}");
        assert!(!err.contains(value.trim_start_matches('`')), "{err}");
    }
}
