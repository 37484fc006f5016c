use super::*;

const EFFECTIVE: &str = "ResmanDebugLevel: 4294967295\nRmLogonRC: 1\nModifyDeviceFiles: 1\n\
RegistryDwords: \"ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1\"\n\
RegistryDwordsPerDevice: \"\"\nDmaRemapPeerMmio: 1\n";

const CONF: &str = "# written by hand\noptions nvidia NVreg_RegistryDwords=\"ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1\"\n";

#[test]
fn expected_values_match_the_reference_result() {
    assert_eq!(
        expected_registry_dwords(),
        "ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1"
    );
    assert_eq!(
        suggested_modprobe_line(),
        "options nvidia NVreg_RegistryDwords=\"ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1\""
    );
}

#[test]
fn effective_and_configured() {
    let p = check_p2p_override(PARAMS_PATH, Ok(EFFECTIVE), MODPROBE_PATH, Ok(CONF));
    assert!(p.effective && p.configured && p.params_available && p.modprobe_available);
    assert_eq!(p.status(), P2pStatus::Enabled);
    assert_eq!(p.runtime["ForceP2P"], "0x11");
    assert_eq!(p.runtime["DmaRemapPeerMmio"], "1");
    let keys: Vec<&String> = p.runtime.keys().collect();
    assert_eq!(keys.len(), 6);
    assert_eq!(keys[5], "DmaRemapPeerMmio");
    let v = serde_json::to_value(&p).unwrap_or_default();
    let obj_keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        obj_keys,
        [
            "effective",
            "configured",
            "params_path",
            "params_available",
            "modprobe_path",
            "modprobe_available",
            "runtime",
            "expected",
            "missing",
            "mismatched",
            "registry_dwords",
            "suggested_modprobe_line",
            "suggested_reload"
        ]
    );
    assert!(p.panel_lines().iter().all(|l| !l.starts_with("Suggested")));
    assert!(p.summary_line().starts_with("enabled:"));
}

#[test]
fn missing_and_mismatched() {
    let params = "RegistryDwords: \"ForceP2P=0x10;RMForceP2PType=1\"\nRMPcieP2PType: 2\n";
    let p = check_p2p_override(
        PARAMS_PATH,
        Ok(params),
        MODPROBE_PATH,
        Err("No such file".into()),
    );
    assert!(!p.effective && !p.configured && !p.modprobe_available);
    assert_eq!(
        p.missing,
        ["GrdmaPciTopoCheckOverride", "EnableResizableBar"]
    );
    assert_eq!(p.mismatched["ForceP2P"]["expected"], "0x11");
    assert_eq!(p.mismatched["ForceP2P"]["actual"], "0x10");
    assert_eq!(
        p.runtime["RMPcieP2PType"], "2",
        "falls back to a same-named params line"
    );
    assert_eq!(p.runtime["DmaRemapPeerMmio"], "");
    assert_eq!(
        p.summary_line(),
        "not effective: missing=GrdmaPciTopoCheckOverride,EnableResizableBar; mismatched=ForceP2P"
    );
    assert!(
        p.panel_lines()
            .iter()
            .any(|l| l == &p.suggested_modprobe_line)
    );
}

#[test]
fn numeric_values_compare_as_numbers() {
    let params = "RegistryDwords: \"ForceP2P=17;RMForceP2PType=0x1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1\"\n";
    let p = check_p2p_override(PARAMS_PATH, Ok(params), MODPROBE_PATH, Ok(CONF));
    assert!(p.effective, "{:?}", p.mismatched);
}

#[test]
fn unreadable_or_garbled_params_are_unknown() {
    let p = check_p2p_override(
        "/nope",
        Err("permission denied".into()),
        MODPROBE_PATH,
        Ok(CONF),
    );
    assert_eq!(p.status(), P2pStatus::Unknown);
    assert!(!p.effective && p.configured && !p.params_available);
    assert!(
        p.summary_line()
            .starts_with("unknown: /nope is not readable")
    );
    let p = check_p2p_override(
        PARAMS_PATH,
        Ok("\u{0}\u{1}garbage without colons\n\n"),
        MODPROBE_PATH,
        Ok(""),
    );
    assert_eq!(p.status(), P2pStatus::Unknown);
    assert!(!p.effective && !p.configured);
    assert_eq!(p.missing.len(), 5);
}

#[test]
fn commented_or_foreign_modprobe_lines_do_not_count() {
    let commented: String = CONF.lines().map(|l| format!("#{l}\n")).collect();
    let conf = format!("{commented}options nouveau NVreg_RegistryDwords=\"ForceP2P=0x11\"\n");
    let p = check_p2p_override(PARAMS_PATH, Ok(EFFECTIVE), MODPROBE_PATH, Ok(&conf));
    assert!(!p.configured);
    let conf = "options nvidia NVreg_OpenRmEnableUnsupportedGpus=1 NVreg_RegistryDwords=ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1\n";
    let p = check_p2p_override(PARAMS_PATH, Ok(EFFECTIVE), MODPROBE_PATH, Ok(conf));
    assert!(p.configured);
}

#[test]
fn huge_params_file_is_truncated() {
    let big = "X: 1\n".repeat(10_000) + "RegistryDwords: \"ForceP2P=0x11\"\n";
    assert!(
        parse_params(&big)
            .iter()
            .all(|(k, _)| k != "RegistryDwords")
    );
}

proptest::proptest! {
    #[test]
    fn p2p_check_never_panics(params in "\\PC{0,400}", conf in "\\PC{0,200}") {
        let p = check_p2p_override(PARAMS_PATH, Ok(&params), MODPROBE_PATH, Ok(&conf));
        let _ = (p.summary_line(), p.panel_lines());
    }
}
