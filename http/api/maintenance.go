package api

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queen-mq/queen/tenancy"
)

// Maintenance mode (docs/http-api.md, "Maintenance mode"; docs/decisions.md).
// Two cluster-wide switches, stored like the ephemeral switch in the system
// tenant's KV (system_settings.go), so raft replicates them and they
// survive restarts:
//   - push maintenance: HTTP pushes are committed to the replicated hold
//     (maintenance_hold.go) instead of their queues, and delivered in
//     order once the switch is off; Kafka produce is refused retriably.
//   - pop maintenance: every pop answers nothing.
//
// Every node mirrors the stored switches into the engine's atomics
// (raftgroups.Engine.SetMaintenance) from a loop (maintLoop), so the push
// and pop paths pay one atomic load; the node that changes a switch
// mirrors it at once.
const (
	maintPushKey = "maintenance.push"
	maintPopKey  = "maintenance.pop"
)

// maintPoll is how often a node reads the stored switches and the hold:
// how long, at most, another node takes to follow a switch.
const maintPoll = 100 * time.Millisecond

// maintState is a server's share of maintenance mode.
type maintState struct {
	// done is closed when maintLoop has ended.
	done chan struct{}
	// gate orders held pushes against the end of holding on this node: a
	// push that holds does so under the read lock, having seen holding on
	// under it; holding is turned off under the write lock, once the hold
	// is seen empty with no held push in flight. Without it a push that
	// saw holding on could commit to the hold just after the drain found
	// it empty, and the next push, delivered at once, would overtake it.
	gate sync.RWMutex
	// stats is what this node knows of its own drains.
	stats holdState
}

// maintSwitch is a stored switch.
type maintSwitch struct {
	Enabled bool `json:"enabled"`
}

// storedSwitch reads a switch from this node's applied state (off when
// absent).
func (s *Server) storedSwitch(key string) bool {
	b, ok := s.systemGet(key)
	var sw maintSwitch
	if !ok || json.Unmarshal(b, &sw) != nil {
		return false
	}
	return sw.Enabled
}

// readSwitchBody reads {"enabled": bool}; anything else is a 400, as
// Queen answers.
func readSwitchBody(ctx *fasthttp.RequestCtx) (bool, error) {
	var b struct {
		Enabled json.RawMessage `json:"enabled"`
	}
	if err := readJSON(ctx, &b); err != nil {
		return false, err
	}
	switch string(b.Enabled) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badRequest("enabled (boolean) is required")
}

// setSwitch stores a switch once a quorum commits it and mirrors the
// switches on this node at once.
func (s *Server) setSwitch(key string, on bool) error {
	v, err := json.Marshal(maintSwitch{Enabled: on})
	if err != nil {
		return err
	}
	if err := s.systemPut(key, v); err != nil {
		return err
	}
	s.mirrorMaintenance()
	return nil
}

// maintenanceState is GET /api/v1/system/maintenance's answer.
func (s *Server) maintenanceState() (map[string]any, error) {
	if err := s.catchUpSystem(); err != nil {
		return nil, err
	}
	st := s.holdStats()
	return map[string]any{
		"maintenanceMode":    s.storedSwitch(maintPushKey),
		"popMaintenanceMode": s.storedSwitch(maintPopKey),
		"bufferedMessages":   st.Pending,
		"bufferHealthy":      st.Healthy,
		"bufferStats":        st,
	}, nil
}

// maintenanceGet is GET /api/v1/system/maintenance.
func (s *Server) maintenanceGet(ctx *fasthttp.RequestCtx) error {
	ans, err := s.maintenanceState()
	if err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// maintenanceSet is POST /api/v1/system/maintenance {"enabled": bool}.
func (s *Server) maintenanceSet(ctx *fasthttp.RequestCtx) error {
	on, err := readSwitchBody(ctx)
	if err != nil {
		return err
	}
	if err := s.setSwitch(maintPushKey, on); err != nil {
		return err
	}
	ans, err := s.maintenanceState()
	if err != nil {
		return err
	}
	ans["message"] = "Maintenance mode DISABLED. Held pushes are delivered to their queues in order."
	if on {
		ans["message"] = "Maintenance mode ENABLED. HTTP pushes are held durably (raft-committed) until it is disabled; Kafka produce is refused retriably."
	}
	writeJSON(ctx, http.StatusOK, ans)
	return nil
}

// popMaintenanceAnswer is GET/POST /api/v1/system/maintenance/pop's answer.
func popMaintenanceAnswer(on bool) map[string]any {
	msg := "Pop maintenance mode DISABLED. Pops deliver messages."
	if on {
		msg = "Pop maintenance mode ENABLED. Every pop returns empty."
	}
	return map[string]any{"popMaintenanceMode": on, "message": msg}
}

// popMaintenanceGet is GET /api/v1/system/maintenance/pop.
func (s *Server) popMaintenanceGet(ctx *fasthttp.RequestCtx) error {
	if err := s.catchUpSystem(); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, popMaintenanceAnswer(s.storedSwitch(maintPopKey)))
	return nil
}

// popMaintenanceSet is POST /api/v1/system/maintenance/pop {"enabled": bool}.
func (s *Server) popMaintenanceSet(ctx *fasthttp.RequestCtx) error {
	on, err := readSwitchBody(ctx)
	if err != nil {
		return err
	}
	if err := s.setSwitch(maintPopKey, on); err != nil {
		return err
	}
	writeJSON(ctx, http.StatusOK, popMaintenanceAnswer(on))
	return nil
}

// mirrorMaintenance copies the stored switches into the engine. Pushes
// keep going to the hold while it still holds anything after the switch
// is off, so nothing pushed later overtakes what was held.
func (s *Server) mirrorMaintenance() bool {
	if s.engine == nil {
		return false
	}
	push, pop := s.storedSwitch(maintPushKey), s.storedSwitch(maintPopKey)
	pending := s.holdPending()
	if !push && !pending && s.engine.Holding() {
		// Turning holding off: wait out the held pushes in flight, then
		// look at the hold again (they may have added to it).
		s.maint.gate.Lock()
		defer s.maint.gate.Unlock()
		push, pending = s.storedSwitch(maintPushKey), s.holdPending()
	}
	s.engine.SetMaintenance(push || pending, pop)
	return !push && pending
}

// maintLoop mirrors the switches every maintPoll and, on the node leading
// the system tenant's KV group, drains the hold once push maintenance is
// off. It runs until the server's base context ends (Shutdown).
func (s *Server) maintLoop(done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(maintPoll)
	defer t.Stop()
	// A delivery that keeps failing is logged when its error changes and
	// at most once a minute otherwise, not at every retry.
	var lastErr string
	var loggedAt time.Time
	for {
		select {
		case <-s.base.Done():
			return
		case <-t.C:
		}
		if !s.mirrorMaintenance() || !s.engine.Leads(s.engine.KVGroup(tenancy.SystemTenant)) {
			continue
		}
		// Drain until the hold is empty or a batch fails (tried again on
		// the next tick); the switches are re-read between batches.
		for s.base.Err() == nil {
			n, err := s.drainHold()
			if err != nil {
				if err.Error() != lastErr || time.Since(loggedAt) >= time.Minute {
					s.log.Warn("http: maintenance hold: delivery failed; retrying", "err", err)
					lastErr, loggedAt = err.Error(), time.Now()
				}
				break
			}
			lastErr = ""
			if n == 0 || s.storedSwitch(maintPushKey) {
				break
			}
		}
		s.mirrorMaintenance()
	}
}

// startMaintenance starts maintLoop; Shutdown waits for it through the
// returned channel.
func (s *Server) startMaintenance() chan struct{} {
	done := make(chan struct{})
	if s.engine == nil {
		close(done)
		return done
	}
	s.mirrorMaintenance()
	// Scrapes read this node's applied state: the hold's count is the
	// cluster's, the holding flag this node's.
	s.metrics.GetOrCreateGauge("queen_maintenance_held_items", func() float64 { return float64(s.heldCount()) })
	s.metrics.GetOrCreateGauge("queen_maintenance_holding", func() float64 { return boolGauge(s.engine.Holding()) })
	s.metrics.GetOrCreateGauge("queen_maintenance_pop_paused", func() float64 { return boolGauge(s.engine.PopPaused()) })
	go s.maintLoop(done)
	return done
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
