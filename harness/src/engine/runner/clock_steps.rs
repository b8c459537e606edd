//! The clock every process of a scenario reads: started at a minute's
//! beginning (or, on the wall clock, with room left in the minute), and
//! moved by `wait_for_window`, `wait_for_room` and `advance_clock`; and a
//! step of one native instance's wall clock alone, `step_wall_clock`.

use std::time::Duration;

use super::{ControlRequest, EngineError, MINUTE_ROOM, Runner, SharedCount, WALL_MARGIN, wall_ms};
use crate::engine::clock::{self, ScenarioClock};
use crate::language::scenario::{ClockKind, StepWallClock, WaitForRoom};

impl Runner<'_> {
    /// Starts the clock: the scenario clock at the beginning of the next
    /// minute, or (for the wall clock) waits for 20 s of room in this one.
    pub(super) async fn start_clock(&mut self) -> Result<(), EngineError> {
        let started = match self.clock_kind {
            ClockKind::Scenario => {
                self.clock = ScenarioClock::starting_at(wall_ms());
                self.push_clock().await
            }
            ClockKind::Wall => {
                let minute_room = MINUTE_ROOM.as_millis() as u64;
                self.move_clock(clock::to_room(wall_ms(), clock::MINUTE_MS, minute_room))
                    .await
            }
        };
        self.clock_origin_ms = clock::minute_of(self.now_ms());
        started
    }

    /// The scenario clock now, in ms since the beginning of the minute it
    /// started in.
    pub(super) fn scenario_ms(&self) -> u64 {
        self.now_ms().saturating_sub(self.clock_origin_ms)
    }

    /// The time every process of the scenario reads now, in ms since the epoch.
    fn now_ms(&self) -> u64 {
        self.clock.now_ms(wall_ms())
    }

    /// Moves the scenario's time forward by `by_ms`: at once on the scenario
    /// clock, by sleeping (past the boundary, by [`WALL_MARGIN`]) on the wall clock.
    async fn move_clock(&mut self, by_ms: u64) -> Result<(), EngineError> {
        if by_ms == 0 {
            return Ok(());
        }
        match self.clock_kind {
            ClockKind::Scenario => {
                self.clock = self.clock.advanced(by_ms);
                self.push_clock().await
            }
            ClockKind::Wall => {
                tokio::time::sleep(Duration::from_millis(by_ms) + WALL_MARGIN).await;
                Ok(())
            }
        }
    }

    /// `wait_for_window`: to the next boundary of a window of `seconds`.
    pub(super) async fn wait_for_window(&mut self, seconds: u32) -> Result<(), EngineError> {
        let by = clock::to_next_boundary(self.now_ms(), u64::from(seconds) * 1000);
        self.move_clock(by).await
    }

    /// `wait_for_room`: to the next boundary only if too little is left of the window.
    pub(super) async fn wait_for_room(&mut self, room: WaitForRoom) -> Result<(), EngineError> {
        let by = clock::to_room(
            self.now_ms(),
            u64::from(room.window) * 1000,
            u64::from(room.seconds) * 1000,
        );
        self.move_clock(by).await
    }

    /// `advance_clock`: the scenario clock jumps `seconds` ahead.
    pub(super) async fn advance_clock(&mut self, seconds: u32) -> Result<(), EngineError> {
        self.move_clock(u64::from(seconds) * 1000).await
    }

    /// `step_wall_clock`: one native instance's wall clock alone steps by
    /// `step.ms` (`POST /clock` with `wall_step_ms`), as NTP or a resumed VM
    /// steps it; the scenario clock, the other instances' and Redis's stay.
    /// Steps add up; a restarted instance starts with none.
    pub(super) async fn step_wall_clock(&self, step: StepWallClock) -> Result<(), EngineError> {
        let url = self.isolates[step.isolate].process.url();
        let body = serde_json::json!({
            "offset_ms": self.clock.offset_ms,
            "wall_step_ms": step.ms,
        });
        self.control(
            ControlRequest::SetClock,
            self.client.post(format!("{url}/clock")).json(&body),
        )
        .await?;
        Ok(())
    }

    /// Tells every isolate and the count server the scenario clock's offset
    /// (`POST /clock`; the run's store, for the scenario's scope); a
    /// wall-clock scenario never calls it, so its processes read the real
    /// clock through the production path.
    pub(super) async fn push_clock(&self) -> Result<(), EngineError> {
        let body = serde_json::json!({ "offset_ms": self.clock.offset_ms });
        let reference = match &self.shared_count {
            SharedCount::Reference(store) => Some(store.url()),
            _ => None,
        };
        let urls = self
            .isolates
            .iter()
            .map(|i| i.process.url())
            .chain(reference);
        for url in urls {
            self.control(
                ControlRequest::SetClock,
                self.client.post(format!("{url}/clock")).json(&body),
            )
            .await?;
        }
        if let SharedCount::RunStore { port } = self.shared_count {
            let scoped =
                serde_json::json!({ "scope": self.scope, "offset_ms": self.clock.offset_ms });
            self.control(
                ControlRequest::SetClock,
                self.client
                    .post(format!("http://127.0.0.1:{port}/clock"))
                    .json(&scoped),
            )
            .await?;
        }
        Ok(())
    }
}
