package api

import "fmt"

// writeStreamsMetrics writes the Streams families of each group this node
// holds a replica of: queries and state rows (tenants' KV groups hold
// them), read from the replica at the scrape. The cycle counters are in
// the shared set (streams_cycle.go).
func (s *Server) writeStreamsMetrics(p promText) {
	status := s.engine.Host().Status()
	type usage struct{ queries, rows, bytes uint64 }
	got := make([]usage, len(status))
	for i, st := range status {
		q, r, b, err := s.engine.GroupStore(st.Group).StreamsUsage()
		if err != nil {
			s.log.Warn("metrics: reading the Streams namespace", "group", st.Group, "err", err)
			continue
		}
		got[i] = usage{q, r, b}
	}
	for _, f := range []struct {
		name  string
		value func(u usage) uint64
	}{
		{"queen_streams_queries", func(u usage) uint64 { return u.queries }},
		{"queen_streams_state_rows", func(u usage) uint64 { return u.rows }},
		{"queen_streams_state_bytes", func(u usage) uint64 { return u.bytes }},
	} {
		p.family(f.name, "gauge")
		for i, st := range status {
			p.value(f.name, fmt.Sprintf(`{group="%d"}`, st.Group), f.value(got[i]))
		}
	}
}
