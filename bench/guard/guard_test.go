package main

import (
	"bytes"
	"strings"
	"testing"
)

// The summary's ratios are the medians of the rounds' own ratios, not
// ratios of medians: a round where the machine slowed everything moves A,
// B and K together and leaves its B/A alone.
func TestSummaryRatiosAreMediansOfRoundRatios(t *testing.T) {
	m := metric{Key: "throughput", Unit: "records/s", HigherBetter: true, value: func(r run) float64 { return r.AckedPerSec }}
	rep := report{Rounds: 3}
	for round, v := range [][3]float64{{100, 110, 200}, {50, 56, 100}, {80, 80, 160}} {
		for i, target := range []string{"A", "B", "K"} {
			rep.Runs = append(rep.Runs, run{Metric: "throughput", Round: round + 1, Target: target, Value: v[i], AckedPerSec: v[i]})
		}
	}
	rep.summarise([]metric{m})
	s := rep.Summary[0]
	if got := s.Ratio["B/A"]; got != 1.1 {
		t.Errorf("B/A = %v, want 1.1 (rounds 1.1, 1.12, 1.0)", got)
	}
	if got := s.Ratio["A/K"]; got != 0.5 {
		t.Errorf("A/K = %v, want 0.5", got)
	}
	if r := s.Range["B/A"]; r != [2]float64{1, 1.12} {
		t.Errorf("B/A range = %v, want [1 1.12]", r)
	}
	if s.Median["A"] != 80 || s.Median["K"] != 160 {
		t.Errorf("medians %v, want A 80 and K 160", s.Median)
	}
	var out bytes.Buffer
	rep.writeTables(&out, []metric{m})
	if !strings.Contains(out.String(), "throughput +10.0% (better)") {
		t.Errorf("the verdict line is missing or wrong:\n%s", out.String())
	}
}

// A fixed-rate run that did not carry its rate is flagged in the report.
func TestShortfallNamesARunThatFellBehind(t *testing.T) {
	m := metric{Key: "cpu", Rate: 50000}
	if s := shortfall(m, run{AckedPerSec: 49900}); s != "" {
		t.Errorf("a run at its rate was flagged: %s", s)
	}
	if s := shortfall(m, run{AckedPerSec: 25000, Dropped: 3}); !strings.Contains(s, "25,000") || !strings.Contains(s, "3 records dropped") {
		t.Errorf("shortfall = %q", s)
	}
}
