//! The inventory file reader (`inventory::file::parse`, a `kubectl get -o
//! json|yaml` List) on any text, then the plan of the example manifest
//! against what it read. Checks: no panic; each resource has its item's
//! namespace and name; only an Integration names the Pipe that created it,
//! in its own namespace; and the plan keeps every promise
//! (`camelk_fuzz::check_plan`), which needs each resource listed once.
#![no_main]

use std::sync::OnceLock;

use camelk_reconciler::api::OperatorAssignmentSpec;
use camelk_reconciler::camel_k::CamelKind;
use camelk_reconciler::inventory;
use camelk_reconciler::manifest::Manifest;
use libfuzzer_sys::fuzz_target;

fn example() -> &'static OperatorAssignmentSpec {
    static SPEC: OnceLock<OperatorAssignmentSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let text = include_str!("../../examples/operator-assignment.yaml");
        Manifest::parse("operator-assignment.yaml", text.to_string())
            .expect("the example is valid")
            .assignment
            .spec
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(inventory) = inventory::parse_file("fuzz.json", text) else {
        return;
    };
    for r in &inventory.resources {
        if let Some(pipe) = &r.created_by {
            assert_eq!(r.id.kind, CamelKind::Integration, "{}", r.id);
            assert!(matches!(
                pipe.kind,
                CamelKind::Pipe | CamelKind::KameletBinding
            ));
            assert_eq!(pipe.namespace, r.id.namespace);
        }
    }
    let spec = example();
    camelk_fuzz::plan_and_check(spec, None, &inventory);
});
