//! A TCP proxy on loopback that a scenario can cut (every connection dropped,
//! new ones refused) or make hang (connections accepted, nothing answered),
//! in front of the API server or a Git host. A fault injector in front of a
//! real server, not a mock of it.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    /// Connections are closed at once, and open ones dropped.
    Cut,
    /// Connections are accepted and held, never answered.
    Hang,
}

pub struct Proxy {
    pub addr: SocketAddr,
    mode: Arc<watch::Sender<Mode>>,
}

impl Proxy {
    /// Forwards a loopback port of its own to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, _) = watch::channel(Mode::Pass);
        let mode = Arc::new(tx);
        let modes = mode.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut client, _)) = listener.accept().await {
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
        Ok(Proxy { addr, mode })
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}
