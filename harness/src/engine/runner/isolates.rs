//! A scenario's processes: its isolates' workerd (with the count they
//! share, when they share one) or its native instances, started together,
//! restarted with empty memory, and retired with every line they wrote.

use super::{EngineError, Isolate, Runner, SharedCount, shares_count};
use crate::engine::observation::{InstanceKind, InstanceRecord};
use crate::language::scenario::ClockKind;
use crate::world::instance::Instance;
use crate::world::workerd::config::{BindingCounter, IsolateConfig, write_config};
use crate::world::workerd::reference::{CountingCore, STORE_FLAGS, fresh_storage};
use crate::world::workerd::{EmulatedBinding, WorkerdProcess};

impl Runner<'_> {
    /// Writes the isolates' workerd config (the deployable's plan, its
    /// bindings, where their count is kept) and starts `count` of them.
    pub(super) async fn start_isolates(
        &mut self,
        plan: &str,
        bindings: &[EmulatedBinding],
        count: usize,
    ) -> Result<(), EngineError> {
        self.configured = bindings
            .iter()
            .filter(|b| b.in_config)
            .map(|b| b.name.clone())
            .collect();
        let dir = tempfile::Builder::new()
            .prefix("harness-")
            .tempdir()
            .map_err(EngineError::Config)?;
        let date = self.env.workerd.version.clone();
        // A store only when some binding is in the config (one missing from
        // start to end never asks it) and the count is shared: by two
        // isolates or more, or with the next process of a restarted isolate.
        // One isolate never restarted has no one to share its count with, so
        // the harness's core counts in its own process (where Cloudflare's
        // binding counts too: "a count kept where the Worker runs"); a shared
        // count is kept in the run's store, in the scenario's scope. The
        // reference core always counts in a process of the scenario's own,
        // on fresh storage.
        let counter = match &self.env.core {
            _ if self.configured.is_empty() => BindingCounter::InIsolate,
            CountingCore::Harness if !shares_count(self.prepared, count) => {
                BindingCounter::InIsolate
            }
            CountingCore::Harness => {
                let port = self.env.count_server.port(&self.env.workerd.path, &date)?;
                self.shared_count = SharedCount::RunStore { port };
                BindingCounter::CountServer {
                    port,
                    scope: &self.scope,
                }
            }
            CountingCore::Reference(simulator) => {
                let storage = fresh_storage().map_err(EngineError::Config)?;
                let store_config = simulator
                    .write_reference_config(dir.path(), storage.path())
                    .map_err(EngineError::Config)?;
                self._reference_storage = Some(storage);
                let store = WorkerdProcess::start_with_flags(
                    &self.env.workerd.path,
                    &store_config,
                    STORE_FLAGS,
                    self.epoch,
                )
                .await
                .map_err(EngineError::StoreStart)?;
                let port = store.port;
                self.shared_count = SharedCount::Reference(Box::new(store));
                BindingCounter::Reference { port, simulator }
            }
        };
        let config = IsolateConfig {
            plan,
            bindings,
            compatibility_date: &date,
            control_token: &self.token,
            counter,
            data_points: self.dataset.as_ref(),
            limiting_off: false,
        };
        let path =
            write_config(dir.path(), &config, &self.env.deployable).map_err(EngineError::Config)?;
        self._dir = Some(dir);
        self.start_all(count, path).await
    }

    /// Starts the scenario's `count` isolates at once, each a first generation.
    pub(super) async fn start_all(
        &mut self,
        count: usize,
        config: std::path::PathBuf,
    ) -> Result<(), EngineError> {
        let starts = (0..count).map(|isolate| self.start_instance(isolate, &config));
        let started = futures::future::join_all(starts).await;
        for process in started {
            self.isolates.push(Isolate {
                process: process?,
                generation: 0,
                served: false,
                config: config.clone(),
            });
        }
        Ok(())
    }

    /// Starts one process for `isolate`: a native instance when the scenario's
    /// deployable is native, else a workerd on `config`.
    async fn start_instance(
        &self,
        isolate: usize,
        config: &std::path::Path,
    ) -> Result<Instance, EngineError> {
        Ok(match &self.native {
            Some(native) => Instance::Native(
                native
                    .start(self.epoch)
                    .await
                    .map_err(|source| EngineError::NativeStart { isolate, source })?,
            ),
            None => Instance::Workerd(
                WorkerdProcess::start(&self.env.workerd.path, config, self.epoch)
                    .await
                    .map_err(|source| EngineError::Start { isolate, source })?,
            ),
        })
    }

    /// Fails the run when the run's count server, or a process of the
    /// scenario's, is gone: an exit mid-scenario is a crash, with its stderr.
    pub(super) fn check_alive(&mut self, step: usize) -> Result<(), EngineError> {
        if let SharedCount::RunStore { .. } = self.shared_count {
            self.env.count_server.alive()?;
        }
        for (isolate, i) in self.isolates.iter_mut().enumerate() {
            if let Some(status) = i.process.exited() {
                return Err(EngineError::Crashed {
                    isolate,
                    step,
                    status: status.to_string(),
                    stderr: i.process.stderr(),
                });
            }
        }
        Ok(())
    }

    /// `restart_isolate`: a new workerd process for the isolate, with empty
    /// memory, reading the same clock.
    pub(super) async fn restart(&mut self, index: usize) -> Result<(), EngineError> {
        let old = self.isolates.remove(index);
        let config = old.config.clone();
        let generation = old.generation + 1;
        self.retire(index, old, false).await?;
        let process = self.start_instance(index, &config).await?;
        self.isolates.insert(
            index,
            Isolate {
                process,
                generation,
                served: false,
                config,
            },
        );
        match self.clock_kind {
            ClockKind::Scenario => self.push_clock().await,
            ClockKind::Wall => Ok(()),
        }
    }

    /// Reads what reached its bindings and its metrics (added to the totals
    /// at the end: all of them `at_end`, its counts alone when it is
    /// restarted mid-run), stops it, and keeps every line it wrote: its log
    /// is read to the end after the kill (every line counts for the
    /// fallback and no-key checks), or the run fails saying it was not.
    pub(super) async fn retire(
        &mut self,
        index: usize,
        mut isolate: Isolate,
        at_end: bool,
    ) -> Result<(), EngineError> {
        // What reached the bindings is judged (`binding_keys`): a live
        // process whose stats cannot be read fails the run. One that exited
        // has been reported as a crash.
        let mut stats_read = Ok(());
        if isolate.process.exited().is_none() && isolate.process.has_bindings() {
            match self.binding_stats(&isolate.process.url()).await {
                Ok(stats) => {
                    self.record_binding_calls(index, isolate.generation, &stats);
                    self.record_binding_keys(stats);
                }
                Err(e) => stats_read = Err(e),
            }
        }
        // Its metrics are judged (`metrics`, no key in them) as its stats are.
        if isolate.process.exited().is_none() && self.has_metrics() && stats_read.is_ok() {
            let source = self.source_of(index, &isolate);
            match self.read_metrics(&source).await {
                Ok(Some(reading)) => self.add_to_totals(&reading, at_end),
                Ok(None) => {}
                Err(e) => stats_read = Err(e),
            }
        }
        let kind = match &isolate.process {
            Instance::Workerd(_) => InstanceKind::Workerd,
            Instance::Native(_) => InstanceKind::Native,
        };
        let (lines, unfinished) = match isolate.process.stop().await {
            Ok(lines) => (lines, None),
            Err(mut unfinished) => {
                let lines = std::mem::take(&mut unfinished.lines);
                (lines, Some(unfinished))
            }
        };
        self.observation.instances.push(InstanceRecord {
            kind,
            isolate: index,
            generation: isolate.generation,
            lines,
            served: isolate.served,
        });
        stats_read?;
        match unfinished {
            None => Ok(()),
            Some(source) => Err(EngineError::LogUnfinished {
                isolate: index,
                generation: isolate.generation,
                source,
            }),
        }
    }
}
