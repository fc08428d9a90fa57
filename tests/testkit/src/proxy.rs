//! A TCP proxy on loopback that a test can cut (every connection dropped,
//! new ones refused) or make hang (connections accepted, nothing answered),
//! in front of the API server or a Git host. A fault injector in front of a
//! real server, not a mock of it.
//!
//! It counts the connections it accepts, in every mode: a client behind a
//! proxy of its own (its own kubeconfig, [`Proxy::kubeconfig`]) shows how
//! often it dials while the server is cut, which is how the tests tell a
//! backoff from a tight retry loop.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::Error;
use crate::cluster::{self, ClusterDir};

/// What the proxy does with connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Connections are forwarded to the target.
    Pass,
    /// Connections are closed at once, and open ones dropped.
    Cut,
    /// Connections are accepted and held, never answered.
    Hang,
}

/// A running proxy; it stops with the test process's runtime.
pub struct Proxy {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
    accepted: Arc<AtomicU64>,
}

impl Proxy {
    /// Forwards a loopback port of its own to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, _) = watch::channel(Mode::Pass);
        let mode = Arc::new(tx);
        let modes = mode.clone();
        let accepted = Arc::new(AtomicU64::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut client, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                let now = *modes.borrow();
                match now {
                    Mode::Cut => drop(client),
                    Mode::Hang => held.push(client),
                    Mode::Pass => {
                        held.clear();
                        let mut changes = modes.subscribe();
                        tokio::spawn(async move {
                            let Ok(mut server) = TcpStream::connect(target).await else {
                                return;
                            };
                            tokio::select! {
                                _ = copy_bidirectional(&mut client, &mut server) => {}
                                _ = changes.wait_for(|m| *m != Mode::Pass) => {}
                            }
                        });
                    }
                }
            }
        });
        Ok(Proxy {
            addr,
            mode,
            accepted,
        })
    }

    /// A proxy in front of the API server of the cluster in `dir` (the
    /// server its kubeconfig names).
    pub async fn in_front_of_api_server(dir: &ClusterDir) -> Result<Proxy, Error> {
        let config = Kubeconfig::read_from(dir.kubeconfig())?;
        let server = config
            .clusters
            .iter()
            .find_map(|c| c.cluster.as_ref()?.server.clone())
            .unwrap_or_default();
        let target: SocketAddr = server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()
            .map_err(|e| Error::Start {
                process: "a proxy".into(),
                message: format!("the API server address {server:?}: {e}"),
            })?;
        Proxy::start(target).await.map_err(|source| Error::Io {
            context: "starting a proxy".into(),
            source,
        })
    }

    /// Writes at `path` a copy of the kubeconfig of the cluster in `dir`
    /// that dials this proxy (the API server's certificate names 127.0.0.1,
    /// which the proxy listens on too).
    pub fn kubeconfig(&self, dir: &ClusterDir, path: &Path) -> Result<(), Error> {
        cluster::write_kubeconfig_copy(dir, Some(&format!("https://{}", self.addr)), None, path)
    }

    /// A client acting as `identity` (a context of the kubeconfig of the
    /// cluster in `dir`) that dials this proxy.
    pub async fn client_as(&self, dir: &ClusterDir, identity: &str) -> Result<Client, Error> {
        let mut config = Kubeconfig::read_from(dir.kubeconfig())?;
        for named in &mut config.clusters {
            if let Some(cluster) = named.cluster.as_mut() {
                cluster.server = Some(format!("https://{}", self.addr));
            }
        }
        let options = KubeConfigOptions {
            context: Some(identity.to_string()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(config, &options).await?;
        Ok(Client::try_from(config)?)
    }

    /// Switches what it does with connections, open ones included.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// How many connections it has accepted since it started, in any mode.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}
