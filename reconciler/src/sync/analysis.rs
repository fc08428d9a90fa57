//! Reading Prometheus for a step's metric analysis (`healthGate.analysis`;
//! the rules are [`crate::manifest::analysis`]'s): each query of a measurement
//! as an instant query of the HTTP API, its samples with their labels.
//!
//! An answer that is not a vector or a scalar, an HTTP error, a refused
//! query or an unreachable server is an error reading, never a pass.

use std::time::Duration;

use serde::Deserialize;

use crate::manifest::analysis::Reading;

/// How long one query may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs each of `queries` (name, PromQL) against the Prometheus at `url`.
pub(super) async fn measure(url: &str, queries: Vec<(String, String)>) -> Vec<Reading> {
    let endpoint = format!("{}/api/v1/query", url.trim_end_matches('/'));
    // ureq blocks: the measurement runs beside the runtime.
    let readings = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .build()
            .into();
        queries
            .into_iter()
            .map(|(name, promql)| Reading {
                samples: query(&agent, &endpoint, &promql),
                name,
            })
            .collect::<Vec<Reading>>()
    })
    .await;
    readings.unwrap_or_else(|e| {
        vec![Reading {
            name: "measurement".into(),
            samples: Err(format!("the measurement stopped: {e}")),
        }]
    })
}

/// The answer of Prometheus's HTTP API to an instant query.
#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Sample {
    #[serde(default)]
    metric: std::collections::BTreeMap<String, String>,
    value: (serde_json::Value, String),
}

fn query(agent: &ureq::Agent, endpoint: &str, promql: &str) -> Result<Vec<(String, f64)>, String> {
    let mut response = agent
        .get(endpoint)
        .query("query", promql)
        .call()
        .map_err(|e| format!("Prometheus unreachable: {e}"))?;
    let status = response.status();
    let answer: Answer = response
        .body_mut()
        .read_json()
        .map_err(|e| format!("Prometheus answered {status} with no readable body: {e}"))?;
    if answer.status != "success" {
        return Err(format!(
            "Prometheus refused the query ({status}): {}",
            answer.error.unwrap_or_default()
        ));
    }
    let data = answer.data.ok_or("Prometheus answered no data")?;
    samples(&data)
}

/// The samples of an instant vector or a scalar, each with its labels.
fn samples(data: &Data) -> Result<Vec<(String, f64)>, String> {
    let number = |text: &str| {
        text.parse::<f64>()
            .map_err(|_| format!("`{text}` is not a number"))
    };
    match data.result_type.as_str() {
        "vector" => {
            let samples: Vec<Sample> = serde_json::from_value(data.result.clone())
                .map_err(|e| format!("an unreadable vector: {e}"))?;
            samples
                .into_iter()
                .map(|s| {
                    let labels: Vec<String> = s
                        .metric
                        .iter()
                        .filter(|(k, _)| *k != "__name__")
                        .map(|(k, v)| format!("{k}=\"{v}\""))
                        .collect();
                    let labels = if labels.is_empty() {
                        String::new()
                    } else {
                        format!("{{{}}}", labels.join(","))
                    };
                    Ok((labels, number(&s.value.1)?))
                })
                .collect()
        }
        "scalar" => {
            let (_, value): (serde_json::Value, String) =
                serde_json::from_value(data.result.clone())
                    .map_err(|e| format!("an unreadable scalar: {e}"))?;
            Ok(vec![(String::new(), number(&value)?)])
        }
        other => Err(format!(
            "a {other} answer; write a query that gives an instant vector or a scalar"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> Data {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn vectors_and_scalars_are_read_with_their_labels() {
        let vector = data(
            r#"{"resultType":"vector","result":[{"metric":{"__name__":"x","integration":"a"},"value":[1.5,"0.25"]},{"metric":{},"value":[1.5,"NaN"]}]}"#,
        );
        let read = samples(&vector).unwrap();
        assert_eq!(read[0], ("{integration=\"a\"}".to_string(), 0.25));
        assert!(read[1].0.is_empty() && read[1].1.is_nan());
        let scalar = data(r#"{"resultType":"scalar","result":[1.5,"3"]}"#);
        assert_eq!(samples(&scalar).unwrap(), vec![(String::new(), 3.0)]);
        let matrix = data(r#"{"resultType":"matrix","result":[]}"#);
        assert!(samples(&matrix).unwrap_err().contains("a matrix answer"));
    }

    #[tokio::test]
    async fn an_unreachable_prometheus_is_an_error_reading() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let readings = measure(
            &format!("http://127.0.0.1:{port}"),
            vec![("q".into(), "up".into())],
        )
        .await;
        assert_eq!(readings.len(), 1);
        let why = readings[0].samples.clone().unwrap_err();
        assert!(why.starts_with("Prometheus unreachable"), "{why}");
    }
}
