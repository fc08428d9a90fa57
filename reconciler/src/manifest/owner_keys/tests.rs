use super::*;

/// The edit of `text`, which must be accepted; a second run on its result
/// must change nothing.
fn stripped(text: &str) -> Stripped {
    let s = strip("apps/shop.yaml", text).unwrap_or_else(|d| panic!("refused: {d}"));
    let again = strip("apps/shop.yaml", &s.text).unwrap_or_else(|d| panic!("refused again: {d}"));
    assert_eq!(again.text, s.text, "a second run changed the text");
    assert!(again.resources.is_empty(), "a second run found keys");
    s
}

/// [`stripped`] of the text before `diff` ([`before_after`]), which must
/// become the text after it.
fn stripped_as(diff: &str) -> Stripped {
    let (before, after) = before_after(diff);
    let s = stripped(&before);
    assert_eq!(s.text, after);
    s
}

fn refused(text: &str) -> String {
    match strip("apps/shop.yaml", text) {
        Ok(s) => panic!("accepted: {:?}", s.text),
        Err(d) => d.to_string(),
    }
}

fn notes(s: &Stripped) -> Vec<String> {
    s.notes.iter().map(ToString::to_string).collect()
}

/// The text before an edit and after it, from `diff`: lines as a unified diff
/// writes them (`-` before only, `+` after only, a space or an empty line in
/// both), so that a test shows which lines change and which must stay.
fn before_after(diff: &str) -> (String, String) {
    let (mut before, mut after) = (String::new(), String::new());
    // The diff's first line break only ends its literal's first line.
    let diff = diff.strip_prefix('\n').unwrap_or(diff);
    for line in diff.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix('-') {
            before.push_str(rest);
        } else if let Some(rest) = line.strip_prefix('+') {
            after.push_str(rest);
        } else if let Some(rest) = line.strip_prefix(' ').or((line == "\n").then_some(line)) {
            before.push_str(rest);
            after.push_str(rest);
        } else {
            panic!("not a line of a diff: {line:?}");
        }
    }
    (before, after)
}

#[test]
fn a_multi_document_file_changes_only_the_key_lines() {
    let s = stripped_as(
        r#"
 # Shop integrations, deployed by Flux.
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: orders   # the main route
   namespace: shop
   annotations:
     # who runs it
-    camel.apache.org/operator.id: operator-1   # set by kamel
+    camelk.dev/owner-keys: reconciler   # set by kamel
     trait.camel.apache.org/container.image: "quay.io/shop/orders:1.2"
   labels:
     app: orders
 spec:
   flows:
     - from: {uri: "timer:tick?period={{period}}"}
 ---
 # Not Camel K: left as it is, and named in a note.
 apiVersion: v1
 kind: ConfigMap
 metadata:
   name: orders-config
   annotations:
     camel.apache.org/operator.id: operator-1
 ---
 apiVersion: camel.apache.org/v1
 kind: Pipe
 metadata:
   name: feed
-  labels:
-    'camel.apache.org/operator.id': "operator-1"
   annotations:
-    camel.apache.org/operator.id: operator-1
+    camelk.dev/owner-keys: reconciler
 spec: {}
"#,
    );
    assert_eq!(s.keys_removed(), 3);
    let summary: Vec<(String, String, Option<String>, String, Location)> = s
        .resources
        .iter()
        .map(|r| {
            (
                r.kind.clone(),
                r.name.clone(),
                r.namespace.clone(),
                r.removed(),
                r.at,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "Integration".into(),
                "orders".into(),
                Some("shop".into()),
                "annotation=operator-1".into(),
                Location { line: 2, column: 1 }
            ),
            (
                "Pipe".into(),
                "feed".into(),
                None,
                "label=operator-1 annotation=operator-1".into(),
                Location {
                    line: 25,
                    column: 1
                }
            ),
        ]
    );
    assert_eq!(
        s.resources[1].camel_kind(),
        Some(crate::camel_k::CamelKind::Pipe)
    );
    assert_eq!(
        notes(&s),
        [
            "apps/shop.yaml:23:5: warning: camel.apache.org/operator.id is still named here, \
             outside a Camel K resource's labels and annotations; if a tool applies it (a \
             Kustomization's commonAnnotations or commonLabels, a patch), remove it by hand"
        ]
    );
}

#[test]
fn an_annotation_alone_becomes_the_marker() {
    let s = stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: a
   annotations:
-    camel.apache.org/operator.id: operator-1
+    camelk.dev/owner-keys: reconciler
 spec: {}
"#,
    );
    assert_eq!(s.resources[0].annotation.as_deref(), Some("operator-1"));
    assert_eq!(s.resources[0].label, None);
    assert!(s.notes.is_empty());
}

#[test]
fn a_label_among_others_loses_its_line_and_an_annotation_becomes_the_marker() {
    let s = stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Kamelet
 metadata:
   name: tick
   labels:
     camel.apache.org/kamelet.type: source
-    camel.apache.org/operator.id: operator-2
   annotations:
-    camel.apache.org/operator.id: "operator-2" # pinned
+    camelk.dev/owner-keys: reconciler # pinned
     camel.apache.org/provider: "Shop"
"#,
    );
    assert_eq!(
        s.resources[0].removed(),
        "label=operator-2 annotation=operator-2"
    );
}

#[test]
fn flow_maps_get_the_marker_in_place_and_lose_a_label_with_one_comma() {
    stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
-metadata: {name: a, annotations: {camel.apache.org/operator.id: op-1, x: y}, labels: {a: b, "camel.apache.org/operator.id": op-1}}
+metadata: {name: a, annotations: {camelk.dev/owner-keys: reconciler, x: y}, labels: {a: b}}
"#,
    );
    // The labels emptied: they go, with their comma.
    stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Pipe
-metadata: {name: a, labels: {camel.apache.org/operator.id: op-1}, annotations: {camel.apache.org/operator.id: op-1}}
+metadata: {name: a, annotations: {camelk.dev/owner-keys: reconciler}}
"#,
    );
}

#[test]
fn items_of_a_list_are_resources_too() {
    let s = stripped_as(
        r#"
 apiVersion: v1
 kind: List
 items:
   - apiVersion: camel.apache.org/v1
     kind: Integration
     metadata:
       name: a
       annotations:
-        camel.apache.org/operator.id: operator-1
+        camelk.dev/owner-keys: reconciler
   - apiVersion: v1
     kind: Secret
     metadata:
       name: s
"#,
    );
    assert_eq!(s.resources[0].at, Location { line: 4, column: 5 });
}

#[test]
fn files_without_camel_k_keys_are_returned_as_they_are() {
    for text in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
        "apiVersion: camel.apache.org/v1\nkind: Integration\nmetadata:\n  name: a\n  \
         annotations: {}\n",
        "",
        "# only a comment\n",
        "---\n---\n",
        // Cleaned already.
        "apiVersion: camel.apache.org/v1\nkind: Integration\nmetadata:\n  name: a\n  \
         annotations:\n    camelk.dev/owner-keys: reconciler\n",
    ] {
        let s = stripped(text);
        assert_eq!(s.text, text);
        assert!(s.resources.is_empty());
    }
}

#[test]
fn crlf_line_ends_are_kept() {
    let s = stripped(
        "apiVersion: camel.apache.org/v1\r\nkind: Pipe\r\nmetadata:\r\n  name: a\r\n  \
         labels:\r\n    app: a\r\n    camel.apache.org/operator.id: op-1\r\n  \
         annotations:\r\n    note: x\r\n",
    );
    assert_eq!(
        s.text,
        "apiVersion: camel.apache.org/v1\r\nkind: Pipe\r\nmetadata:\r\n  name: a\r\n  \
         labels:\r\n    app: a\r\n  annotations:\r\n    note: x\r\n    \
         camelk.dev/owner-keys: reconciler\r\n"
    );
}

#[test]
fn a_syntax_error_is_named_at_its_line_and_column_in_its_document() {
    let text = "\
apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: a
---
apiVersion: camel.apache.org/v1
kind: Pipe
metadata:
  name: [b
  annotations:
    camel.apache.org/operator.id: op-1
";
    let message = refused(text);
    assert!(
        message.starts_with("apps/shop.yaml:10:"),
        "the position is in the file, not the document: {message}"
    );
    assert!(
        message.contains(": error: YAML syntax error: "),
        "{message}"
    );
    assert!(message.ends_with("; left untouched"), "{message}");
}

#[test]
fn a_template_is_a_warning_and_other_refusals_name_their_place() {
    let helm = "\
{{- if .Values.enabled }}
apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: {{ .Release.Name }}
  annotations:
    camel.apache.org/operator.id: {{ .Values.operatorId | quote }}
{{- end }}
";
    // Not YAML at all, or YAML whose key holds a template expression.
    for text in [helm, &helm[helm.find('\n').unwrap() + 1..]] {
        let warning = strip("chart/templates/it.yaml", text).unwrap_err();
        assert_eq!(warning.severity, Severity::Warning);
        assert_eq!(
            warning.message,
            "not plain YAML (a Helm or Go template?): left untouched; it names \
             camel.apache.org/operator.id: remove it from the chart by hand",
        );
    }

    let twice = "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  name: a\n  labels:\n    \
                 camel.apache.org/operator.id: a\n    camel.apache.org/operator.id: b\n";
    assert_eq!(
        refused(twice),
        "apps/shop.yaml:7:5: error: camel.apache.org/operator.id appears twice in \
         `metadata.labels`; a key may appear once in a mapping"
    );

    let shared = "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  name: a\n  labels:\n    \
                  app: a\n    camel.apache.org/operator.id: b\n  annotations: {camel.apache.org/operator.id: \
                  b}\n";
    assert_eq!(stripped(shared).keys_removed(), 2);

    let only_label = "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  labels:\n    \
                      camel.apache.org/operator.id: b\n";
    assert_eq!(
        refused(only_label),
        "apps/shop.yaml:5:5: error: camel.apache.org/operator.id is only a label of this \
         resource, and it has no `metadata.annotations` to put the marker in: add the \
         annotation by hand (`annotations:` with `camelk.dev/owner-keys: reconciler`), then \
         run again"
    );

    let comment_inside = "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  name: a\n  \
                          annotations:\n    camel.apache.org/operator.id: # kamel\n      b\n";
    assert_eq!(
        refused(comment_inside),
        "apps/shop.yaml:6:5: error: a comment between the key and the value of \
         camel.apache.org/operator.id; replace the entry with `camelk.dev/owner-keys: \
         reconciler` by hand"
    );

    let not_utf8 = strip_bytes("apps/shop.yaml", b"kind: Pipe\nname: \xff\n").unwrap_err();
    assert_eq!(
        not_utf8.to_string(),
        "apps/shop.yaml:2:7: error: the file is not UTF-8 (byte 0xff here); YAML is UTF-8: \
         left untouched"
    );
}

#[test]
fn a_kustomization_that_adds_the_key_is_named_in_a_note() {
    let text = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
commonAnnotations:
  camel.apache.org/operator.id: operator-1
resources:
  - orders.yaml
";
    let s = stripped(text);
    assert_eq!(s.text, text);
    assert_eq!(
        s.notes.iter().map(|d| d.at).collect::<Vec<_>>(),
        [Location { line: 4, column: 3 }]
    );
}

#[test]
fn the_guard_refuses_an_edit_that_would_change_another_node() {
    // An anchor on the removed value, aliased elsewhere: removing it would
    // leave a dangling alias, which the guard's second parse refuses.
    let text = "\
apiVersion: camel.apache.org/v1
kind: Integration
metadata:
  name: a
  annotations:
    camel.apache.org/operator.id: &owner operator-1
    other: x
spec:
  owner: *owner
";
    assert_eq!(
        refused(text),
        "apps/shop.yaml:1:1: error: internal error: the edit would change more than the owner \
         keys; left untouched"
    );
}

#[test]
fn a_label_alone_adds_the_marker_after_the_last_annotation() {
    // A block map: a line of its own after the line the last entry ends on
    // (here a block scalar, then a trailing comment), indented as the entries.
    let s = stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: a
   annotations:
       note: x   # first
       description: |
         Orders,
         every minute.
+      camelk.dev/owner-keys: reconciler
   labels:
-    camel.apache.org/operator.id: operator-1
     app: a
 spec: {}
"#,
    );
    assert_eq!(s.resources[0].removed(), "label=operator-1");
    assert_eq!(s.keys_removed(), 1);

    // The last line of a file without a final line break; the labels,
    // emptied, go.
    let s = stripped(
        "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  name: a\n  labels:\n    \
         camel.apache.org/operator.id: op-1\n  annotations:\n    note: x # last",
    );
    assert_eq!(
        s.text,
        "apiVersion: camel.apache.org/v1\nkind: Pipe\nmetadata:\n  name: a\n  annotations:\n    \
         note: x # last\n    camelk.dev/owner-keys: reconciler"
    );

    // Flow maps: after the last entry, or inside `{}`.
    stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Pipe
-metadata: {name: a, labels: {a: b, camel.apache.org/operator.id: op-1}, annotations: {x: y}}
+metadata: {name: a, labels: {a: b}, annotations: {x: y, camelk.dev/owner-keys: reconciler}}
"#,
    );
    stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Pipe
 metadata:
   name: a
-  labels:
-    camel.apache.org/operator.id: op-1
-  annotations: {}
+  annotations: {camelk.dev/owner-keys: reconciler}
"#,
    );
}

#[test]
fn a_marker_already_there_is_not_added_again() {
    // Put there by hand: the owner annotation goes, the label too.
    let s = stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: a
   annotations:
     camelk.dev/owner-keys: reconciler
-    camel.apache.org/operator.id: operator-1
   labels:
     app: a
-    camel.apache.org/operator.id: operator-1
"#,
    );
    assert_eq!(s.keys_removed(), 2);

    // A label alone, the marker there: only the label goes.
    stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Pipe
 metadata:
   name: a
-  labels:
-    camel.apache.org/operator.id: op-1
   annotations: {camelk.dev/owner-keys: reconciler}
"#,
    );
}

#[test]
fn a_second_run_on_a_cleaned_file_changes_nothing() {
    let (before, after) = before_after(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: orders
   annotations:
-    camel.apache.org/operator.id: operator-1   # kamel run -x
-  labels:
-    camel.apache.org/operator.id: operator-1
+    camelk.dev/owner-keys: reconciler   # kamel run -x
 spec: {}
 ---
 apiVersion: camel.apache.org/v1
 kind: Pipe
-metadata: {name: feed, labels: {camel.apache.org/operator.id: op-1}, annotations: {x: y}}
+metadata: {name: feed, annotations: {x: y, camelk.dev/owner-keys: reconciler}}
"#,
    );
    let first = strip("apps/shop.yaml", &before).unwrap();
    assert_eq!(first.keys_removed(), 3);
    assert_eq!(first.text, after);
    let second = strip("apps/shop.yaml", &first.text).unwrap();
    assert_eq!(second.text, first.text);
    assert!(second.resources.is_empty());
    assert_eq!(second.keys_removed(), 0);
    assert!(second.notes.is_empty());
}

#[test]
fn owner_keys_written_as_block_scalars_take_their_lines_only() {
    let s = stripped_as(
        r#"
 apiVersion: camel.apache.org/v1
 kind: Integration
 metadata:
   name: a
   annotations:
-    camel.apache.org/operator.id: >-
-      operator-1
+    camelk.dev/owner-keys: reconciler

     # kept
     other: x
   labels:
-    camel.apache.org/operator.id: |-
-      operator-1
   # kept too
     app: a
"#,
    );
    assert_eq!(
        s.resources[0].removed(),
        "label=operator-1 annotation=operator-1"
    );
}
